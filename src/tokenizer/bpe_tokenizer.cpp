// GPT-2 byte-level BPE: file readers, the merge engine and the per-word cache.
//
// Hot path (encode): PCRE2 JIT splits the text; each pre-token is looked up in a per-thread cache of
// finished words; a miss runs the merge loop on integer token ids with a flat open-addressing table of
// (left id, right id) -> (rank, merged id). No allocation per word once the buffers have grown.
#include "vocablens/bpe_tokenizer.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/text_util.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

/// GPT-2's byte <-> "printable unicode" table (encoder.py bytes_to_unicode): bytes that are printable
/// Latin-1 keep their code point, the other 68 get 256, 257, ... in byte order. vocab.json and merges.txt
/// spell tokens this way so that no token contains a space or a control character.
struct ByteUnicode {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // code point (< 324) -> byte, -1 if not in the alphabet
  ByteUnicode() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteUnicode& byte_unicode() {
  static const ByteUnicode t;
  return t;
}

/// GPT-2 spelling -> raw bytes; false if a character is outside the 256-character alphabet.
bool unicode_to_bytes(std::string_view s, std::string& out) {
  out.clear();
  const auto& t = byte_unicode();
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t n = utf8_char(s, i, cp);
    if (n == 0 || cp >= t.to_byte.size() || t.to_byte[cp] < 0) return false;
    out += static_cast<char>(t.to_byte[cp]);
    i += n;
  }
  return true;
}

}  // namespace

/// (left, right) -> (rank, merged) as a flat open-addressing table; the key packs both ids in 64 bits.
class PairTable {
 public:
  void build(const std::vector<std::array<int32_t, 3>>& merges) {  // {left, right, merged}, index = rank
    size_t cap = 16;
    while (cap < merges.size() * 2 + 16) cap <<= 1;
    slots_.assign(cap, Slot{kEmpty, 0, 0});
    mask_ = cap - 1;
    for (size_t r = 0; r < merges.size(); ++r) {
      // A merge whose result is not a token can never fire (HF skips it too); its rank stays unused.
      if (merges[r][2] < 0) continue;
      uint64_t key = pack(merges[r][0], merges[r][1]);
      size_t i = index(key);
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
      if (slots_[i].key == key) continue;  // duplicate merge line: the first (lowest rank) wins
      slots_[i] = Slot{key, static_cast<uint32_t>(r), merges[r][2]};
    }
  }
  /// Rank (kNoRank if the pair never merges) and merged id.
  inline uint32_t find(int32_t a, int32_t b, int32_t& merged) const {
    uint64_t key = pack(a, b);
    size_t i = index(key);
    for (;;) {
      const Slot& s = slots_[i];
      if (s.key == key) {
        merged = s.merged;
        return s.rank;
      }
      if (s.key == kEmpty) return kNoRank;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key;
    uint32_t rank;
    int32_t merged;
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t index(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

/// Finished words (pre-token bytes -> ids), per thread. Open addressing over offsets into two arenas,
/// so a hit costs one hash, one probe and one memcmp, and an insert no allocation once warmed up.
class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;  // longer pre-tokens are rare; not worth the memory
  static constexpr size_t kMaxEntries = 1 << 20;

  WordCache() { reset(1 << 12); }

  const int32_t* find(const char* p, size_t n, uint64_t h, uint32_t& count) const {
    size_t i = h & mask_;
    for (;;) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return nullptr;
      if (s.hash == h && s.key_len == n && std::memcmp(keys_.data() + s.key_off, p, n) == 0) {
        count = s.val_len;
        return vals_.data() + s.val_off;
      }
      i = (i + 1) & mask_;
    }
  }

  void insert(const char* p, size_t n, uint64_t h, const int32_t* ids, size_t count) {
    if (size_ >= kMaxEntries) reset(slots_.size());  // bounded memory on endless streams of new words
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot s{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(n), static_cast<uint32_t>(vals_.size()),
           static_cast<uint32_t>(count)};
    keys_.append(p, n);
    vals_.insert(vals_.end(), ids, ids + count);
    place(s);
    ++size_;
  }

  static uint64_t hash(const char* p, size_t n) { return hash_bytes(p, n) | 1; }  // 0 marks empty slots

 private:
  struct Slot {
    uint64_t hash;
    uint32_t key_off, key_len, val_off, val_len;
  };
  void reset(size_t cap) {
    slots_.assign(cap, Slot{0, 0, 0, 0, 0});
    mask_ = cap - 1;
    keys_.clear();
    vals_.clear();
    size_ = 0;
  }
  void place(const Slot& s) {
    size_t i = s.hash & mask_;
    while (slots_[i].hash != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{0, 0, 0, 0, 0});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.hash != 0) place(s);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string keys_;
  std::vector<int32_t> vals_;
  size_t size_ = 0;
};

/// Everything one encode() call mutates; handed out by a pool so that concurrent calls never share one.
struct Workspace {
  MatchData md;
  WordCache cache;
  std::vector<int32_t> sym;     // merge loop: current symbols
  std::vector<uint32_t> rank;   // rank of (sym[i], sym[i+1])
  std::vector<int32_t> merged;  // merged id of (sym[i], sym[i+1])
  std::vector<int32_t> word;    // result of one word
};

struct SpecialToken {
  std::string text;
  int32_t id;
  bool special;  // HF added tokens with special=false are matched in every encode()
};

struct BpeModel {
  std::string source;
  std::vector<std::string> bytes_of;    // id -> raw bytes ("" for holes)
  std::vector<std::string> spelled;     // id -> the file's spelling (vocab.json key), for piece()
  std::vector<uint8_t> present;         // id -> 1 when the id is a token
  std::vector<uint8_t> special;         // id -> 1 for special tokens (BOS/EOS, added tokens marked special)
  std::unordered_map<std::string, int32_t> id_of;  // raw bytes -> id (ordinary tokens and specials)
  std::array<int32_t, 256> byte_id{};   // single byte -> id
  PairTable pairs;
  std::vector<SpecialToken> specials;   // added tokens, longest first (a longer one wins at the same place)
  bool has_always_matched = false;      // some added token is not special (matched even without the option)
  std::unique_ptr<Pretokenizer> pre;
  bool add_prefix_space = false;
  bool ignore_merges = false;           // HF: a pre-token that is itself a token is taken whole
  int32_t bos = -1, eos = -1;

  mutable std::mutex pool_mutex;
  mutable std::vector<std::unique_ptr<Workspace>> pool;

  std::unique_ptr<Workspace> acquire() const {
    {
      std::lock_guard<std::mutex> lock(pool_mutex);
      if (!pool.empty()) {
        auto w = std::move(pool.back());
        pool.pop_back();
        return w;
      }
    }
    auto w = std::make_unique<Workspace>();
    w->md = pre->make_match_data();
    return w;
  }
  void release(std::unique_ptr<Workspace> w) const {
    std::lock_guard<std::mutex> lock(pool_mutex);
    pool.push_back(std::move(w));
  }

  void bpe_word(const char* p, size_t n, Workspace& ws) const;
  void bpe_long(const char* p, size_t n, Workspace& ws) const;
  void encode_ordinary(std::string_view text, Workspace& ws, std::vector<int64_t>& out) const;
};

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


namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) { throw FormatError(path, what); }

nlohmann::json parse_json(const std::string& path) {
  std::string text = read_file_bytes(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    // nlohmann's messages start with "[json.exception.parse_error.101] "; keep only the explanation
    auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    bad(path, "not valid JSON: " + msg);
  }
}

/// Collects vocabulary entries and merges, then checks them and freezes them into a BpeModel.
struct Builder {
  std::shared_ptr<BpeModel> m = std::make_shared<BpeModel>();
  std::vector<std::array<int32_t, 3>> merges;  // {left, right, merged}; index = rank

  // Issue #9 fix (found by fuzz_bpe_files): ids index dense tables sized id + 1, so a 20-byte vocab.json
  // {"a": 1073741823} allocated 4 x 2^30 entries (> 64 GB). Ids may now exceed the number of entries the
  // file holds by at most kIdSlack (holes); callers set max_id from their entry counts.
  static constexpr int64_t kIdSlack = int64_t{1} << 16;
  int64_t max_id = int64_t{1} << 30;

  void put(const std::string& path, std::string raw, const std::string& spelling, int64_t id) {
    if (id < 0 || id >= (int64_t{1} << 30) || id > max_id)
      bad(path, "token " + printable(spelling) + " has id " + std::to_string(id) + ", out of range" +
                    (id >= 0 && id > max_id ? " (the file has only " + std::to_string(max_id - kIdSlack) + " entries)" : ""));
    if (static_cast<size_t>(id) >= m->bytes_of.size()) {
      m->bytes_of.resize(id + 1);
      m->spelled.resize(id + 1);
      m->present.resize(id + 1, 0);
      m->special.resize(id + 1, 0);
    }
    if (m->present[id] && m->bytes_of[id] != raw)
      bad(path, "id " + std::to_string(id) + " is given to two different tokens");
    m->bytes_of[id] = raw;
    m->spelled[id] = spelling;
    m->present[id] = 1;
    m->id_of.emplace(std::move(raw), static_cast<int32_t>(id));  // the first id wins for a repeated token
  }

  /// A vocabulary entry spelled in GPT-2's byte-to-unicode alphabet.
  void add_token(const std::string& path, const std::string& spelling, int64_t id) {
    std::string raw;
    if (!unicode_to_bytes(spelling, raw))
      bad(path, "token " + printable(spelling) + " (id " + std::to_string(id) +
                    ") is not spelled in GPT-2's byte-to-unicode alphabet");
    put(path, std::move(raw), spelling, id);
  }

  /// An added token (HF added_tokens, GPT-2's <|endoftext|>): plain text, matched before pre-tokenizing.
  void add_added(const std::string& path, const std::string& content, int64_t id, bool is_special) {
    if (content.empty()) bad(path, "added token " + std::to_string(id) + " is empty");
    if (static_cast<size_t>(id) < m->present.size() && m->present[id] && m->bytes_of[id] != content) {
      // HF lists an added token in model.vocab too; its spelling there is the byte-level one.
      std::string raw;
      if (!unicode_to_bytes(m->spelled[id], raw) || raw != content)
        bad(path, "added token " + printable(content) + " has id " + std::to_string(id) + " of another token");
    }
    put(path, content, static_cast<size_t>(id) < m->spelled.size() && !m->spelled[id].empty() ? m->spelled[id] : content, id);
    m->id_of[content] = static_cast<int32_t>(id);
    if (is_special) m->special[id] = 1;
    for (auto& s : m->specials)
      if (s.id == id) return;
    m->specials.push_back({content, static_cast<int32_t>(id), is_special});
  }

  void add_merge(const std::string& path, size_t line, std::string_view left, std::string_view right) {
    std::string lb, rb;
    if (!unicode_to_bytes(left, lb) || !unicode_to_bytes(right, rb))
      bad(path, "line " + std::to_string(line) + ": merge \"" + printable(std::string(left) + " " + std::string(right)) +
                    "\" is not spelled in GPT-2's byte-to-unicode alphabet");
    auto l = m->id_of.find(lb), r = m->id_of.find(rb);
    if (l == m->id_of.end() || r == m->id_of.end())
      bad(path, "line " + std::to_string(line) + ": merge \"" + printable(std::string(left) + " " + std::string(right)) +
                    "\" names a token that is not in the vocabulary");
    auto c = m->id_of.find(lb + rb);
    merges.push_back({l->second, r->second, c == m->id_of.end() ? -1 : c->second});
  }

  /// After the vocabulary, before the merges: a byte-level vocabulary has a token for every single byte.
  void check_vocabulary(const std::string& vocab_path) {
    if (m->bytes_of.empty()) bad(vocab_path, "the vocabulary is empty");
    for (int b = 0; b < 256; ++b) {
      auto it = m->id_of.find(std::string(1, static_cast<char>(b)));
      if (it == m->id_of.end() || m->special[it->second])
        bad(vocab_path, "the vocabulary lacks the single-byte token for byte " + std::to_string(b) +
                            " (not a byte-level BPE vocabulary)");
      m->byte_id[b] = it->second;
    }
  }

  std::shared_ptr<BpeModel> finish(const std::string& source, const std::string& vocab_path,
                                   std::string_view pattern) {
    m->source = source;
    m->pairs.build(merges);
    std::stable_sort(m->specials.begin(), m->specials.end(),
                     [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
    for (auto& s : m->specials)
      if (!s.special) m->has_always_matched = true;
    auto eot = m->id_of.find("<|endoftext|>");
    if (eot != m->id_of.end()) m->bos = m->eos = eot->second;
    m->pre = std::make_unique<Pretokenizer>(pattern, vocab_path);
    return m;
  }
};

void read_merges_txt(Builder& b, const std::string& path) {
  std::string text = read_file_bytes(path);
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line_no == 1 && line.substr(0, 8) == "#version") continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos)
      bad(path, "line " + std::to_string(line_no) + ": expected \"left right\", got \"" + printable(line) + "\"");
    b.add_merge(path, line_no, line.substr(0, sp), line.substr(sp + 1));
  }
  if (b.merges.empty()) bad(path, "no merges found");
}

std::string escape_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

/// The expression of a tokenizer.json pre_tokenizer, or throws for what this reader does not implement.
std::string pretokenizer_pattern(const std::string& path, const nlohmann::json& pt, bool& add_prefix_space) {
  auto type = [](const nlohmann::json& j) { return j.is_object() ? j.value("type", std::string()) : std::string(); };
  auto unsupported = [&](const std::string& what) {
    bad(path, "unsupported pre_tokenizer (" + what + "); supported: ByteLevel, or Sequence [Split (Regex), ByteLevel]");
  };
  if (type(pt) == "ByteLevel") {
    add_prefix_space = pt.value("add_prefix_space", false);
    if (!pt.value("use_regex", true)) unsupported("ByteLevel without its expression");
    return kGpt2Pattern;
  }
  if (type(pt) == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].is_array() &&
      pt["pretokenizers"].size() == 2) {
    const auto& split = pt["pretokenizers"][0];
    const auto& bl = pt["pretokenizers"][1];
    if (type(split) != "Split" || type(bl) != "ByteLevel") unsupported("Sequence of other pre-tokenizers");
    if (split.value("behavior", std::string()) != "Isolated" || split.value("invert", false))
      unsupported("Split other than Isolated");
    add_prefix_space = bl.value("add_prefix_space", false);
    const auto& p = split.contains("pattern") ? split["pattern"] : nlohmann::json();
    if (p.contains("Regex") && p["Regex"].is_string()) return p["Regex"].get<std::string>();
    if (p.contains("String") && p["String"].is_string()) return escape_literal(p["String"].get<std::string>());
    unsupported("Split without a pattern");
  }
  unsupported(pt.is_null() ? "none" : type(pt).empty() ? "?" : type(pt));
  return {};
}

}  // namespace
}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// readers

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_vocab_merges(const std::string& vocab_json,
                                                              const std::string& merges_txt) {
  detail::Builder b;
  nlohmann::json vocab = detail::parse_json(vocab_json);
  if (!vocab.is_object() || vocab.empty()) detail::bad(vocab_json, "expected a JSON object {\"token\": id, ...}");
  b.max_id = static_cast<int64_t>(vocab.size()) + detail::Builder::kIdSlack;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer())
      detail::bad(vocab_json, "the id of token " + detail::printable(it.key()) + " is not an integer");
    b.add_token(vocab_json, it.key(), it.value().get<int64_t>());
  }
  // GPT-2's one special token (= BOS = EOS); HF keeps it in special_tokens_map.json, OpenAI in code.
  auto eot = b.m->id_of.find("<|endoftext|>");
  if (eot != b.m->id_of.end()) b.add_added(vocab_json, "<|endoftext|>", eot->second, true);
  b.check_vocabulary(vocab_json);
  detail::read_merges_txt(b, merges_txt);
  return std::make_unique<BpeTokenizer>(b.finish(vocab_json + " + " + merges_txt, vocab_json, detail::kGpt2Pattern));
}

namespace {
std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path);
}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_tokenizer_json(const std::string& path) {
  // The reader checks the types it depends on; a value of an unexpected JSON type anywhere else (found by
  // fuzz_bpe_files: "model": {"type": 7}) makes nlohmann throw type_error — still the file's fault, so it
  // becomes the same one-line FormatError as every other defect of the file.
  try {
    return read_tokenizer_json(path);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw FormatError(path, "unexpected JSON structure: " + msg);
  }
}

namespace {
std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path) {
  using detail::bad;
  nlohmann::json j = detail::parse_json(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    bad(path, "not a Hugging Face tokenizer.json (no \"model\" object)");
  const auto& model = j["model"];
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") bad(path, "model type \"" + type + "\" is not supported (only byte-level \"BPE\")");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      bad(path, std::string("model.") + key + " is not supported by the byte-level BPE reader");
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    bad(path, "normalizer \"" + j["normalizer"].value("type", std::string("?")) + "\" is not supported");
  if (!model.contains("vocab") || !model["vocab"].is_object() || model["vocab"].empty())
    bad(path, "model.vocab is missing or not an object");
  if (!model.contains("merges") || !model["merges"].is_array()) bad(path, "model.merges is missing or not a list");

  detail::Builder b;
  b.max_id = static_cast<int64_t>(model["vocab"].size()) + detail::Builder::kIdSlack +
             (j.contains("added_tokens") && j["added_tokens"].is_array() ? static_cast<int64_t>(j["added_tokens"].size()) : 0);
  bool add_prefix_space = false;
  std::string pattern = detail::pretokenizer_pattern(path, j.value("pre_tokenizer", nlohmann::json()), add_prefix_space);
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer())
      bad(path, "the id of token " + detail::printable(it.key()) + " is not an integer");
    b.add_token(path, it.key(), it.value().get<int64_t>());
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        bad(path, "an entry of added_tokens lacks \"id\" or \"content\"");
      b.add_added(path, a["content"].get<std::string>(), a["id"].get<int64_t>(), a.value("special", true));
    }
  }
  b.check_vocabulary(path);
  size_t n = 0;
  for (const auto& mg : model["merges"]) {
    ++n;
    std::string where = "merge " + std::to_string(n);
    if (mg.is_string()) {  // "left right" (tokenizers < 0.20)
      const std::string& s = mg.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
        bad(path, where + ": expected \"left right\", got \"" + detail::printable(s) + "\"");
      b.add_merge(path, n, std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
    } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {  // ["left", "right"]
      b.add_merge(path, n, mg[0].get<std::string>(), mg[1].get<std::string>());
    } else {
      bad(path, where + " is neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
  if (b.merges.empty()) bad(path, "model.merges is empty");
  b.m->ignore_merges = model.value("ignore_merges", false);
  b.m->add_prefix_space = add_prefix_space;
  return std::make_unique<BpeTokenizer>(b.finish(path, path, pattern));
}
}  // namespace

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
