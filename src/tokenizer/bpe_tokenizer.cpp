// GPT-2 byte-level BPE: the merge engine and the Tokenizer interface (the file readers are in
// bpe_files.cpp, the model's tables in bpe_model.hpp).
//
// Hot path (encode): PCRE2 JIT splits the text; each pre-token is looked up in a per-thread cache of
// finished words; a miss runs the merge loop on integer token ids with a flat open-addressing table of
// (left id, right id) -> (rank, merged id). No allocation per word once the buffers have grown.
#include "vocablens/bpe_tokenizer.hpp"

#include <algorithm>
#include <queue>

#include "tokenizer/bpe_model.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

/// Merges the bytes p[0..n) into ws.word: repeatedly the pair of lowest rank, leftmost first.
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
  if (n == 1) {
    ws.word.push_back(byte_id[static_cast<unsigned char>(p[0])]);
    return;
  }
  if (n > 128) return bpe_long(p, n, ws);
  int32_t* sym = ws.sym.data();
  uint32_t* rank = ws.rank.data();
  int32_t* mid = ws.merged.data();
  for (size_t i = 0; i < n; ++i) sym[i] = byte_id[static_cast<unsigned char>(p[i])];
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = pairs.find(sym[i], sym[i + 1], mid[i]);
  size_t len = n;
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
void BpeModel::bpe_long(const char* p, size_t n, Workspace& ws) const {
  std::vector<int32_t> sym(n);
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_id[static_cast<unsigned char>(p[i])];
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
    if (sym[c.pos] < 0 || j < 0) continue;  // merged away, or nothing to the right any more
    if (pairs.find(sym[c.pos], sym[j], m) != c.rank) continue;  // the pair changed since: stale
    sym[c.pos] = m;
    sym[j] = -1;  // dead
    next[c.pos] = next[j];
    if (next[j] >= 0) prev[next[j]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  ws.word.clear();
  for (int32_t i = 0; i >= 0; i = next[i]) ws.word.push_back(sym[i]);
}

void BpeModel::encode_ordinary(std::string_view text, Workspace& ws, std::vector<int64_t>& out) const {
  if (ws.sym.size() < 129) {
    ws.sym.resize(129);
    ws.rank.resize(129);
    ws.merged.resize(129);
  }
  pre->split(text, ws.md.get(), [&](const char* p, size_t n) {
    if (n == 1 && !ignore_merges) {  // a third of all pre-tokens in English text; skip the cache
      out.push_back(byte_id[static_cast<unsigned char>(p[0])]);
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

bool BpeTokenizer::is_special(int64_t id) const {
  return id >= 0 && id < vocab_size() && m_->special[id];
}

std::optional<int64_t> BpeTokenizer::token_to_id(std::string_view token) const {
  auto it = m_->id_of.find(std::string(token));
  if (it != m_->id_of.end()) return it->second;
  it = m_->id_of.find(undisplay_text(token));
  if (it != m_->id_of.end()) return it->second;
  return std::nullopt;
}

std::vector<std::string> BpeTokenizer::pretokenize(std::string_view text) const {
  std::vector<std::string> out;
  auto md = m_->pre->make_match_data();
  m_->pre->split(text, md.get(), [&](const char* p, size_t n) { out.emplace_back(p, n); });
  return out;
}

std::vector<int64_t> BpeTokenizer::do_encode(std::string_view text, const EncodeOptions& opts) const {
  const detail::BpeModel& m = *m_;
  std::vector<int64_t> out;
  out.reserve(text.size() / 3 + 4);
  if (opts.add_bos.value_or(false) && m.bos >= 0) out.push_back(m.bos);

  struct Lease {  // returns the workspace to the pool even if an allocation throws
    const detail::BpeModel& m;
    std::unique_ptr<detail::Workspace> ws;
    ~Lease() { m.release(std::move(ws)); }
  } lease{m, m.acquire()};
  detail::Workspace& ws = *lease.ws;

  std::string prefixed;
  auto ordinary = [&](std::string_view seg) {
    if (seg.empty()) return;
    if (m.add_prefix_space && seg[0] != ' ') {  // HF ByteLevel(add_prefix_space): per segment
      prefixed.assign(1, ' ');
      prefixed.append(seg);
      seg = prefixed;
    }
    m.encode_ordinary(seg, ws, out);
  };

  if (m.specials.empty() || (!opts.special_tokens && !m.has_always_matched)) {
    ordinary(text);
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
      ordinary(text.substr(pos, best - pos));
      out.push_back(m.specials[bk].id);
      pos = best + m.specials[bk].text.size();
    }
    ordinary(text.substr(pos));
  }
  if (opts.add_eos && m.eos >= 0) out.push_back(m.eos);
  return out;
}

std::string BpeTokenizer::do_decode(const int64_t* ids, size_t n) const {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    check_id(*m_, ids[i]);
    out += m_->bytes_of[ids[i]];
  }
  return out;
}

}  // namespace vocablens
