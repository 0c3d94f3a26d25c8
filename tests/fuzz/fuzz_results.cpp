// libFuzzer harness: a result directory (<kind>.json + .npy + .csv, what `vocablens report DIR` reads) on
// arbitrary bytes, then the HTML report and the notebook of whatever was accepted. Input layout: see
// targets.hpp.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::results(data, size); }
