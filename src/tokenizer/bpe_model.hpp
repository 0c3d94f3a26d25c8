// src/tokenizer/bpe_model.hpp — the frozen BPE model behind BpeTokenizer (private to src/tokenizer):
// vocabulary tables, the merge table, normalizer and pre-tokenizer steps, the per-thread word cache and
// workspace pool. Two alphabets: byte-level (GPT-2, Llama-3, Qwen2: a word's bytes are the first symbols)
// and character-level "SentencePiece-style" (Llama-2/Gemma tokenizer.json: a word's Unicode characters
// are the first symbols, "<0xNN>" byte fallback or <unk> for characters the vocabulary lacks).
//
// Built once by the file readers (bpe_files.cpp: vocab.json + merges.txt, tokenizer.json;
// vocab_spec.cpp: in-memory data), then read-only
// and shared by every encode()/decode() of the tokenizer (bpe_tokenizer.cpp); the only mutable state is the
// workspace pool, guarded by pool_mutex, so concurrent encode() calls are safe.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/text_util.hpp"

namespace vocablens::detail {

/// Rank of a pair that never merges.
inline constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

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
  std::vector<MatchData> mds;  // one per pre-tokenizer step
  WordCache cache;
  std::vector<int32_t> sym;     // merge loop: current symbols
  std::vector<uint32_t> rank;   // rank of (sym[i], sym[i+1])
  std::vector<int32_t> merged;  // merged id of (sym[i], sym[i+1])
  std::vector<int32_t> word;    // result of one word
};

struct SpecialToken {
  std::string text;
  int32_t id;
  bool special;                         // HF added tokens with special=false are matched in every encode()
  bool lstrip = false, rstrip = false;  // HF: swallow whitespace left / right of the token
};

/// One step of the normalizer, applied in order to each stretch of text between added tokens.
struct NormStep {
  enum Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kMetaPrepend } kind;
  std::string a, b;         // Prepend: a; Replace: a -> b; MetaPrepend: a (unless the text starts with it)
  bool first_only = false;  // MetaPrepend with prepend_scheme "first": only the stretch at offset 0
};

struct BpeModel {
  std::string source;
  std::vector<std::string> bytes_of;               // id -> raw bytes ("" for holes)
  std::vector<std::string> spelled;                // id -> the file's spelling (vocab.json key), for piece()
  std::vector<uint8_t> present;                    // id -> 1 when the id is a token
  std::vector<uint8_t> special;                    // id -> 1 for special tokens (BOS/EOS, added tokens marked special)
  std::unordered_map<std::string, int32_t> id_of;  // raw bytes -> id (ordinary tokens and specials)
  std::array<int32_t, 256> byte_id{};              // single byte -> id
  PairTable pairs;
  std::vector<SpecialToken> specials;               // added tokens, longest first (a longer one wins at the same place)
  bool has_always_matched = false;                  // some added token is not special (matched even without the option)
  std::vector<std::unique_ptr<Pretokenizer>> pres;  // split steps, applied one after the other (may be empty)
  std::vector<NormStep> norm;
  bool add_prefix_space = false;                  // ByteLevel(add_prefix_space): " " before a stretch not starting with one
  bool byte_level = true;                         // false: character-level SentencePiece-style BPE
  bool byte_fallback = false;                     // character-level: a missing character becomes its <0xNN> tokens
  bool fuse_unk = false;                          // character-level: consecutive <unk> become one
  int32_t unk = -1;                               // character-level: id for a missing character (-1: none)
  bool strip_decoded_space = false;               // decode(): drop the space the normalizer put first
  std::array<int32_t, 256> fallback_id{};         // byte -> "<0xNN>" id (-1 if absent)
  std::unordered_map<uint32_t, int32_t> char_id;  // character-level: code point -> id
  bool add_bos_default = false, add_eos_default = false;  // tokenizer_config.json / post_processor
  bool ignore_merges = false;                             // HF: a pre-token that is itself a token is taken whole
  bool whole_newline_runs = false;  // llama.cpp gemma4: a pre-token of only "\n" that is a token is taken whole
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
    for (auto& p : pres) w->mds.push_back(p->make_match_data());
    return w;
  }
  void release(std::unique_ptr<Workspace> w) const {
    std::lock_guard<std::mutex> lock(pool_mutex);
    pool.push_back(std::move(w));
  }

  void bpe_word(const char* p, size_t n, Workspace& ws) const;
  void bpe_long(size_t n, Workspace& ws) const;
  [[noreturn]] void missing_byte(char b) const;  // UsageError: a byte the vocabulary cannot represent
  /// First symbols of a word into ws.sym (byte ids, or character ids / byte fallback / unk); their count.
  size_t initial_symbols(const char* p, size_t n, Workspace& ws) const;
  void encode_ordinary(std::string_view text, Workspace& ws, std::vector<int64_t>& out) const;
  /// The normalizer's steps applied to one stretch of text (at_start: it begins at offset 0).
  std::string normalize(std::string_view text, bool at_start) const;
  /// Calls fn(ptr, len) for every pre-token of `text` (all split steps applied in turn).
  template <class F>
  void pretokenize(std::string_view text, Workspace& ws, F&& fn, size_t level = 0) const {
    if (level == pres.size()) {
      if (!text.empty()) fn(text.data(), text.size());
      return;
    }
    pres[level]->split(text, ws.mds[level].get(),
                       [&](const char* p, size_t n) { pretokenize(std::string_view(p, n), ws, fn, level + 1); });
  }
};

}  // namespace vocablens::detail
