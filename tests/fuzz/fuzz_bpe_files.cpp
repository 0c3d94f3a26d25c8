// libFuzzer harness: the GPT-2 BPE vocabulary readers (vocab.json + merges.txt, tokenizer.json) on
// arbitrary bytes, then encode/decode with whatever they accepted. Input layout: see targets.hpp.
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fuzz::bpe_files(data, size); }
