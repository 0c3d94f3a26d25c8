// WordPiece vocabulary training (see vocablens/wordpiece_trainer.hpp). Pair and unit counts are recounted over
// the distinct words at every merge: O(merges · symbols), seconds for corpora of a few MB.
#include "vocablens/wordpiece_trainer.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace {

// The characters of a UTF-8 word (it is valid UTF-8: it comes out of the normaliser).
std::vector<std::string> chars_of(const std::string& w) {
  std::vector<std::string> out;
  for (size_t i = 0; i < w.size();) {
    const unsigned char c = static_cast<unsigned char>(w[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(w.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

WordPieceVocabulary train_wordpiece(std::string_view text, const WordPieceTrainerOptions& opts) {
  if (opts.vocab_size < 1 || opts.vocab_size > (int64_t(1) << 24)) throw UsageError("WordPiece vocabulary size out of range");
  if (opts.min_frequency < 1) throw UsageError("WordPiece min_frequency must be >= 1");
  const WordPieceConfig& cfg = opts.config;
  const std::vector<std::string> specials = {"[PAD]", cfg.unk_token, "[CLS]", "[SEP]", "[MASK]"};
  // A tokenizer holding only the specials does the normalisation and the split.
  auto splitter = WordPieceTokenizer::from_tokens(specials, cfg, "(WordPiece trainer)");

  WordPieceVocabulary v;
  v.config = cfg;
  std::map<std::string, int64_t> counts;
  size_t pos = 0;
  while (pos < text.size()) {  // line by line: bounded memory for the normaliser
    size_t e = text.find('\n', pos);
    if (e == std::string_view::npos) e = text.size();
    for (std::string& w : splitter->pre_tokenize(text.substr(pos, e - pos))) ++counts[std::move(w)];
    pos = e + 1;
  }
  v.tokens = specials;
  std::unordered_map<std::string, int32_t> id;
  for (size_t i = 0; i < specials.size(); ++i) id.emplace(specials[i], static_cast<int32_t>(i));

  struct Word {
    std::vector<int32_t> sym;
    int64_t count;
  };
  std::vector<Word> words;
  std::set<std::string> alphabet;
  std::vector<std::vector<std::string>> spelled;
  for (auto& [w, n] : counts) {
    v.words += n;
    std::vector<std::string> cs = chars_of(w);
    if (static_cast<int64_t>(cs.size()) > cfg.max_input_chars_per_word) {
      v.skipped_long_words += n;
      if (v.first_skipped.empty()) v.first_skipped = w;
      continue;
    }
    for (size_t i = 1; i < cs.size(); ++i) cs[i] = cfg.prefix + cs[i];
    for (auto& c : cs) alphabet.insert(c);
    spelled.push_back(std::move(cs));
    words.push_back({{}, n});
  }
  v.distinct_words = static_cast<int64_t>(counts.size());
  for (const std::string& a : alphabet)
    if (id.emplace(a, static_cast<int32_t>(v.tokens.size())).second) v.tokens.push_back(a);
  v.alphabet = static_cast<int64_t>(alphabet.size());
  for (size_t i = 0; i < words.size(); ++i)
    for (auto& c : spelled[i]) words[i].sym.push_back(id.at(c));
  spelled.clear();

  auto key = [](int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  };
  std::unordered_map<uint64_t, int64_t> pc;
  std::vector<int64_t> uc;
  while (static_cast<int64_t>(v.tokens.size()) < opts.vocab_size) {
    pc.clear();
    uc.assign(v.tokens.size(), 0);
    for (const Word& w : words) {
      for (size_t i = 0; i < w.sym.size(); ++i) {
        uc[static_cast<size_t>(w.sym[i])] += w.count;
        if (i + 1 < w.sym.size()) pc[key(w.sym[i], w.sym[i + 1])] += w.count;
      }
    }
    uint64_t best = 0;
    double best_score = -1;
    int64_t best_count = 0;
    std::string best_spelling;
    for (auto& [k, n] : pc) {
      if (n < opts.min_frequency) continue;
      const int32_t a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xffffffffu);
      const double score = static_cast<double>(n) /
                           (static_cast<double>(uc[static_cast<size_t>(a)]) * static_cast<double>(uc[static_cast<size_t>(b)]));
      bool better = score > best_score || (score == best_score && n > best_count);
      std::string sp;
      if (!better && score == best_score && n == best_count) {
        sp = v.tokens[static_cast<size_t>(a)] + " " + v.tokens[static_cast<size_t>(b)];
        better = sp < best_spelling;
      }
      if (better) {
        best = k;
        best_score = score;
        best_count = n;
        best_spelling = sp.empty() ? v.tokens[static_cast<size_t>(a)] + " " + v.tokens[static_cast<size_t>(b)] : sp;
      }
    }
    if (best_score < 0) break;
    const int32_t a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffffu);
    std::string right = v.tokens[static_cast<size_t>(b)];
    if (right.compare(0, cfg.prefix.size(), cfg.prefix) == 0) right = right.substr(cfg.prefix.size());
    const std::string merged = v.tokens[static_cast<size_t>(a)] + right;
    int32_t c;
    auto it = id.find(merged);
    if (it != id.end()) {
      c = it->second;
    } else {
      c = static_cast<int32_t>(v.tokens.size());
      v.tokens.push_back(merged);
      id.emplace(merged, c);
    }
    ++v.merges;
    for (Word& w : words) {
      if (w.sym.size() < 2) continue;
      std::vector<int32_t> ns;
      ns.reserve(w.sym.size());
      for (size_t i = 0; i < w.sym.size();) {
        if (i + 1 < w.sym.size() && w.sym[i] == a && w.sym[i + 1] == b) {
          ns.push_back(c);
          i += 2;
        } else {
          ns.push_back(w.sym[i++]);
        }
      }
      w.sym.swap(ns);
    }
  }
  return v;
}

void WordPieceVocabulary::write(const std::string& dir) const {
  ensure_directory(dir);
  std::string txt;
  for (const std::string& t : tokens) txt += t + "\n";
  write_file_atomic(dir + "/vocab.txt", txt);
  nlohmann::ordered_json j;
  j["tokenizer_class"] = "BertTokenizer";
  j["do_lower_case"] = config.lowercase;
  j["strip_accents"] = config.strip_accents ? nlohmann::ordered_json(*config.strip_accents) : nlohmann::ordered_json();
  j["tokenize_chinese_chars"] = config.handle_chinese_chars;
  j["unk_token"] = config.unk_token;
  j["cls_token"] = "[CLS]";
  j["sep_token"] = "[SEP]";
  j["pad_token"] = "[PAD]";
  j["mask_token"] = "[MASK]";
  j["max_input_chars_per_word"] = config.max_input_chars_per_word;
  j["vocablens_trained"] = {{"algorithm", "wordpiece"}, {"alphabet", alphabet}, {"merges", merges}};
  write_file_atomic(dir + "/tokenizer_config.json", j.dump(2) + "\n");
}

}  // namespace vocablens
