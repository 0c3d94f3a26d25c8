// libFuzzer harness: the PyTorch zip + restricted pickle reader (read_torch_zip) on arbitrary bytes.
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::torch_zip(data, size); }
