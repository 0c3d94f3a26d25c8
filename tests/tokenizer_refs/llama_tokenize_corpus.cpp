// llama_tokenize_corpus — llama.cpp's own tokenizer (llama_tokenize of the prebuilt libllama in npm
// @node-llama-cpp/linux-x64@3.22.1) on a corpus: the reference side of tests/tokenizer_refs.
// Built by run_refs.sh against the headers of the same release (node-llama-cpp's git bundle); not part of vocablens.
//
//   llama_tokenize_corpus BINS_DIR vocab.gguf corpus.json ids.bin [corpus2.json ids2.bin ...] [--special]
//
// Several corpora in one call: the vocabulary is loaded once.
//
// add_special = true (BOS/EOS as the vocabulary says), parse_special = --special.
// corpus.json is read with a minimal JSON-string-array parser (no dependency); ids.bin as tokenize_ids.cpp.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

static void put_utf8(std::string& o, uint32_t cp) {
  if (cp < 0x80) o += char(cp);
  else if (cp < 0x800) o += char(0xC0 | (cp >> 6)), o += char(0x80 | (cp & 0x3F));
  else if (cp < 0x10000) o += char(0xE0 | (cp >> 12)), o += char(0x80 | ((cp >> 6) & 0x3F)), o += char(0x80 | (cp & 0x3F));
  else
    o += char(0xF0 | (cp >> 18)), o += char(0x80 | ((cp >> 12) & 0x3F)), o += char(0x80 | ((cp >> 6) & 0x3F)),
        o += char(0x80 | (cp & 0x3F));
}

// A JSON array of strings -> strings (UTF-8, \uXXXX escapes and surrogate pairs decoded).
static bool parse_strings(const std::string& s, std::vector<std::string>& out) {
  size_t i = 0;
  auto ws = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  };
  auto hex4 = [&](size_t p, uint32_t& v) {
    if (p + 4 > s.size()) return false;
    v = 0;
    for (size_t k = p; k < p + 4; ++k) {
      char c = s[k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    return true;
  };
  ws();
  if (i >= s.size() || s[i++] != '[') return false;
  ws();
  if (i < s.size() && s[i] == ']') return true;
  for (;;) {
    ws();
    if (i >= s.size() || s[i++] != '"') return false;
    std::string v;
    while (i < s.size() && s[i] != '"') {
      if (s[i] != '\\') {
        v += s[i++];
        continue;
      }
      if (++i >= s.size()) return false;
      char e = s[i++];
      switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case '/': v += '/'; break;
        case '\\': v += '\\'; break;
        case '"': v += '"'; break;
        case 'u': {
          uint32_t cp;
          if (!hex4(i, cp)) return false;
          i += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u') {
            uint32_t lo;
            if (hex4(i + 2, lo) && lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              i += 6;
            }
          }
          put_utf8(v, cp);
          break;
        }
        default: return false;
      }
    }
    if (i >= s.size()) return false;
    ++i;
    out.push_back(std::move(v));
    ws();
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == ']') return true;
    return false;
  }
}

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  bool special = false;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--special") == 0) special = true;
    else paths.push_back(argv[i]);
  }
  if (argc < 5 || paths.empty() || paths.size() % 2 != 0) {
    std::fprintf(stderr, "usage: %s BINS_DIR vocab.gguf corpus.json ids.bin [corpus2.json ids2.bin ...] [--special]\n", argv[0]);
    return 2;
  }
  ggml_backend_load_all_from_path(argv[1]);
  llama_backend_init();
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (!model) {
    std::fprintf(stderr, "llama.cpp could not load %s\n", argv[2]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  for (size_t job = 0; job + 1 < paths.size(); job += 2) {
    const std::string& corpus_path = paths[job];
    const std::string& ids_path = paths[job + 1];
    std::ifstream in(corpus_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<std::string> docs;
    if (!in || !parse_strings(ss.str(), docs)) {
      std::fprintf(stderr, "%s: not a JSON array of strings\n", corpus_path.c_str());
      return 1;
    }
    std::ofstream out(ids_path, std::ios::binary);
    if (!out) {
      std::fprintf(stderr, "%s: cannot create\n", ids_path.c_str());
      return 1;
    }
    std::vector<llama_token> ids;
    size_t total = 0;
    for (const auto& d : docs) {
      ids.resize(d.size() + 16);
      int32_t n = llama_tokenize(vocab, d.data(), (int32_t)d.size(), ids.data(), (int32_t)ids.size(), true, special);
      if (n < 0) {
        ids.resize(-n);
        n = llama_tokenize(vocab, d.data(), (int32_t)d.size(), ids.data(), (int32_t)ids.size(), true, special);
      }
      if (n < 0) {
        std::fprintf(stderr, "llama_tokenize failed\n");
        return 1;
      }
      uint32_t cnt = (uint32_t)n;
      out.write((const char*)&cnt, 4);
      for (int32_t k = 0; k < n; ++k) {
        uint32_t v = (uint32_t)ids[k];
        out.write((const char*)&v, 4);
      }
      total += n;
    }
    out.close();
    if (!out) {
      std::fprintf(stderr, "%s: write failed\n", ids_path.c_str());
      return 1;
    }
    std::printf("{\"texts\": %zu, \"tokens\": %zu, \"tokenizer\": \"llama.cpp %s\", \"corpus\": \"%s\"}\n", docs.size(), total,
                argv[2], corpus_path.c_str());
  }
  llama_model_free(model);
  return 0;
}
