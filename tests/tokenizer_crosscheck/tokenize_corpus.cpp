// tokenize_corpus — the C++ side of the tiktoken cross-check: encodes every document of a corpus with
// vocablens and writes the ids for crosscheck.js to compare.
//
//   vocablens_tokenize_corpus TOKENIZER corpus.json ids.bin
//
// TOKENIZER: anything load_tokenizer() accepts (a GPT-2 directory, vocab.json, tokenizer.json, ...).
// corpus.json: a JSON array of strings (one document each, UTF-8), as written by make_corpus.js.
// ids.bin: for each document, a little-endian uint32 count followed by that many uint32 ids.
// Prints one JSON line: documents, bytes, tokens, seconds. Exit 1 (one-line message) on any error.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"
#include "vocablens/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " TOKENIZER corpus.json ids.bin\n";
    return 2;
  }
  try {
    auto tok = vocablens::load_tokenizer(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) throw vocablens::FormatError(argv[2], "cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json corpus = nlohmann::json::parse(ss.str());
    if (!corpus.is_array()) throw vocablens::FormatError(argv[2], "expected a JSON array of strings");
    std::vector<std::string> docs;
    docs.reserve(corpus.size());
    for (auto& d : corpus) docs.push_back(d.get<std::string>());

    std::ofstream out(argv[3], std::ios::binary);
    if (!out) throw vocablens::FormatError(argv[3], "cannot create");
    size_t bytes = 0, tokens = 0;
    double seconds = 0;
    std::vector<uint32_t> buf;
    for (const auto& d : docs) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<int64_t> ids = tok->encode(d);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bytes += d.size();
      tokens += ids.size();
      buf.assign(1, static_cast<uint32_t>(ids.size()));
      for (int64_t id : ids) buf.push_back(static_cast<uint32_t>(id));
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 4));
    }
    out.close();
    if (!out) throw vocablens::FormatError(argv[3], "write failed");
    std::cout << nlohmann::json{{"documents", docs.size()},
                                {"bytes", bytes},
                                {"tokens", tokens},
                                {"seconds", seconds},
                                {"tokenizer", tok->source()}}
                     .dump()
              << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tokenize_corpus: error: " << e.what() << "\n";
    return 1;
  }
}
