// libFuzzer harness: GPT-2 byte-level BPE encode/decode on arbitrary bytes (invalid UTF-8 included).
// Property checked on every input: decode(encode(x)) == x, with and without special-token recognition.
// The vocabulary: $VOCABLENS_FUZZ_GPT2_DIR (vocab.json + merges.txt), default ../shared/fixtures/gpt2-tiny.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<vocablens::Tokenizer> tok = [] {
    const char* dir = std::getenv("VOCABLENS_FUZZ_GPT2_DIR");
    return vocablens::load_tokenizer(dir ? dir : "../shared/fixtures/gpt2-tiny");
  }();
  return fuzz::bpe_encode(*tok, data, size);
}
