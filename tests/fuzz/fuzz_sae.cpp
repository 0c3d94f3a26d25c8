// libFuzzer harness: the SAE / transcoder readers (load_sae, every layout) and encode/decode of what loads.
#define VOCABLENS_FUZZ_WITH_TORCH
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::sae(data, size); }
