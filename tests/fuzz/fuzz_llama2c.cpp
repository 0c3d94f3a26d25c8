// libFuzzer harness: the llama2.c checkpoint header reader (load_model on a .bin) on arbitrary bytes,
// then one forward step of any model it accepts (inputs are small, so such models are tiny).
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::llama2c(data, size); }
