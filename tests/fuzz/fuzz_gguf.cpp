// libFuzzer harness: the GGUF reader, dequantization and GGUF -> Model loading (read_gguf, load_model).
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::gguf(data, size); }
