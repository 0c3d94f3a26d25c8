// libFuzzer harness: a SentencePiece tokenizer.model (serialized ModelProto) through the charsmap check and
// libsentencepiece (encode every byte value, decode). Input: the model's bytes. See targets.hpp.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::spm_model(data, size); }
