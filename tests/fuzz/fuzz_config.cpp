// libFuzzer harness: config.json reading (parse_hf_config) on arbitrary text. See targets.hpp.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::config(data, size); }
