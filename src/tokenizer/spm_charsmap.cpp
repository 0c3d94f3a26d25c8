// Bounds check of a SentencePiece precompiled_charsmap (see spm_charsmap.hpp).
#include "tokenizer/spm_charsmap.hpp"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "vocablens/error.hpp"

namespace vocablens::detail {

namespace {

// Protobuf wire format, only what is needed to find two length-delimited fields.
struct Wire {
  std::string_view s;
  size_t pos = 0;
  const std::string& source;

  [[noreturn]] void bad(const std::string& what) const {
    throw FormatError(source, "not a SentencePiece model (protobuf " + what + " at byte " + std::to_string(pos) + ")");
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= s.size()) bad("truncated varint");
      const auto b = static_cast<uint8_t>(s[pos++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("varint longer than 10 bytes");
  }
  /// Next field: its number and, for wire type 2, its bytes; other wire types are skipped.
  bool next(uint64_t& field, int& type, std::string_view& bytes) {
    if (pos >= s.size()) return false;
    const uint64_t tag = varint();
    field = tag >> 3;
    type = static_cast<int>(tag & 7);
    switch (type) {
      case 0: varint(); break;
      case 1: skip(8); break;
      case 5: skip(4); break;
      case 2: {
        const uint64_t n = varint();
        if (n > s.size() - pos) bad("length past the end");
        bytes = s.substr(pos, static_cast<size_t>(n));
        pos += static_cast<size_t>(n);
        break;
      }
      default: bad("wire type " + std::to_string(type));  // groups (3, 4): never in a SentencePiece model
    }
    return true;
  }
  void skip(size_t n) {
    if (n > s.size() - pos) bad("truncated field");
    pos += n;
  }
};

// Field 2 of a NormalizerSpec; keeps `out` when absent (merging repeated messages keeps earlier values).
void charsmap_of(std::string_view spec, std::string_view& out, const std::string& source) {
  Wire w{spec, 0, source};
  uint64_t f;
  int t;
  std::string_view b;
  while (w.next(f, t, b))
    if (f == 2 && t == 2) out = b;
}

uint32_t unit_at(std::string_view trie, size_t i) {
  uint32_t u;
  std::memcpy(&u, trie.data() + 4 * i, 4);  // little-endian, as libsentencepiece reads it on this host
  return u;
}

}  // namespace

SpmCharsmaps spm_charsmaps(std::string_view proto, const std::string& source) {
  SpmCharsmaps out;
  Wire w{proto, 0, source};
  uint64_t f;
  int t;
  std::string_view b;
  while (w.next(f, t, b)) {
    if (t != 2) continue;
    if (f == 3) charsmap_of(b, out.normalizer, source);
    if (f == 5) charsmap_of(b, out.denormalizer, source);
  }
  return out;
}

void check_spm_charsmap(std::string_view blob, const std::string& source, const std::string& which) {
  if (blob.empty()) return;
  auto bad = [&](const std::string& what) {
    throw FormatError(source, which + ".precompiled_charsmap is corrupted: " + what +
                                  " (the normaliser would read outside it; the model is refused)");
  };
  if (blob.size() <= 4) bad("shorter than its 4-byte header");
  uint32_t trie_bytes;
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes > blob.size() - 4)
    bad("its trie of " + std::to_string(trie_bytes) + " bytes is longer than the " + std::to_string(blob.size() - 4) +
        " bytes that follow the header");
  const std::string_view trie = blob.substr(4, trie_bytes);
  const std::string_view strings = blob.substr(4 + static_cast<size_t>(trie_bytes));
  const size_t n = trie.size() / 4;
  if (n == 0) bad("its trie is empty");
  auto offset = [](uint32_t u) -> size_t { return static_cast<size_t>(u >> 10) << ((u & (1U << 9)) >> 6); };
  // Every node the search can stand on: the root, and each unit whose label matches the byte that led to
  // it. From a node at p the search reads unit[(p ^ offset) ^ c] for the next input byte c (any of 256),
  // and a matched node with its leaf bit reads the value unit at p ^ offset.
  std::vector<uint8_t> seen(n, 0);
  std::vector<std::pair<size_t, bool>> stack{{0, false}};  // (unit, reached by a byte), the root first
  while (!stack.empty()) {
    const auto [p, child] = stack.back();
    stack.pop_back();
    const uint32_t u = unit_at(trie, p);
    const size_t base = p ^ offset(u);
    if ((base | 0xFF) >= n)
      bad("unit " + std::to_string(p) + " leads to units up to " + std::to_string(base | 0xFF) + " of " + std::to_string(n));
    if (child && ((u >> 8) & 1)) {  // a leaf: the offset of its replacement string, read up to a NUL
      const uint32_t v = unit_at(trie, base) & 0x7FFFFFFFU;
      if (v >= strings.size() || std::memchr(strings.data() + v, 0, strings.size() - v) == nullptr)
        bad("unit " + std::to_string(base) + " points at byte " + std::to_string(v) + " of " + std::to_string(strings.size()) +
            " replacement bytes, with no NUL after it");
    }
    for (uint32_t c = 0; c < 256; ++c) {
      const size_t q = base ^ c;
      const uint32_t uq = unit_at(trie, q);
      if ((uq & ((1U << 31) | 0xFFU)) != c || seen[q]) continue;  // the search stops here (label mismatch)
      seen[q] = 1;
      stack.emplace_back(q, true);
    }
  }
}

void check_spm_model(std::string_view proto, const std::string& source) {
  const SpmCharsmaps m = spm_charsmaps(proto, source);
  check_spm_charsmap(m.normalizer, source, "normalizer_spec");
  check_spm_charsmap(m.denormalizer, source, "denormalizer_spec");
}

}  // namespace vocablens::detail
