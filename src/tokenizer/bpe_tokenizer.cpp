// GPT-2 byte-level BPE: the merge engine and the Tokenizer interface (the file readers are in
// bpe_files.cpp, the model's tables in bpe_model.hpp).
//
// Hot path (encode): PCRE2 JIT splits the text; each pre-token is looked up in a per-thread cache of
// finished words; a miss runs the merge loop on integer token ids with a flat open-addressing table of
// (left id, right id) -> (rank, merged id). No allocation per word once the buffers have grown.
#include "vocablens/bpe_tokenizer.hpp"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/bpe_model.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

void BpeModel::missing_byte(char b) const {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", static_cast<unsigned char>(b));
  const auto u = static_cast<unsigned char>(b);
  const bool never_utf8 = u == 0xC0 || u == 0xC1 || u >= 0xF5;
  throw UsageError(source + ": the vocabulary has no token for byte " + buf +
                   (never_utf8 ? " (not valid UTF-8)"
                    : u < 0x20 ? " (a control character)"
                               : " (a UTF-8 lead byte it never saw)") +
                   " in the text");
}

size_t BpeModel::initial_symbols(const char* p, size_t n, Workspace& ws) const {
  if (ws.sym.size() < n + 1) {
    ws.sym.resize(n + 1);
    ws.rank.resize(n + 1);
    ws.merged.resize(n + 1);
  }
  int32_t* sym = ws.sym.data();
  if (byte_level) {
    for (size_t i = 0; i < n; ++i)
      if ((sym[i] = byte_id[static_cast<unsigned char>(p[i])]) < 0) missing_byte(p[i]);
    return n;
  }
  // Character level (Hugging Face BPE without ByteLevel): each character is a symbol when the vocabulary
  // has it; else its bytes' <0xNN> tokens (byte_fallback, when all of them exist), else <unk>.
  size_t len = 0;
  bool prev_unk = false;
  std::string_view s(p, n);
  for (size_t i = 0; i < n;) {
    uint32_t cp = 0;
    size_t k = utf8_char(s, i, cp);
    if (k == 0) k = 1, cp = 0xFFFFFFFFu;  // a byte that is not UTF-8: no character token can match it
    auto it = cp == 0xFFFFFFFFu ? char_id.end() : char_id.find(cp);
    if (it != char_id.end()) {
      sym[len++] = it->second;
      prev_unk = false;
    } else {
      bool all = byte_fallback;
      for (size_t b = 0; all && b < k; ++b) all = fallback_id[static_cast<unsigned char>(p[i + b])] >= 0;
      if (all) {
        for (size_t b = 0; b < k; ++b) sym[len++] = fallback_id[static_cast<unsigned char>(p[i + b])];
        prev_unk = false;
      } else if (unk >= 0) {
        if (!(fuse_unk && prev_unk)) sym[len++] = unk;
        prev_unk = true;
      }  // no <unk> either: the character is dropped (HF does the same)
    }
    i += k;
  }
  return len;
}

/// Merges the word p[0..n) into ws.word: repeatedly the pair of lowest rank, leftmost first.
/// Short words: rescanning a small array is faster than any heap (tiktoken does the same).
void BpeModel::bpe_word(const char* p, size_t n, Workspace& ws) const {
  ws.word.clear();
  if (ignore_merges) {
    auto it = id_of.find(std::string(p, n));
    if (it != id_of.end() && !special[it->second]) {
      ws.word.push_back(it->second);
      return;
    }
  }
  if (whole_newline_runs && std::string_view(p, n).find_first_not_of('\n') == std::string_view::npos) {
    auto it = id_of.find(std::string(p, n));
    if (it != id_of.end()) {
      ws.word.push_back(it->second);
      return;
    }
  }
  if (n == 1 && byte_level && byte_id[static_cast<unsigned char>(p[0])] >= 0) {
    ws.word.push_back(byte_id[static_cast<unsigned char>(p[0])]);
    return;
  }
  size_t len = initial_symbols(p, n, ws);
  if (len > 128) return bpe_long(len, ws);
  int32_t* sym = ws.sym.data();
  uint32_t* rank = ws.rank.data();
  int32_t* mid = ws.merged.data();
  for (size_t i = 0; i + 1 < len; ++i) rank[i] = pairs.find(sym[i], sym[i + 1], mid[i]);
  for (;;) {
    uint32_t best = kNoRank;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < len; ++i)
      if (rank[i] < best) best = rank[i], bi = i;
    if (best == kNoRank) break;
    sym[bi] = mid[bi];
    // remove symbol bi+1 (and the pair that started there)
    for (size_t i = bi + 1; i + 1 < len; ++i) {
      sym[i] = sym[i + 1];
      rank[i] = rank[i + 1];
      mid[i] = mid[i + 1];
    }
    --len;
    if (bi + 1 < len) rank[bi] = pairs.find(sym[bi], sym[bi + 1], mid[bi]);
    if (bi > 0) rank[bi - 1] = pairs.find(sym[bi - 1], sym[bi], mid[bi - 1]);
  }
  ws.word.assign(sym, sym + len);
}

/// Long words (whitespace runs, base64, minified code): a heap of candidate pairs over a linked list,
/// O(n log n) instead of O(n^2). Heap order (rank, position) reproduces "lowest rank, leftmost first".
/// The first n symbols are in ws.sym.
void BpeModel::bpe_long(size_t n, Workspace& ws) const {
  std::vector<int32_t> sym(ws.sym.begin(), ws.sym.begin() + n);
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  // A candidate is (rank, left position) only: ranks are unique per pair, so "the pair now at pos still
  // has this rank" proves the entry is current. 8 bytes per entry keeps huge words (20 MB of 'a') cheap.
  struct Cand {
    uint32_t rank;
    int32_t pos;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> initial;
  initial.reserve(n);
  int32_t m = -1;
  for (size_t i = 0; i + 1 < n; ++i) {
    uint32_t r = pairs.find(sym[i], sym[i + 1], m);
    if (r != kNoRank) initial.push_back(Cand{r, static_cast<int32_t>(i)});
  }
  // built in O(n) from all first candidates at once
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap(std::greater<Cand>(), std::move(initial));
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    uint32_t r = pairs.find(sym[i], sym[next[i]], m);
    if (r != kNoRank) heap.push(Cand{r, i});
  };
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    int32_t j = next[c.pos];
    if (sym[c.pos] < 0 || j < 0) continue;                      // merged away, or nothing to the right any more
    if (pairs.find(sym[c.pos], sym[j], m) != c.rank) continue;  // the pair changed since: stale
    sym[c.pos] = m;
    sym[j] = -1;  // dead
    next[c.pos] = next[j];
    if (next[j] >= 0) prev[next[j]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  ws.word.clear();
  if (n == 0) return;
  for (int32_t i = 0; i >= 0; i = next[i]) ws.word.push_back(sym[i]);
}

void BpeModel::encode_ordinary(std::string_view text, Workspace& ws, std::vector<int64_t>& out) const {
  pretokenize(text, ws, [&](const char* p, size_t n) {
    if (n == 1 && !ignore_merges && byte_level && byte_id[static_cast<unsigned char>(p[0])] >= 0) {
      out.push_back(byte_id[static_cast<unsigned char>(p[0])]);  // a third of all pre-tokens: skip the cache
      return;
    }
    if (n <= WordCache::kMaxWordBytes) {
      uint64_t h = WordCache::hash(p, n);
      uint32_t count;
      if (const int32_t* hit = ws.cache.find(p, n, h, count)) {
        out.insert(out.end(), hit, hit + count);
        return;
      }
      bpe_word(p, n, ws);
      ws.cache.insert(p, n, h, ws.word.data(), ws.word.size());
    } else {
      bpe_word(p, n, ws);
    }
    out.insert(out.end(), ws.word.begin(), ws.word.end());
  });
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// the Tokenizer interface

BpeTokenizer::BpeTokenizer(std::shared_ptr<const detail::BpeModel> model) : m_(std::move(model)) {}
BpeTokenizer::~BpeTokenizer() = default;

std::string BpeTokenizer::source() const { return m_->source; }
int64_t BpeTokenizer::vocab_size() const { return static_cast<int64_t>(m_->bytes_of.size()); }
int64_t BpeTokenizer::bos_id() const { return m_->bos; }
int64_t BpeTokenizer::eos_id() const { return m_->eos; }

namespace {
void check_range(const detail::BpeModel& m, int64_t id) {
  if (id < 0 || id >= static_cast<int64_t>(m.bytes_of.size()))
    throw UsageError("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(m.bytes_of.size()) + ")");
}
void check_id(const detail::BpeModel& m, int64_t id) {
  check_range(m, id);
  if (!m.present[id]) throw UsageError("token id " + std::to_string(id) + " is not used by this vocabulary");
}
}  // namespace

// Ids the vocabulary skips (holes in a HF vocab) give "" so that loops over [0, vocab_size()) need no
// special case; decode() still refuses them.
std::string BpeTokenizer::token_bytes(int64_t id) const {
  check_range(*m_, id);
  return m_->bytes_of[id];
}

std::string BpeTokenizer::piece(int64_t id) const {
  check_range(*m_, id);
  return m_->spelled[id];
}

std::string BpeTokenizer::display(int64_t id) const {
  if (id < 0 || id >= vocab_size() || !m_->present[id]) return "<id " + std::to_string(id) + "?>";
  return display_text(m_->bytes_of[id]);
}

bool BpeTokenizer::is_special(int64_t id) const { return id >= 0 && id < vocab_size() && m_->special[id]; }

std::optional<int64_t> BpeTokenizer::token_to_id(std::string_view token) const {
  auto it = m_->id_of.find(std::string(token));
  if (it != m_->id_of.end()) return it->second;
  it = m_->id_of.find(undisplay_text(token));
  if (it != m_->id_of.end()) return it->second;
  return std::nullopt;
}

std::vector<std::string> BpeTokenizer::pretokenize(std::string_view text) const {
  std::vector<std::string> out;
  auto ws = m_->acquire();
  std::string norm = m_->normalize(text, true);
  m_->pretokenize(norm, *ws, [&](const char* p, size_t n) { out.emplace_back(p, n); });
  m_->release(std::move(ws));
  return out;
}

namespace {
/// Length of the Unicode White_Space character ending at s[.., end) / starting at s[begin], or 0.
size_t space_before(std::string_view s, size_t end) {
  for (size_t k = 1; k <= 3 && k <= end; ++k) {
    uint32_t cp;
    if (detail::utf8_char(s, end - k, cp) == k) {
      bool ws = (cp >= 9 && cp <= 13) || cp == ' ' || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
                (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
      return ws ? k : 0;
    }
  }
  return 0;
}
size_t space_after(std::string_view s, size_t begin) {
  uint32_t cp;
  size_t k = begin < s.size() ? detail::utf8_char(s, begin, cp) : 0;
  if (k == 0) return 0;
  bool ws = (cp >= 9 && cp <= 13) || cp == ' ' || cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
            cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
  return ws ? k : 0;
}
}  // namespace

std::vector<int64_t> BpeTokenizer::do_encode(std::string_view text, const EncodeOptions& opts) const {
  const detail::BpeModel& m = *m_;
  std::vector<int64_t> out;
  out.reserve(text.size() / 3 + 4);
  if (opts.add_bos.value_or(m.add_bos_default) && m.bos >= 0) out.push_back(m.bos);

  struct Lease {  // returns the workspace to the pool even if an allocation throws
    const detail::BpeModel& m;
    std::unique_ptr<detail::Workspace> ws;
    ~Lease() { m.release(std::move(ws)); }
  } lease{m, m.acquire()};
  detail::Workspace& ws = *lease.ws;

  std::string prefixed;
  const bool plain = m.norm.empty();
  // One stretch of ordinary text (between added tokens); `at_start`: it begins at offset 0 of the text.
  auto ordinary = [&](std::string_view seg, bool at_start) {
    if (seg.empty()) return;
    if (!plain) {
      prefixed = m.normalize(seg, at_start);
      seg = prefixed;
    } else if (m.add_prefix_space && seg[0] != ' ') {  // HF ByteLevel(add_prefix_space): per stretch
      prefixed.assign(1, ' ');
      prefixed.append(seg);
      seg = prefixed;
    }
    m.encode_ordinary(seg, ws, out);
  };

  if (m.specials.empty() || (!opts.special_tokens && !m.has_always_matched)) {
    ordinary(text, true);
  } else {
    // Split at added tokens first (leftmost occurrence; the longest one where several start there).
    std::vector<size_t> next(m.specials.size(), 0);  // cached next occurrence of each
    std::vector<uint8_t> active(m.specials.size());
    for (size_t k = 0; k < m.specials.size(); ++k) {
      active[k] = opts.special_tokens || !m.specials[k].special;
      next[k] = active[k] ? text.find(m.specials[k].text) : std::string_view::npos;
    }
    size_t pos = 0;
    for (;;) {
      size_t best = std::string_view::npos, bk = 0;
      for (size_t k = 0; k < m.specials.size(); ++k) {
        if (!active[k]) continue;
        if (next[k] != std::string_view::npos && next[k] < pos) next[k] = text.find(m.specials[k].text, pos);
        if (next[k] < best) best = next[k], bk = k;
      }
      if (best == std::string_view::npos) break;
      size_t seg_end = best;
      if (m.specials[bk].lstrip) {
        while (seg_end > pos) {
          size_t k = space_before(text.substr(0, seg_end), seg_end);
          if (k == 0 || seg_end - k < pos) break;
          seg_end -= k;
        }
      }
      ordinary(text.substr(pos, seg_end - pos), pos == 0);
      out.push_back(m.specials[bk].id);
      pos = best + m.specials[bk].text.size();
      if (m.specials[bk].rstrip)
        while (size_t k = space_after(text, pos)) pos += k;
    }
    ordinary(text.substr(pos), pos == 0);
  }
  if (opts.add_eos.value_or(m.add_eos_default) && m.eos >= 0) out.push_back(m.eos);
  return out;
}

std::string BpeTokenizer::do_decode(const int64_t* ids, size_t n) const {
  const detail::BpeModel& m = *m_;
  std::string out;
  size_t i = 0;
  // The BOS this tokenizer puts first by default is left out, so that decode(encode(text)) == text.
  if (n > 0 && m.add_bos_default && ids[0] == m.bos) check_id(m, ids[0]), i = 1;
  bool first = true;
  for (; i < n; ++i) {
    check_id(m, ids[i]);
    const std::string& b = m.bytes_of[ids[i]];
    // SentencePiece-style: the space the normalizer put before the text is not part of it.
    if (first && m.strip_decoded_space && !b.empty() && b[0] == ' ' && !m.special[ids[i]]) out.append(b, 1, std::string::npos);
    else out += b;
    first = false;
  }
  return out;
}

}  // namespace vocablens
