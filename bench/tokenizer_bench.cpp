// bench_tokenizer — single-thread encoding speed of a vocablens tokenizer on a corpus.
//
//   bench_tokenizer TOKENIZER CORPUS [REPEATS=5]
//
// TOKENIZER: anything load_tokenizer() accepts (GPT-2 directory, vocab.json, tokenizer.json, tok512.bin).
// CORPUS: a JSON array of strings (documents, from tests/tokenizer_crosscheck/make_corpus.js) or any other
// file, taken as one document. Every repeat loads a fresh tokenizer (not timed), so each timed pass starts
// with an empty word cache ("cold": the number to compare with tiktoken, which has no such cache); a second
// pass on the same tokenizer is reported as "warm". Prints one JSON line; tokens/s of the best repeat.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vocablens/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " TOKENIZER CORPUS [REPEATS]\n";
    return 2;
  }
  try {
    const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot open ") + argv[2]);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    std::vector<std::string> docs;
    if (!text.empty() && text[0] == '[') {
      for (auto& d : nlohmann::json::parse(text)) docs.push_back(d.get<std::string>());
    } else {
      docs.push_back(text);
    }
    size_t bytes = 0;
    for (auto& d : docs) bytes += d.size();

    using clock = std::chrono::steady_clock;
    double best_cold = 1e30, best_warm = 1e30, load_s = 0;
    size_t tokens = 0;
    for (int r = 0; r < repeats; ++r) {
      auto l0 = clock::now();
      auto tok = vocablens::load_tokenizer(argv[1]);
      load_s = std::chrono::duration<double>(clock::now() - l0).count();
      for (int pass = 0; pass < 2; ++pass) {
        size_t n = 0;
        auto t0 = clock::now();
        for (auto& d : docs) n += tok->encode(d).size();
        double s = std::chrono::duration<double>(clock::now() - t0).count();
        tokens = n;
        (pass == 0 ? best_cold : best_warm) = std::min(pass == 0 ? best_cold : best_warm, s);
      }
    }
    std::cout << nlohmann::json{{"impl", "vocablens"},
                                {"documents", docs.size()},
                                {"bytes", bytes},
                                {"tokens", tokens},
                                {"repeats", repeats},
                                {"cold_seconds", best_cold},
                                {"tokens_per_s", tokens / best_cold},
                                {"warm_seconds", best_warm},
                                {"warm_tokens_per_s", tokens / best_warm},
                                {"load_seconds", load_s}}
                     .dump()
              << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_tokenizer: error: " << e.what() << "\n";
    return 1;
  }
}
