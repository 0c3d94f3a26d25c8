// Byte-level BPE training (see vocablens/bpe_trainer.hpp). Incremental pair counts: each merge touches
// only the pre-tokens that contain its pair, and the best pair comes from an ordered set, so training
// costs O(merges · log pairs + symbols touched), not a full recount per merge.
#include "vocablens/bpe_trainer.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenizer.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace {

// GPT-2's byte -> code point table (encoder.py bytes_to_unicode).
const std::array<uint32_t, 256>& byte_to_cp() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> a{};
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      a[static_cast<size_t>(b)] = printable ? static_cast<uint32_t>(b) : next++;
    }
    return a;
  }();
  return t;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

constexpr const char* kEndOfText = "<|endoftext|>";

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

std::string gpt2_spelling(std::string_view bytes) {
  std::string s;
  for (unsigned char c : bytes) append_utf8(s, byte_to_cp()[c]);
  return s;
}

std::vector<std::string> gpt2_pretokenize(std::string_view text) {
  static const detail::Pretokenizer pre(detail::kGpt2Pattern, "GPT-2 pre-tokenizer");
  auto md = pre.make_match_data();
  std::vector<std::string> out;
  pre.split(text, md.get(), [&](const char* p, size_t n) { out.emplace_back(p, n); });
  return out;
}

BpeVocabulary train_bpe(std::string_view text, const BpeTrainerOptions& opts) {
  static const detail::Pretokenizer pre(detail::kGpt2Pattern, "GPT-2 pre-tokenizer");
  auto md = pre.make_match_data();
  std::map<std::string, int64_t> counts;
  pre.split(text, md.get(), [&](const char* p, size_t n) { ++counts[std::string(p, n)]; });
  return train_bpe_counts(counts, opts);
}

BpeVocabulary train_bpe_counts(const std::map<std::string, int64_t>& pretoken_counts, const BpeTrainerOptions& opts) {
  if (opts.vocab_size < 256 + (opts.add_endoftext ? 1 : 0))
    throw UsageError("BPE vocabulary size must be at least " + std::to_string(256 + (opts.add_endoftext ? 1 : 0)) +
                     " (the 256 bytes" + (opts.add_endoftext ? " and <|endoftext|>)" : ")"));
  if (opts.vocab_size > (int64_t(1) << 30)) throw UsageError("BPE vocabulary size is too large");
  if (opts.min_frequency < 1) throw UsageError("BPE min_frequency must be >= 1");

  BpeVocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, static_cast<char>(b));
  std::unordered_map<std::string, int32_t> id_of;
  for (int b = 0; b < 256; ++b) id_of.emplace(v.tokens[static_cast<size_t>(b)], b);

  struct Word {
    std::vector<int32_t> sym;
    int64_t count;
  };
  std::vector<Word> words;
  for (auto& [s, n] : pretoken_counts) {
    if (s.empty() || n <= 0) continue;
    Word w{{}, n};
    for (unsigned char c : s) w.sym.push_back(c);
    words.push_back(std::move(w));
    v.pretokens += n;
  }
  v.distinct_pretokens = static_cast<int64_t>(words.size());

  std::unordered_map<uint64_t, int64_t> pc;                  // pair -> weighted count
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // pair -> words that had it (may be stale)
  std::set<std::pair<int64_t, uint64_t>> order;              // (-count, pair): best first, ties lower ids
  auto change = [&](uint64_t k, int64_t delta) {
    int64_t& c = pc[k];
    if (c > 0) order.erase({-c, k});
    c += delta;
    if (c > 0) order.insert({-c, k});
  };
  for (size_t wi = 0; wi < words.size(); ++wi) {
    const auto& s = words[wi].sym;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      uint64_t k = pair_key(s[i], s[i + 1]);
      change(k, words[wi].count);
      where[k].push_back(static_cast<int32_t>(wi));
    }
  }

  const int64_t target = opts.vocab_size - (opts.add_endoftext ? 1 : 0);
  while (static_cast<int64_t>(v.tokens.size()) < target && !order.empty()) {
    auto [negc, k] = *order.begin();
    if (-negc < opts.min_frequency) break;
    const int32_t a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xffffffffu);
    std::string merged = v.tokens[static_cast<size_t>(a)] + v.tokens[static_cast<size_t>(b)];
    int32_t c;
    auto it = id_of.find(merged);
    if (it != id_of.end()) {
      c = it->second;
    } else {
      c = static_cast<int32_t>(v.tokens.size());
      v.tokens.push_back(merged);
      id_of.emplace(merged, c);
    }
    v.merges.emplace_back(v.tokens[static_cast<size_t>(a)], v.tokens[static_cast<size_t>(b)]);

    std::vector<int32_t> ws = std::move(where[k]);
    where.erase(k);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    for (int32_t wi : ws) {
      Word& w = words[static_cast<size_t>(wi)];
      auto& s = w.sym;
      bool has = false;
      for (size_t i = 0; i + 1 < s.size() && !has; ++i) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;
      for (size_t i = 0; i + 1 < s.size(); ++i) change(pair_key(s[i], s[i + 1]), -w.count);
      std::vector<int32_t> ns;
      ns.reserve(s.size());
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          ns.push_back(c);
          i += 2;
        } else {
          ns.push_back(s[i]);
          i += 1;
        }
      }
      s.swap(ns);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        uint64_t nk = pair_key(s[i], s[i + 1]);
        change(nk, w.count);
        if (nk != k) where[nk].push_back(wi);
      }
    }
    // The merged pair cannot occur any more (every occurrence was merged); drop a leftover entry.
    auto pit = pc.find(k);
    if (pit != pc.end() && pit->second > 0) {
      order.erase({-pit->second, k});
      pit->second = 0;
    }
  }
  if (opts.add_endoftext) {
    v.endoftext_id = static_cast<int64_t>(v.tokens.size());
    v.tokens.emplace_back(kEndOfText);
  }
  return v;
}

std::string BpeVocabulary::vocab_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 0; i < tokens.size(); ++i)
    j[static_cast<int64_t>(i) == endoftext_id ? tokens[i] : gpt2_spelling(tokens[i])] = static_cast<int64_t>(i);
  return j.dump() + "\n";
}

std::string BpeVocabulary::merges_txt() const {
  std::string s = "#version: 0.2\n";
  for (auto& [l, r] : merges) s += gpt2_spelling(l) + " " + gpt2_spelling(r) + "\n";
  return s;
}

void BpeVocabulary::write(const std::string& dir) const {
  ensure_directory(dir);
  write_file_atomic(dir + "/vocab.json", vocab_json());
  write_file_atomic(dir + "/merges.txt", merges_txt());
}

std::vector<int64_t> BpeVocabulary::segment(std::string_view pretoken) const {
  std::unordered_map<std::string, int64_t> id;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (static_cast<int64_t>(i) != endoftext_id) id.emplace(tokens[i], static_cast<int64_t>(i));
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t r = 0; r < merges.size(); ++r) rank.emplace(merges[r], r);
  std::vector<std::string> parts;
  for (char ch : pretoken) parts.emplace_back(1, ch);
  while (parts.size() > 1) {
    size_t best = merges.size(), at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find({parts[i], parts[i + 1]});
      if (it != rank.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == merges.size()) break;
    const auto& m = merges[best];
    std::vector<std::string> np;
    for (size_t i = 0; i < parts.size();) {
      if (i + 1 < parts.size() && parts[i] == m.first && parts[i + 1] == m.second) {
        np.push_back(parts[i] + parts[i + 1]);
        i += 2;
      } else {
        np.push_back(parts[i++]);
      }
    }
    (void)at;
    parts.swap(np);
  }
  std::vector<int64_t> out;
  for (auto& p : parts) out.push_back(id.at(p));
  return out;
}

}  // namespace vocablens
