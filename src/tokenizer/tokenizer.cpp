// The Tokenizer interface's shared parts: display forms, token look-up, and finding a model's tokenizer.
#include "vocablens/tokenizer.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tokenizer/text_util.hpp"
#include "tokenizer/wordpiece_detect.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "util/regular_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/vocab_spec.hpp"
#include "vocablens/llama2c_tokenizer.hpp"
#include "vocablens/wordpiece_tokenizer.hpp"
#include "vocablens/sentencepiece_tokenizer.hpp"

namespace vocablens {

// Code points that print as blank or nothing (other spaces, zero-width and direction marks, BOM)
// would leave a table cell that looks empty or like an ordinary space; they are shown as <U+XXXX>.
static bool invisible_code_point(uint32_t cp) {
  return cp == 0xA0 || cp == 0xAD || cp == 0x034F || cp == 0x061C || cp == 0x115F || cp == 0x1160 || cp == 0x1680 ||
         cp == 0x180E || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) ||
         cp == 0x3000 || cp == 0x3164 || cp == 0xFEFF || cp == 0xFFA0 || (cp >= 0xFE00 && cp <= 0xFE0F);
}

std::string display_text(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t n = detail::utf8_char(s, i, cp);
    if (n == 0) {  // not part of a valid character (e.g. half of a multi-byte character split by BPE)
      std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(s[i]));
      out += buf;
      i += 1;
      continue;
    }
    if (cp == ' ') {
      out += "\xE2\x90\xA3";  // ␣ U+2423
    } else if (cp == '\n') {
      out += "\xE2\x8F\x8E";  // ⏎ U+23CE
    } else if (cp == '\t') {
      out += "\xE2\x87\xA5";  // ⇥ U+21E5
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof buf, "<0x%02X>", cp);
      out += buf;
    } else if ((cp >= 0x80 && cp <= 0x9F) || invisible_code_point(cp)) {
      std::snprintf(buf, sizeof buf, "<U+%04X>", cp);
      out += buf;
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  return out;
}

std::string undisplay_text(std::string_view s) {
  std::string out;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 3, "\xE2\x90\xA3") == 0) {
      out += ' ', i += 3;
    } else if (s.compare(i, 3, "\xE2\x8F\x8E") == 0) {
      out += '\n', i += 3;
    } else if (s.compare(i, 3, "\xE2\x87\xA5") == 0) {
      out += '\t', i += 3;
    } else if (i + 6 <= s.size() && s.compare(i, 3, "<0x") == 0 && s[i + 5] == '>' && hex(s[i + 3]) >= 0 && hex(s[i + 4]) >= 0) {
      out += static_cast<char>(hex(s[i + 3]) * 16 + hex(s[i + 4]));
      i += 6;
    } else if (i + 8 <= s.size() && s.compare(i, 3, "<U+") == 0 && s[i + 7] == '>' && hex(s[i + 3]) >= 0 && hex(s[i + 4]) >= 0 &&
               hex(s[i + 5]) >= 0 && hex(s[i + 6]) >= 0) {
      detail::append_utf8(out, (hex(s[i + 3]) << 12) | (hex(s[i + 4]) << 8) | (hex(s[i + 5]) << 4) | hex(s[i + 6]));
      i += 8;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::string Tokenizer::display(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "<id " + std::to_string(id) + "?>";
  try {
    return display_text(token_bytes(id));
  } catch (const UsageError&) {  // an unused id inside the range (holes in a HF vocabulary)
    return "<id " + std::to_string(id) + "?>";
  }
}

int64_t Tokenizer::require_token_id(std::string_view token) const {
  std::vector<int64_t> ids;
  if (auto id = single_token_id(*this, token, &ids)) return *id;
  throw UsageError("\"" + detail::printable(token) + "\" is not a single token of " + source() + " (it encodes as " +
                   std::to_string(ids.size()) + " tokens: " + display_ids(*this, ids) + ")");
}

// ---------------------------------------------------------------------------------------------------
// finding a tokenizer

namespace {

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string base_name(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  auto k = s.find_last_of('/');
  return k == std::string::npos ? s : s.substr(k + 1);
}

std::string dir_name(const std::string& p) {
  auto k = p.find_last_of('/');
  if (k == std::string::npos) return ".";
  return k == 0 ? "/" : p.substr(0, k);
}

bool is_file(const std::string& p) { return detail::is_regular_file(p); }

/// tok*.bin files of a directory, sorted (llama2.c names custom vocabularies tok<N>.bin).
std::vector<std::string> tok_bins(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 7 && n.compare(0, 3, "tok") == 0 && n.compare(n.size() - 4, 4, ".bin") == 0 && n != "tokenizer.bin")
        out.push_back(join(dir, n));
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The model's vocabulary size when it is cheap to know (llama2.c header, config.json), else -1.
int64_t model_vocab_size(const std::string& model_path) {
  try {
    if (detail::is_directory(model_path)) {
      std::string cfg = join(model_path, "config.json");
      if (!is_file(cfg)) return -1;
      auto j = nlohmann::json::parse(detail::read_file_bytes(cfg));
      return j.is_object() && j.contains("vocab_size") && j["vocab_size"].is_number_integer() ? j["vocab_size"].get<int64_t>()
                                                                                              : -1;
    }
    std::ifstream f(model_path, std::ios::binary);
    int32_t h[7];
    if (!f.read(reinterpret_cast<char*>(h), sizeof h)) return -1;
    int64_t v = h[5] < 0 ? -static_cast<int64_t>(h[5]) : h[5];  // negative: untied classifier
    return h[0] > 0 && h[1] > 0 && h[2] > 0 && v > 0 ? v : -1;
  } catch (const std::exception&) { return -1; }
}

/// Tries the known layouts in `dir`; nullptr when none is there.
std::unique_ptr<Tokenizer> search_dir(const std::string& dir, int64_t want_vocab) {
  if (auto t = detail::find_wordpiece(dir)) return t;  // BERT: WordPiece tokenizer.json, or vocab.txt
  if (is_file(join(dir, "tokenizer.json"))) return BpeTokenizer::from_tokenizer_json(join(dir, "tokenizer.json"));
  if (is_file(join(dir, "tokenizer.model"))) return SentencePieceTokenizer::load(join(dir, "tokenizer.model"));
  if (is_file(join(dir, "vocab.json")) && is_file(join(dir, "merges.txt")))
    return BpeTokenizer::from_vocab_merges(join(dir, "vocab.json"), join(dir, "merges.txt"));
  if (is_file(join(dir, "encoder.json")) && is_file(join(dir, "vocab.bpe")))
    return BpeTokenizer::from_vocab_merges(join(dir, "encoder.json"), join(dir, "vocab.bpe"));
  std::vector<std::string> bins;
  if (is_file(join(dir, "tokenizer.bin"))) bins.push_back(join(dir, "tokenizer.bin"));
  for (auto& b : tok_bins(dir)) bins.push_back(b);
  if (bins.empty()) return nullptr;
  if (bins.size() > 1 && want_vocab > 0) {
    for (auto& b : bins) {
      auto t = Llama2cTokenizer::load(b);
      if (t->vocab_size() == want_vocab) return t;
    }
  }
  return Llama2cTokenizer::load(bins.front());
}

bool is_tokenizer_file_name(const std::string& name) {
  return name == "tokenizer.json" || name == "tokenizer.model" || name == "vocab.txt" || name == "vocab.json" ||
         name == "merges.txt" || name == "encoder.json" || name == "vocab.bpe" || name == "tokenizer.bin" ||
         (name.size() > 7 && name.compare(0, 3, "tok") == 0 && name.compare(name.size() - 4, 4, ".bin") == 0);
}

/// A GGUF file (magic "GGUF"): its own tokenizer.ggml.* vocabulary; nullptr when it has none.
bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4];
  return f.read(m, 4) && std::memcmp(m, "GGUF", 4) == 0;
}
std::unique_ptr<Tokenizer> gguf_tokenizer(const std::string& path) {
  GgufFile g = read_gguf(path);
  if (!g.metadata.contains("tokenizer.ggml.model")) return nullptr;
  return tokenizer_from_vocab(gguf_vocab_spec(g));
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (detail::is_directory(path)) {
    if (auto t = search_dir(path, model_vocab_size(path))) return t;
    throw FormatError(path,
                      "no tokenizer here (looked for tokenizer.json, tokenizer.model, vocab.json + merges.txt, "
                      "encoder.json + vocab.bpe, tokenizer.bin, tok*.bin)");
  }
  if (!is_file(path)) {
    // `-z /dev/zero` said "No such file or directory".
    const std::string kind = detail::file_kind(path);
    throw FormatError(path, kind.empty() ? "cannot open: No such file or directory" : "is " + kind + ", not a tokenizer file");
  }
  if (starts_with_gguf_magic(path)) {
    if (auto t = gguf_tokenizer(path)) return t;
    throw FormatError(path, "this GGUF file has no tokenizer (no tokenizer.ggml.model metadata)");
  }
  const std::string name = base_name(path), dir = dir_name(path);
  auto pair = [&](const char* a, const char* b, bool path_is_first) -> std::unique_ptr<Tokenizer> {
    std::string other = join(dir, path_is_first ? b : a);
    if (!is_file(other))
      throw FormatError(path,
                        std::string("needs its companion ") + (path_is_first ? b : a) + " beside it (" + other + " not found)");
    return path_is_first ? BpeTokenizer::from_vocab_merges(path, other) : BpeTokenizer::from_vocab_merges(other, path);
  };
  if (name == "vocab.txt") return WordPieceTokenizer::from_vocab_txt(path);
  if (detail::is_wordpiece_tokenizer_json(path)) return WordPieceTokenizer::from_tokenizer_json(path);
  if (name == "vocab.json") return pair("vocab.json", "merges.txt", true);
  if (name == "merges.txt") return pair("vocab.json", "merges.txt", false);
  if (name == "encoder.json") return pair("encoder.json", "vocab.bpe", true);
  if (name == "vocab.bpe") return pair("encoder.json", "vocab.bpe", false);
  if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) return BpeTokenizer::from_tokenizer_json(path);
  if (name.size() >= 6 && name.compare(name.size() - 6, 6, ".model") == 0) return SentencePieceTokenizer::load(path);
  return Llama2cTokenizer::load(path);
}

std::unique_ptr<Tokenizer> load_tokenizer_for(const std::string& model_path, const std::string& explicit_tokenizer) {
  if (!explicit_tokenizer.empty()) return load_tokenizer(explicit_tokenizer);
  if (detail::is_directory(model_path)) {
    if (auto t = search_dir(model_path, model_vocab_size(model_path))) return t;
  } else if (is_file(model_path)) {
    if (is_tokenizer_file_name(base_name(model_path))) return load_tokenizer(model_path);
    if (starts_with_gguf_magic(model_path))  // the GGUF's own vocabulary first; files beside it otherwise
      if (auto t = gguf_tokenizer(model_path)) return t;
    if (auto t = search_dir(dir_name(model_path), model_vocab_size(model_path))) return t;
  } else {
    throw FormatError(model_path, "cannot open: No such file or directory");
  }
  throw FormatError(model_path,
                    "no tokenizer found beside the model (looked for tokenizer.json, tokenizer.model, vocab.json + merges.txt, "
                    "encoder.json + vocab.bpe, tokenizer.bin, tok*.bin); pass one explicitly (--tokenizer)");
}

}  // namespace vocablens
