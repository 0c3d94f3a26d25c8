// libFuzzer harness: the safetensors header/offset parser (read_safetensors) on arbitrary bytes.
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::safetensors(data, size); }
