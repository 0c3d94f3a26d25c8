// libFuzzer harness: the llama2.c tokenizer file reader, then encode/decode with whatever it accepted.
// The first 4 bytes of the input are the text length; the text follows, the vocabulary file is the rest.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::llama2c_tokenizer(data, size); }
