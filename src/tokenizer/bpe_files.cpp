// GPT-2 byte-level BPE: the file readers (vocab.json + merges.txt, Hugging Face tokenizer.json) that
// check a vocabulary and freeze it into a BpeModel (bpe_model.hpp).
//
// Untrusted input (issue #9): every defect of a file is a one-line FormatError naming the file; ids and
// sizes are bounded before any table is sized from them (fuzzed by tests/fuzz/fuzz_bpe_files.cpp).
#include <algorithm>
#include <array>
#include <memory>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_model.hpp"
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

[[noreturn]] void bad(const std::string& path, const std::string& what) { throw FormatError(path, what); }

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

}  // namespace vocablens
