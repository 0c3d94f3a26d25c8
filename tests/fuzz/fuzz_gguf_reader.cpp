// libFuzzer harness: the GGUF reader alone, cheap enough for tens of millions of executions on a small machine
// (read_gguf, each tensor's first row dequantized, the tokenizer.ggml.* vocabulary spec, and the metadata ->
// ModelConfig mapping; no weights loaded, no forward). fuzz_gguf runs the whole load + forward path.
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::gguf_reader(data, size); }
