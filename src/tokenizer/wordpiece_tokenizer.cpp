// BERT's WordPiece tokenizer (see vocablens/wordpiece_tokenizer.hpp). Unicode data from ICU.
#include "vocablens/wordpiece_tokenizer.hpp"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tokenizer/text_util.hpp"
#include "tokenizer/wordpiece_detect.hpp"
#include "util/json_depth.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace {

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t n = detail::utf8_char(s, i, cp);
    if (n == 0) {
      out.push_back(0xFFFD);
      i += 1;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

std::u16string to_utf16(const std::vector<uint32_t>& cps) {
  std::u16string s;
  s.reserve(cps.size());
  for (uint32_t c : cps) {
    if (c >= 0x10000) {
      c -= 0x10000;
      s.push_back(static_cast<char16_t>(0xD800 + (c >> 10)));
      s.push_back(static_cast<char16_t>(0xDC00 + (c & 0x3FF)));
    } else {
      s.push_back(static_cast<char16_t>(c));
    }
  }
  return s;
}

std::vector<uint32_t> from_utf16(const std::u16string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    uint32_t c = s[i];
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] < 0xE000) {
      c = 0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    out.push_back(c);
  }
  return out;
}

// JavaScript's \s (WhiteSpace and LineTerminator), what transformers.js splits and cleans on.
bool is_space(uint32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

bool is_control(uint32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE;
}

bool is_punctuation(uint32_t c) {
  if ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E)) return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION: return true;
    default: return false;
  }
}

// BERT's _is_chinese_char ranges.
bool is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::u16string icu_lower(const std::u16string& s) {
  if (s.empty()) return s;
  std::u16string out(s.size() + 16, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  int32_t n = u_strToLower(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()),
                           reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()), "", &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    out.assign(static_cast<size_t>(n), u'\0');
    err = U_ZERO_ERROR;
    n = u_strToLower(reinterpret_cast<UChar*>(out.data()), n, reinterpret_cast<const UChar*>(s.data()),
                     static_cast<int32_t>(s.size()), "", &err);
  }
  if (U_FAILURE(err)) throw Error(std::string("ICU lower-casing failed: ") + u_errorName(err));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::u16string icu_nfd(const std::u16string& s) {
  if (s.empty()) return s;
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* nfd = unorm2_getNFDInstance(&err);
  if (U_FAILURE(err)) throw Error(std::string("ICU NFD is not available: ") + u_errorName(err));
  std::u16string out(s.size() * 2 + 16, u'\0');
  int32_t n = unorm2_normalize(nfd, reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()),
                               reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    out.assign(static_cast<size_t>(n), u'\0');
    err = U_ZERO_ERROR;
    n = unorm2_normalize(nfd, reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()),
                         reinterpret_cast<UChar*>(out.data()), n, &err);
  }
  if (U_FAILURE(err)) throw Error(std::string("ICU NFD failed: ") + u_errorName(err));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::vector<uint32_t> normalize_cps(std::string_view text, const WordPieceConfig& c) {
  std::vector<uint32_t> cps = decode_utf8(text);
  if (c.clean_text) {
    std::vector<uint32_t> k;
    k.reserve(cps.size());
    for (uint32_t ch : cps) {
      if (ch == 0 || ch == 0xFFFD || is_control(ch)) continue;
      k.push_back(is_space(ch) ? ' ' : ch);
    }
    cps.swap(k);
  }
  if (c.handle_chinese_chars) {
    std::vector<uint32_t> k;
    k.reserve(cps.size() + 16);
    for (uint32_t ch : cps) {
      if (is_cjk(ch)) {
        k.push_back(' ');
        k.push_back(ch);
        k.push_back(' ');
      } else {
        k.push_back(ch);
      }
    }
    cps.swap(k);
  }
  const bool strip = c.strip_accents.value_or(c.lowercase);
  if (!c.lowercase && !strip) return cps;
  std::u16string u = to_utf16(cps);
  if (c.lowercase) u = icu_lower(u);
  if (strip) u = icu_nfd(u);
  cps = from_utf16(u);
  if (strip)
    cps.erase(std::remove_if(cps.begin(), cps.end(),
                             [](uint32_t ch) { return u_charType(static_cast<UChar32>(ch)) == U_NON_SPACING_MARK; }),
              cps.end());
  return cps;
}

std::string utf8_of(const uint32_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) detail::append_utf8(s, p[i]);
  return s;
}

nlohmann::json parse_json_file(const std::string& path) {
  std::string text = detail::read_file_bytes(path);
  detail::check_json_depth(text, path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) { throw FormatError(path, std::string("malformed JSON: ") + e.what()); }
}

std::string wordpiece_dir_of(const std::string& p) {
  auto k = p.find_last_of('/');
  return k == std::string::npos ? "." : (k == 0 ? "/" : p.substr(0, k));
}

}  // namespace

std::unique_ptr<WordPieceTokenizer> WordPieceTokenizer::from_tokens(std::vector<std::string> tokens, const WordPieceConfig& c,
                                                                    const std::string& source) {
  std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
  t->cfg_ = c;
  t->tokens_ = std::move(tokens);
  t->source_ = source;
  t->index(source);
  return t;
}

void WordPieceTokenizer::index(const std::string& path) {
  if (cfg_.max_input_chars_per_word < 1)
    throw FormatError(path,
                      "max_input_chars_per_word must be >= 1 (it is " + std::to_string(cfg_.max_input_chars_per_word) + ")");
  if (tokens_.empty()) throw FormatError(path, "the WordPiece vocabulary is empty");
  ids_.clear();
  ids_.reserve(tokens_.size() * 2);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    ids_[tokens_[i]] = static_cast<int64_t>(i);  // a repeated token: the later line wins, as in BERT's load_vocab
    std::string_view body = tokens_[i];
    if (body.compare(0, cfg_.prefix.size(), cfg_.prefix) == 0 && body.size() > cfg_.prefix.size())
      body.remove_prefix(cfg_.prefix.size());
    max_piece_chars_ = std::max(max_piece_chars_, decode_utf8(body).size());
  }
  auto find = [&](const std::string& s) -> int64_t {
    auto it = ids_.find(s);
    return it == ids_.end() ? -1 : it->second;
  };
  unk_ = find(cfg_.unk_token);
  if (unk_ < 0)
    throw FormatError(path, "the WordPiece vocabulary has no unknown token \"" + detail::printable(cfg_.unk_token) +
                                "\" (needed for words it cannot cover)");
  cls_ = find("[CLS]");
  sep_ = find("[SEP]");
}

std::unique_ptr<WordPieceTokenizer> WordPieceTokenizer::from_vocab_txt(const std::string& vocab_path,
                                                                       const std::string& config_path) {
  std::string text = detail::read_file_bytes(vocab_path);
  std::vector<std::string> tokens;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(pos, e - pos);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    tokens.push_back(std::move(line));
    pos = e + 1;
  }
  WordPieceConfig c;
  std::string cfg_path = config_path;
  if (cfg_path.empty() && detail::is_regular_file(wordpiece_dir_of(vocab_path) + "/tokenizer_config.json"))
    cfg_path = wordpiece_dir_of(vocab_path) + "/tokenizer_config.json";
  std::string source = vocab_path;
  if (!cfg_path.empty()) {
    nlohmann::json j = parse_json_file(cfg_path);
    if (!j.is_object()) throw FormatError(cfg_path, "expected a JSON object");
    try {
      if (j.contains("do_lower_case") && !j["do_lower_case"].is_null()) c.lowercase = j["do_lower_case"].get<bool>();
      if (j.contains("strip_accents") && !j["strip_accents"].is_null()) c.strip_accents = j["strip_accents"].get<bool>();
      if (j.contains("tokenize_chinese_chars") && !j["tokenize_chinese_chars"].is_null())
        c.handle_chinese_chars = j["tokenize_chinese_chars"].get<bool>();
      if (j.contains("unk_token") && j["unk_token"].is_string()) c.unk_token = j["unk_token"].get<std::string>();
      if (j.contains("max_input_chars_per_word")) c.max_input_chars_per_word = j["max_input_chars_per_word"].get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(cfg_path, std::string("unexpected value type: ") + e.what());
    }
    source += " + " + cfg_path;
  }
  std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
  t->cfg_ = c;
  t->tokens_ = std::move(tokens);
  t->source_ = source;
  t->index(vocab_path);
  return t;
}

std::unique_ptr<WordPieceTokenizer> WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  nlohmann::json j = parse_json_file(path);
  WordPieceConfig c;
  std::vector<std::string> tokens;
  try {
    const nlohmann::json& m = j.at("model");
    if (m.value("type", std::string()) != "WordPiece")
      throw FormatError(path,
                        "the model is not WordPiece (\"model\": {\"type\": \"" + m.value("type", std::string("?")) + "\"})");
    c.unk_token = m.value("unk_token", std::string("[UNK]"));
    c.prefix = m.value("continuing_subword_prefix", std::string("##"));
    c.max_input_chars_per_word = m.value("max_input_chars_per_word", int64_t(100));
    const nlohmann::json& v = m.at("vocab");
    if (!v.is_object()) throw FormatError(path, "model.vocab must be an object {token: id}");
    int64_t max_id = -1;
    for (auto it = v.begin(); it != v.end(); ++it) max_id = std::max(max_id, it.value().get<int64_t>());
    if (max_id < 0 || max_id >= (int64_t(1) << 26)) throw FormatError(path, "model.vocab ids out of range");
    tokens.assign(static_cast<size_t>(max_id + 1), std::string());
    for (auto it = v.begin(); it != v.end(); ++it) {
      const int64_t id = it.value().get<int64_t>();
      if (id < 0) throw FormatError(path, "negative id in model.vocab");
      tokens[static_cast<size_t>(id)] = it.key();
    }
    const nlohmann::json& n = j.contains("normalizer") ? j["normalizer"] : nlohmann::json();
    if (n.is_object()) {
      if (n.value("type", std::string()) != "BertNormalizer")
        throw FormatError(path, "WordPiece with normalizer \"" + n.value("type", std::string("?")) +
                                    "\" is not supported (BertNormalizer or none)");
      c.clean_text = n.value("clean_text", true);
      c.handle_chinese_chars = n.value("handle_chinese_chars", true);
      c.lowercase = n.value("lowercase", true);
      if (n.contains("strip_accents") && !n["strip_accents"].is_null()) c.strip_accents = n["strip_accents"].get<bool>();
    } else {
      c.clean_text = c.handle_chinese_chars = c.lowercase = false;
      c.strip_accents = false;
    }
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path, std::string("malformed WordPiece tokenizer.json: ") + e.what());
  }
  return from_tokens(std::move(tokens), c, path);
}

std::string WordPieceTokenizer::piece(int64_t id) const {
  if (id < 0 || id >= vocab_size()) throw UsageError("token id " + std::to_string(id) + " outside the vocabulary");
  return tokens_[static_cast<size_t>(id)];
}

std::string WordPieceTokenizer::token_bytes(int64_t id) const {
  std::string p = piece(id);
  if (p.size() > cfg_.prefix.size() && p.compare(0, cfg_.prefix.size(), cfg_.prefix) == 0) return p.substr(cfg_.prefix.size());
  return p;
}

std::string WordPieceTokenizer::display(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "<id " + std::to_string(id) + "?>";
  return display_text(tokens_[static_cast<size_t>(id)]);
}

std::optional<int64_t> WordPieceTokenizer::token_to_id(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  if (it != ids_.end()) return it->second;
  it = ids_.find(undisplay_text(token));
  if (it != ids_.end()) return it->second;
  return std::nullopt;
}

bool WordPieceTokenizer::is_special(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  const std::string& p = tokens_[static_cast<size_t>(id)];
  return p.size() >= 3 && p.front() == '[' && p.back() == ']' && p.find(' ') == std::string::npos;
}

std::vector<std::string> WordPieceTokenizer::pre_tokenize(std::string_view text) const {
  std::vector<uint32_t> cps = normalize_cps(text, cfg_);
  std::vector<std::string> words;
  size_t i = 0;
  while (i < cps.size()) {
    if (is_space(cps[i])) {
      ++i;
    } else if (is_punctuation(cps[i])) {
      words.push_back(utf8_of(&cps[i], 1));
      ++i;
    } else {
      size_t j = i;
      while (j < cps.size() && !is_space(cps[j]) && !is_punctuation(cps[j])) ++j;
      words.push_back(utf8_of(&cps[i], j - i));
      i = j;
    }
  }
  return words;
}

bool WordPieceTokenizer::encode_word(std::string_view word, std::vector<int64_t>& out) const {
  std::vector<uint32_t> cps = decode_utf8(word);
  if (static_cast<int64_t>(cps.size()) > cfg_.max_input_chars_per_word) {
    out.push_back(unk_);
    return false;
  }
  const size_t before = out.size();
  size_t start = 0;
  std::string key;
  while (start < cps.size()) {
    size_t end = std::min(cps.size(), start + max_piece_chars_);
    int64_t found = -1;
    for (; end > start; --end) {
      key.clear();
      if (start > 0) key = cfg_.prefix;
      for (size_t k = start; k < end; ++k) detail::append_utf8(key, cps[k]);
      auto it = ids_.find(key);
      if (it != ids_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      out.resize(before);
      out.push_back(unk_);
      return false;
    }
    out.push_back(found);
    start = end;
  }
  return true;
}

std::vector<int64_t> WordPieceTokenizer::do_encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<int64_t> out;
  if (opts.add_bos.value_or(false) && cls_ >= 0) out.push_back(cls_);
  auto plain = [&](std::string_view part) {
    for (const std::string& w : pre_tokenize(part)) encode_word(w, out);
  };
  if (!opts.special_tokens) {
    plain(text);
  } else {
    // "[CLS]", "[SEP]", "[MASK]", ... written in the text become their ids (like added special tokens).
    size_t seg = 0, i = 0;
    while ((i = text.find('[', i)) != std::string_view::npos) {
      const size_t close = text.find(']', i);
      if (close == std::string_view::npos) break;
      auto it = ids_.find(std::string(text.substr(i, close + 1 - i)));
      if (it != ids_.end() && is_special(it->second)) {
        plain(text.substr(seg, i - seg));
        out.push_back(it->second);
        seg = i = close + 1;
      } else {
        ++i;
      }
    }
    plain(text.substr(seg));
  }
  if (opts.add_eos && sep_ >= 0) out.push_back(sep_);
  return out;
}

std::string WordPieceTokenizer::do_decode(const int64_t* ids, size_t n) const {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) throw UsageError("token id " + std::to_string(ids[i]) + " outside the vocabulary");
    const std::string& p = tokens_[static_cast<size_t>(ids[i])];
    if (i > 0 && p.size() > cfg_.prefix.size() && p.compare(0, cfg_.prefix.size(), cfg_.prefix) == 0) {
      s += p.substr(cfg_.prefix.size());
    } else {
      if (i > 0) s += ' ';
      s += p;
    }
  }
  return s;
}

namespace detail {

bool is_wordpiece_tokenizer_json(const std::string& path) {
  if (!is_regular_file(path)) return false;
  try {
    nlohmann::json j = nlohmann::json::parse(read_file_bytes(path));
    return j.is_object() && j.contains("model") && j["model"].is_object() &&
           j["model"].value("type", std::string()) == "WordPiece";
  } catch (const std::exception&) { return false; }
}

std::unique_ptr<Tokenizer> find_wordpiece(const std::string& dir) {
  const std::string tj = dir + "/tokenizer.json", vt = dir + "/vocab.txt";
  if (is_regular_file(tj)) return is_wordpiece_tokenizer_json(tj) ? WordPieceTokenizer::from_tokenizer_json(tj) : nullptr;
  if (is_regular_file(vt) && !is_regular_file(dir + "/vocab.json")) return WordPieceTokenizer::from_vocab_txt(vt);
  return nullptr;
}

}  // namespace detail
}  // namespace vocablens
