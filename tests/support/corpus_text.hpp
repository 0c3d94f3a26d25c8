// tests/support/corpus_text.hpp — the short English corpus of the corpus-mode tests (the logit lens and the SAE
// features over a text file): three lines, more than 40 GPT-2 tokens: several overlapping windows of 16.
//
//   vl_test::write_file(dir + "/c.txt", vl_test::kShortCorpus);
#pragma once

namespace vl_test {

inline constexpr const char* kShortCorpus =
    "The Eiffel Tower is in the city of Paris. It was built for the world fair of 1889 and is made of iron.\n"
    "Once upon a time there was a little girl named Lily. She liked to play outside in the sun with her dog.\n"
    "One day she found a big red ball under a tree, and she was very happy. The end.\n";

}  // namespace vl_test
