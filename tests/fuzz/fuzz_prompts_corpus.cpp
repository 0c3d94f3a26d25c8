// libFuzzer harness: the prompts file reader (`lens --prompts`) and the corpus chunk reader (`lens --corpus`,
// `tuned-lens eval --corpus`) on arbitrary bytes; see fuzz::prompts_corpus in targets.hpp for the properties.
// The tokenizer: $VOCABLENS_FUZZ_GPT2_DIR (vocab.json + merges.txt), default ../shared/fixtures/gpt2-tiny.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<vocablens::Tokenizer> tok = [] {
    const char* dir = std::getenv("VOCABLENS_FUZZ_GPT2_DIR");
    return vocablens::load_tokenizer(dir ? dir : "../shared/fixtures/gpt2-tiny");
  }();
  return fuzz::prompts_corpus(*tok, data, size);
}
