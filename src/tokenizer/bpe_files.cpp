// BPE: the Builder (bpe_builder.hpp) that checks a vocabulary and freezes it into a BpeModel, and the
// vocab.json + merges.txt reader (tokenizer.json: tokenizer_json.cpp; in-memory data: vocab_spec.cpp).
//
// Untrusted input: every defect of a file is a one-line FormatError naming the file; ids and
// sizes are bounded before any table is sized from them (fuzzed by tests/fuzz/fuzz_bpe_files.cpp).
#include <algorithm>
#include <array>
#include <memory>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_builder.hpp"
#include "util/json_depth.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace detail {

namespace {

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

}  // namespace

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

void bad(const std::string& path, const std::string& what) { throw FormatError(path, what); }

int byte_piece_value(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>' || hex(s[3]) < 0 || hex(s[4]) < 0) return -1;
  return hex(s[3]) * 16 + hex(s[4]);
}

nlohmann::json parse_json(const std::string& path) {
  std::string text = read_file_bytes(path);
  check_json_depth(text, path);  // the readers copy subtrees (json::value), which recurses per level
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

void Builder::put(const std::string& path, std::string raw, const std::string& spelling, int64_t id) {
  if (id < 0 || id >= (int64_t{1} << 30) || id > max_id)
    bad(path, "token " + printable(spelling) + " has id " + std::to_string(id) + ", out of range" +
                  (id >= 0 && id > max_id ? " (the file has only " + std::to_string(max_id - kIdSlack) + " entries)" : ""));
  if (static_cast<size_t>(id) >= m->bytes_of.size()) {
    m->bytes_of.resize(id + 1);
    m->spelled.resize(id + 1);
    m->present.resize(id + 1, 0);
    m->special.resize(id + 1, 0);
  }
  if (m->present[id] && m->bytes_of[id] != raw) bad(path, "id " + std::to_string(id) + " is given to two different tokens");
  m->bytes_of[id] = raw;
  m->spelled[id] = spelling;
  m->present[id] = 1;
  m->id_of.emplace(std::move(raw), static_cast<int32_t>(id));  // the first id wins for a repeated token
}

void Builder::add_token(const std::string& path, const std::string& spelling, int64_t id) {
  std::string raw;
  if (!unicode_to_bytes(spelling, raw))
    bad(path,
        "token " + printable(spelling) + " (id " + std::to_string(id) + ") is not spelled in GPT-2's byte-to-unicode alphabet");
  put(path, std::move(raw), spelling, id);
}

void Builder::add_piece(const std::string& path, const std::string& spelling, int64_t id, const std::string& space) {
  int b = byte_piece_value(spelling);
  std::string raw;
  if (b >= 0) {
    raw.assign(1, static_cast<char>(b));
    if (id >= 0 && id <= max_id && m->fallback_id[b] < 0) m->fallback_id[b] = static_cast<int32_t>(id);
  } else {
    for (size_t i = 0; i < spelling.size();) {
      if (!space.empty() && spelling.compare(i, space.size(), space) == 0) {
        raw += ' ';
        i += space.size();
      } else {
        raw += spelling[i++];
      }
    }
  }
  put(path, raw, spelling, id);
  spelled_id.emplace(spelling, static_cast<int32_t>(id));
  uint32_t cp;
  if (b < 0 && !spelling.empty() && utf8_char(spelling, 0, cp) == spelling.size())
    m->char_id.emplace(cp, static_cast<int32_t>(id));
}

void Builder::add_added(const std::string& path, const std::string& content, int64_t id, bool is_special, bool lstrip,
                        bool rstrip) {
  if (content.empty()) bad(path, "added token " + std::to_string(id) + " is empty");
  if (static_cast<size_t>(id) < m->present.size() && m->present[id] && m->bytes_of[id] != content) {
    // HF lists an added token in model.vocab too; its spelling there is the byte-level one (or, character
    // level, the same text with the space replacement).
    std::string raw;
    bool same = m->byte_level ? unicode_to_bytes(m->spelled[id], raw) && raw == content : m->spelled[id] == content;
    if (!same) bad(path, "added token " + printable(content) + " has id " + std::to_string(id) + " of another token");
  }
  put(path, content, static_cast<size_t>(id) < m->spelled.size() && !m->spelled[id].empty() ? m->spelled[id] : content, id);
  m->id_of[content] = static_cast<int32_t>(id);
  if (is_special) m->special[id] = 1;
  for (auto& s : m->specials)
    if (s.id == id) return;
  m->specials.push_back({content, static_cast<int32_t>(id), is_special, lstrip, rstrip});
}

void Builder::add_merge(const std::string& path, size_t line, std::string_view left, std::string_view right) {
  auto where = [&] {
    return "line " + std::to_string(line) + ": merge \"" + printable(std::string(left) + " " + std::string(right)) + "\"";
  };
  if (!m->byte_level) {
    auto l = spelled_id.find(std::string(left)), r = spelled_id.find(std::string(right));
    if (l == spelled_id.end() || r == spelled_id.end()) bad(path, where() + " names a token that is not in the vocabulary");
    auto c = spelled_id.find(std::string(left) + std::string(right));
    merges.push_back({l->second, r->second, c == spelled_id.end() ? -1 : c->second});
    return;
  }
  std::string lb, rb;
  if (!unicode_to_bytes(left, lb) || !unicode_to_bytes(right, rb))
    bad(path, where() + " is not spelled in GPT-2's byte-to-unicode alphabet");
  auto l = m->id_of.find(lb), r = m->id_of.find(rb);
  if (l == m->id_of.end() || r == m->id_of.end()) bad(path, where() + " names a token that is not in the vocabulary");
  auto c = m->id_of.find(lb + rb);
  merges.push_back({l->second, r->second, c == m->id_of.end() ? -1 : c->second});
}

void Builder::check_vocabulary(const std::string& vocab_path) {
  if (m->bytes_of.empty()) bad(vocab_path, "the vocabulary is empty");
  if (!m->byte_level) return;
  // A byte-level vocabulary has a token for every byte a text can hold, with a few published exceptions:
  // bytes that never occur in UTF-8 (0xC0, 0xC1, 0xF5..0xFF: GPT-NeoX), and control characters or rare lead
  // bytes that the trainer never saw (Falcon lacks 0x03..0x1E and 0xF2, StarCoder 0xF1). Such a byte gets no
  // id: encode() refuses a text containing it, naming the byte (Hugging Face and llama.cpp drop it silently).
  // Printable ASCII must be there: without it this is not a byte-level vocabulary at all.
  int missing = 0;
  for (int b = 0; b < 256; ++b) {
    auto it = m->id_of.find(std::string(1, static_cast<char>(b)));
    if (it != m->id_of.end() && !m->special[it->second]) {
      m->byte_id[b] = it->second;
      continue;
    }
    if (b >= 0x20 && b < 0x7F)
      bad(vocab_path,
          "the vocabulary lacks the single-byte token for byte " + std::to_string(b) + " (not a byte-level BPE vocabulary)");
    m->byte_id[b] = -1;
    ++missing;
  }
  if (missing > 64)
    bad(vocab_path, "the vocabulary lacks single-byte tokens for " + std::to_string(missing) +
                        " of the 256 bytes (not a byte-level BPE vocabulary)");
}

std::shared_ptr<BpeModel> Builder::finish(const std::string& source, const std::string& vocab_path,
                                          const std::vector<std::string>& patterns) {
  m->source = source;
  m->pairs.build(merges);
  std::stable_sort(m->specials.begin(), m->specials.end(),
                   [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
  for (auto& s : m->specials)
    if (!s.special) m->has_always_matched = true;
  auto eot = m->id_of.find("<|endoftext|>");
  if (eot != m->id_of.end()) m->bos = m->eos = eot->second;
  for (const auto& p : patterns) m->pres.push_back(std::make_unique<Pretokenizer>(p, vocab_path));
  return m;
}

namespace {

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
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string_view::npos)
      bad(path, "line " + std::to_string(line_no) + ": expected \"left right\", got \"" + printable(line) + "\"");
    b.add_merge(path, line_no, line.substr(0, sp), line.substr(sp + 1));
  }
  if (b.merges.empty()) bad(path, "no merges found");
}

}  // namespace

std::string escape_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// readers

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt) {
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
  return std::make_unique<BpeTokenizer>(b.finish(vocab_json + " + " + merges_txt, vocab_json, {detail::kGpt2Pattern}));
}

}  // namespace vocablens
