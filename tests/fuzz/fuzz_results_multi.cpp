// libFuzzer harness: a run directory whose JSON names two side arrays (a.npy, b.npy), so that several arrays
// disagree in shape at once; then the HTML report and the notebook. Input layout: see targets.hpp.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::results_multi(data, size); }
