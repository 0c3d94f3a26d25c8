// llama2.c tokenizer: reader, run.c-exact encode/decode.
#include "vocablens/llama2c_tokenizer.hpp"

#include <cstring>
#include <queue>
#include <unordered_map>
#include <vector>

#include "tokenizer/text_util.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

namespace detail {
namespace {

uint64_t pack(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/// The byte of a "<0xXX>" piece, or -1.
int byte_piece(const std::string& p) {
  if (p.size() != 6 || p.compare(0, 3, "<0x") != 0 || p[5] != '>') return -1;
  int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string trim_ws(const std::string& s) {
  size_t b = s.find_first_not_of(" \n\t\r"), e = s.find_last_not_of(" \n\t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// run.c ignores merges whose score is not above its starting "best" of -1e10.
constexpr float kRunCFloor = -1e10f;

// Polynomial string hashing modulo the Mersenne prime 2^61 - 1 (for the pair table in load()).
constexpr uint64_t kHashMod = (uint64_t{1} << 61) - 1;
constexpr uint64_t kHashBase = 0x1F3D5B79A2C4E681ull % kHashMod;
uint64_t addmod(uint64_t a, uint64_t b) {  // a, b < 2^62
  uint64_t r = a + b;
  r = (r & kHashMod) + (r >> 61);
  return r >= kHashMod ? r - kHashMod : r;
}
uint64_t mulmod(uint64_t a, uint64_t b) {  // a, b < 2^61
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return addmod(static_cast<uint64_t>(p & kHashMod), static_cast<uint64_t>(p >> 61));
}

}  // namespace
}  // namespace detail

std::unique_ptr<Llama2cTokenizer> Llama2cTokenizer::load(const std::string& path) {
  std::string data = detail::read_file_bytes(path);
  std::unique_ptr<Llama2cTokenizer> t(new Llama2cTokenizer());
  t->path_ = path;
  if (data.size() < 4) throw FormatError(path, "too short for a llama2.c tokenizer (" + std::to_string(data.size()) + " bytes)");
  auto rd_i32 = [&](size_t off) {
    int32_t v;
    std::memcpy(&v, data.data() + off, 4);
    return v;
  };
  t->max_token_length_ = rd_i32(0);
  if (t->max_token_length_ <= 0 || t->max_token_length_ > (1 << 16))
    throw FormatError(
        path, "max_token_length " + std::to_string(t->max_token_length_) + " is implausible (not a llama2.c tokenizer file?)");
  size_t off = 4;
  while (off < data.size()) {
    size_t id = t->pieces_.size();
    if (data.size() - off < 8)
      throw FormatError(path, "truncated record of token " + std::to_string(id) + " at byte " + std::to_string(off));
    float score;
    std::memcpy(&score, data.data() + off, 4);
    int32_t len = rd_i32(off + 4);
    off += 8;
    if (len < 0 || len > t->max_token_length_ || static_cast<size_t>(len) > data.size() - off)
      throw FormatError(path, "token " + std::to_string(id) + " has length " + std::to_string(len) + " at byte " +
                                  std::to_string(off - 4) + " (max_token_length " + std::to_string(t->max_token_length_) + ", " +
                                  std::to_string(data.size() - off) + " bytes left): not a llama2.c tokenizer file or truncated");
    t->pieces_.emplace_back(data.data() + off, len);
    t->scores_.push_back(score);
    off += len;
  }
  if (t->pieces_.size() < 3)
    throw FormatError(path, "holds " + std::to_string(t->pieces_.size()) + " tokens; expected at least <unk>, <s>, </s>");

  const int32_t n = static_cast<int32_t>(t->pieces_.size());
  for (int32_t id = 0; id < n; ++id) t->id_of_.emplace(t->pieces_[id], id);
  // Byte fallback: run.c uses id = byte + 3; we take that when the piece there is <0xXX> for that byte,
  // else look for the piece elsewhere (a vocabulary laid out differently still works).
  t->byte_token_.assign(256, -1);
  t->byte_of_.assign(n, -1);
  for (int32_t id = 0; id < n; ++id) {
    int b = detail::byte_piece(t->pieces_[id]);
    if (b >= 0) {
      t->byte_of_[id] = static_cast<int16_t>(b);
      if (t->byte_token_[b] < 0 || id == b + 3) t->byte_token_[b] = id;
    }
  }
  // All (left, right) whose concatenation is a piece, so that the merge loop never builds strings.
  // Found by fuzz_llama2c_tokenizer: this used to build and hash two substrings per split
  // point, O(len^2) per piece: one 60 KB piece took 12 s, a hostile 256 MB file of long pieces hours.
  // Now every prefix/suffix is looked up by a polynomial hash (mod 2^61 - 1) computed in O(1) from
  // prefix hashes, and confirmed with memcmp; the resulting pairs are exactly the same as before.
  {
    std::unordered_multimap<uint64_t, int32_t> by_hash;  // (hash, length) of a piece -> its id_of_ id
    by_hash.reserve(static_cast<size_t>(n));
    std::vector<uint64_t> pre, pw;
    auto prefix_hashes = [&](const std::string& p) {
      pre.assign(p.size() + 1, 0);
      pw.assign(p.size() + 1, 1);
      for (size_t i = 0; i < p.size(); ++i) {
        pre[i + 1] = detail::addmod(detail::mulmod(pre[i], detail::kHashBase), static_cast<unsigned char>(p[i]) + 1u);
        pw[i + 1] = detail::mulmod(pw[i], detail::kHashBase);
      }
    };
    auto key = [](uint64_t h, size_t len) { return h ^ (static_cast<uint64_t>(len) * 0x9E3779B97F4A7C15ull); };
    for (int32_t id = 0; id < n; ++id) {
      const std::string& p = t->pieces_[id];
      if (t->id_of_.at(p) != id) continue;  // a repeated piece: the first id stands for it, as in id_of_
      prefix_hashes(p);
      by_hash.emplace(key(pre[p.size()], p.size()), id);
    }
    auto find = [&](const char* s, size_t len, uint64_t h) -> int32_t {
      auto range = by_hash.equal_range(key(h, len));
      for (auto it = range.first; it != range.second; ++it) {
        const std::string& q = t->pieces_[it->second];
        if (q.size() == len && std::memcmp(q.data(), s, len) == 0) return it->second;
      }
      return -1;
    };
    for (int32_t c = 0; c < n; ++c) {
      const std::string& p = t->pieces_[c];
      if (p.size() < 2 || t->id_of_.at(p) != c || !(t->scores_[c] > detail::kRunCFloor)) continue;
      prefix_hashes(p);
      const size_t len = p.size();
      for (size_t k = 1; k < len; ++k) {
        const int32_t l = find(p.data(), k, pre[k]);
        if (l < 0) continue;
        const uint64_t right = detail::addmod(pre[len], detail::kHashMod - detail::mulmod(pre[k], pw[len - k]));
        const int32_t r = find(p.data() + k, len - k, right);
        if (r < 0) continue;
        t->pair_.emplace(detail::pack(l, r), c);
      }
    }
  }
  return t;
}

void Llama2cTokenizer::check_id(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw UsageError("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab_size()) + ")");
}

float Llama2cTokenizer::score(int64_t id) const {
  check_id(id);
  return scores_[id];
}

std::string Llama2cTokenizer::piece(int64_t id) const {
  check_id(id);
  return pieces_[id];
}

std::string Llama2cTokenizer::token_bytes(int64_t id) const {
  check_id(id);
  if (id == bos_id() || id == eos_id()) return "";
  if (byte_of_[id] >= 0) return std::string(1, static_cast<char>(byte_of_[id]));
  return pieces_[id];
}

std::string Llama2cTokenizer::display(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "<id " + std::to_string(id) + "?>";
  if (is_special(id)) return display_text(detail::trim_ws(pieces_[id]));  // "\n<s>\n" -> "<s>"
  return display_text(token_bytes(id));
}

std::optional<int64_t> Llama2cTokenizer::token_to_id(std::string_view token) const {
  std::string s(token);
  for (int pass = 0; pass < 2; ++pass) {
    auto it = id_of_.find(s);
    if (it != id_of_.end()) return it->second;
    if (s.size() == 1 && byte_token_[static_cast<unsigned char>(s[0])] >= 0) return byte_token_[static_cast<unsigned char>(s[0])];
    for (int64_t id = 0; id < std::min<int64_t>(3, vocab_size()); ++id)
      if (!s.empty() && s == detail::trim_ws(pieces_[id])) return id;  // "<s>", "</s>", "<unk>"
    s = undisplay_text(token);
  }
  return std::nullopt;
}

std::vector<int64_t> Llama2cTokenizer::do_encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<int32_t> seq;
  seq.reserve(text.size() + 3);
  if (opts.add_bos.value_or(true)) seq.push_back(static_cast<int32_t>(bos_id()));
  if (!text.empty()) {
    auto sp = id_of_.find(" ");  // the dummy prefix (add_dummy_prefix in sentencepiece)
    if (sp != id_of_.end()) seq.push_back(sp->second);
  }
  // Characters: a lead byte and up to 3 continuation bytes, exactly as run.c groups them (even if invalid).
  std::string ch;
  for (size_t i = 0; i < text.size();) {
    size_t start = i++;
    while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80 && i - start < 4) ++i;
    ch.assign(text.data() + start, i - start);
    auto it = id_of_.find(ch);
    if (it != id_of_.end()) {
      seq.push_back(it->second);
      continue;
    }
    for (unsigned char b : ch) {
      if (byte_token_[b] < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%02X", b);
        throw UsageError("byte 0x" + std::string(hex) + " cannot be encoded: " + path_ + " has no <0x" + hex + "> piece");
      }
      seq.push_back(byte_token_[b]);
    }
  }

  // Merges: highest score first, leftmost on ties (run.c: strict '>' while scanning left to right).
  const int32_t n = static_cast<int32_t>(seq.size());
  std::vector<int32_t> next(n), prev(n);
  for (int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  struct Cand {
    float score;
    int32_t pos, left, right, merged;
    bool operator<(const Cand& o) const {  // priority_queue pops the largest: high score, then low pos
      return score != o.score ? score < o.score : pos > o.pos;
    }
  };
  std::priority_queue<Cand> heap;
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    auto it = pair_.find(detail::pack(seq[i], seq[next[i]]));
    if (it != pair_.end()) heap.push(Cand{scores_[it->second], i, seq[i], seq[next[i]], it->second});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    int32_t j = next[c.pos];
    if (seq[c.pos] != c.left || j < 0 || seq[j] != c.right) continue;  // stale
    seq[c.pos] = c.merged;
    seq[j] = -1;
    next[c.pos] = next[j];
    if (next[j] >= 0) prev[next[j]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::vector<int64_t> out;
  out.reserve(n + 1);
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = next[i]) out.push_back(seq[i]);
  if (opts.add_eos.value_or(false)) out.push_back(eos_id());
  return out;
}

std::string Llama2cTokenizer::do_decode(const int64_t* ids, size_t n) const {
  std::string out;
  int64_t prev = -1;
  for (size_t i = 0; i < n; ++i) {
    int64_t id = ids[i];
    check_id(id);
    if (id != bos_id() && id != eos_id()) {
      const std::string& p = pieces_[id];
      if (byte_of_[id] >= 0) {
        out += static_cast<char>(byte_of_[id]);
      } else if (prev == bos_id() && !p.empty() && p[0] == ' ') {
        out.append(p, 1, std::string::npos);  // sentencepiece drops the dummy prefix after BOS (run.c)
      } else {
        out += p;
      }
    }
    prev = id;
  }
  return out;
}

}  // namespace vocablens
