// libFuzzer harness: transcoder sets (load_transcoders): config.yaml and a cross-layer transcoder's files.
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::transcoders(data, size); }
