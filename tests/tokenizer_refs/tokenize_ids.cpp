// tokenize_ids — the vocablens side of the tokenizer reference check (tests/tokenizer_refs/README.md):
// encodes every text of one or more corpora and writes the ids for compare.js.
//
//   vocablens_tokenize_ids TOKENIZER corpus.json ids.bin [corpus2.json ids2.bin ...] [--special] [--no-bos]
//
// Several corpora in one call: the tokenizer is loaded once (loading a tokenizer.json costs about as much as
// encoding a corpus). One JSON line of counts per corpus.
//
// TOKENIZER: anything load_tokenizer() accepts (tokenizer.json, tokenizer.model, a directory, ...), or
// spec:FILE.json — the tokenizer.ggml.* values of a GGUF as written by make_tokenizers.py, built with
// vocablens::tokenizer_from_vocab (the in-memory API the GGUF reader uses).
// Encoding: the tokenizer's own BOS/EOS convention (EncodeOptions defaults); --special: special-token
// strings in the text become their ids (as transformers.js and llama_tokenize(parse_special=true) do);
// --no-bos: neither BOS nor EOS (Hugging Face's add_special_tokens=False).
// ids.bin: per text a little-endian uint32 count, then that many uint32 ids. Exit 1 with one line on error.
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/vocab_spec.hpp"

namespace {
std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw vocablens::FormatError(p, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<vocablens::Tokenizer> open_tokenizer(const std::string& arg) {
  if (arg.rfind("spec:", 0) != 0) return vocablens::load_tokenizer(arg);
  std::string path = arg.substr(5);
  auto j = nlohmann::json::parse(slurp(path));
  vocablens::VocabSpec v;
  v.source = path;
  v.model = j.at("model").get<std::string>();
  v.pre = j.value("pre", std::string());
  v.tokens = j.at("tokens").get<std::vector<std::string>>();
  v.token_types = j.value("token_types", std::vector<int32_t>());
  v.scores = j.value("scores", std::vector<float>());
  v.merges = j.value("merges", std::vector<std::string>());
  v.bos_id = j.value("bos_id", int64_t{-1});
  v.eos_id = j.value("eos_id", int64_t{-1});
  v.unk_id = j.value("unk_id", int64_t{-1});
  v.pad_id = j.value("pad_id", int64_t{-1});
  if (j.contains("add_bos")) v.add_bos = j["add_bos"].get<bool>();
  if (j.contains("add_eos")) v.add_eos = j["add_eos"].get<bool>();
  if (j.contains("add_space_prefix")) v.add_space_prefix = j["add_space_prefix"].get<bool>();
  return vocablens::tokenizer_from_vocab(v);
}
}  // namespace

int main(int argc, char** argv) {
  bool special = false, no_bos = false, bad_arg = argc < 4;
  std::vector<std::pair<std::string, std::string>> jobs;  // (corpus.json, ids.bin)
  std::vector<std::string> paths;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--special") special = true;
    else if (a == "--no-bos") no_bos = true;
    else if (a.rfind("--", 0) == 0) bad_arg = true;
    else paths.push_back(a);
  }
  if (paths.empty() || paths.size() % 2 != 0) bad_arg = true;
  for (size_t k = 0; k + 1 < paths.size(); k += 2) jobs.emplace_back(paths[k], paths[k + 1]);
  if (bad_arg) {
    std::cerr << "usage: " << argv[0]
              << " TOKENIZER|spec:FILE.json corpus.json ids.bin [corpus2.json ids2.bin ...] [--special] [--no-bos]\n";
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    auto tok = open_tokenizer(argv[1]);
    double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    vocablens::EncodeOptions opt;
    opt.special_tokens = special;
    if (no_bos) opt.add_bos = false, opt.add_eos = false;
    for (const auto& [corpus_path, ids_path] : jobs) {
      nlohmann::json corpus = nlohmann::json::parse(slurp(corpus_path));
      if (!corpus.is_array()) throw vocablens::FormatError(corpus_path, "expected a JSON array of strings");
      std::ofstream out(ids_path, std::ios::binary);
      if (!out) throw vocablens::FormatError(ids_path, "cannot create");
      size_t tokens = 0;
      double seconds = 0;
      std::vector<uint32_t> buf;
      for (const auto& d : corpus) {
        const std::string& text = d.get_ref<const std::string&>();
        auto t1 = std::chrono::steady_clock::now();
        std::vector<int64_t> ids = tok->encode(text, opt);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        tokens += ids.size();
        buf.assign(1, static_cast<uint32_t>(ids.size()));
        for (int64_t id : ids) buf.push_back(static_cast<uint32_t>(id));
        out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 4));
      }
      out.close();
      if (!out) throw vocablens::FormatError(ids_path, "write failed");
      std::cout << nlohmann::json{{"texts", corpus.size()}, {"tokens", tokens},    {"encode_seconds", seconds},
                                  {"load_seconds", load_s}, {"kind", tok->kind()}, {"tokenizer", tok->source()},
                                  {"corpus", corpus_path}}
                       .dump()
                << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tokenize_ids: error: " << e.what() << "\n";
    return 1;
  }
}
