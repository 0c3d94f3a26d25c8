// tokenizer_from_vocab(): tokenizers from in-memory vocabulary data (GGUF tokenizer.ggml.*), see vocab_spec.hpp.
//  - "gpt2": a byte-level BpeModel; the pre-tokenizer expressions per `pre` name follow llama.cpp's table
//    (llama-vocab.cpp, release b6xxx of node-llama-cpp 3.22.1), written here as the Hugging Face files state them.
//  - "llama": a SentencePiece ModelProto serialized here (protobuf wire format, six fields) and loaded by
//    libsentencepiece.
#include "vocablens/vocab_spec.hpp"

#include <cstring>

#include "tokenizer/bpe_builder.hpp"
#include "tokenizer/text_util.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/sentencepiece_tokenizer.hpp"

namespace vocablens {
namespace {

using detail::bad;

bool valid_utf8(std::string_view s) {
  uint32_t cp = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t k = detail::utf8_char(s, i, cp);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

// The expressions (Hugging Face tokenizer.json spellings; PCRE2 reads them directly).
const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

struct PreEntry {
  std::vector<const char*> names;
  std::vector<const char*> patterns;
  bool ignore_merges;
  bool add_bos;
};

const std::vector<PreEntry>& pre_table() {
  static const std::vector<PreEntry> t = {
      {{"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))", R"(\p{N}+)",
        R"([0-9][0-9][0-9])"},
       false,
       false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}, {kLlama3}, true, true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}, false, false},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan"}, {kQwen2}, false, false},
      {{"qwen35"}, {kQwen35}, false, false},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat", "mpt", "olmo", "jais", "trillion",
        "roberta-bpe", "jina-v1-en", "jina-v2-code", "modern-bert"},
       {kGpt2},
       false,
       false},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva"}, {R"(\p{N})", kGpt2}, false, false},
      {{"falcon"},
       {R"([\p{P}\$\+<=>\^~\|`]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"([0-9][0-9][0-9])"},
       false,
       false},
      // DeepSeek (LLM 7B/67B and Coder): a Sequence of Split pre-tokenizers in tokenizer.json, each applied to
      // the pieces of the one before. Letters are listed as explicit ranges (Latin, Greek, Cyrillic, ... but
      // not CJK), punctuation as ASCII/full-width ranges; CJK and Hangul runs are split off on their own.
      // The expressions are llama.cpp's copies of those files, each non-ASCII character written as its code point
      // (\x{...}): the ranges use compatibility characters (U+1F7D, U+2126 KELVIN SIGN, ...) that an editor's
      // NFC normalisation would silently turn into others. `$` is written `\z`: Hugging Face's (Rust) `$` is the
      // end of the piece only, PCRE2's also matches before a final newline.
      {{"deepseek-llm"},
       {R"([\r\n])",
        R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
        R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)", R"(\s+\z)",
        R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N}+)"},
       false,
       false},
      {{"deepseek-coder"},
       {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)", R"(\p{N})"},
       false,
       false},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}, false, false},
      {{"viking"}, {kBloom, R"(\p{N})"}, false, false},
      {{"tekken"}, {kTekken}, false, false},
      {{"gpt-4o", "minimax-m2"}, {kGpt4o}, false, false},
  };
  return t;
}

std::string known_list() {
  std::string s;
  for (const auto& n : known_bpe_pre_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// ---- protobuf wire format, the few fields a SentencePiece ModelProto needs
void varint(std::string& o, uint64_t v) {
  while (v >= 0x80) {
    o += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  o += static_cast<char>(v);
}
void tag(std::string& o, int field, int wire) { varint(o, (static_cast<uint64_t>(field) << 3) | wire); }
void field_bytes(std::string& o, int field, const std::string& v) {
  tag(o, field, 2);
  varint(o, v.size());
  o += v;
}
void field_int(std::string& o, int field, int64_t v) {
  tag(o, field, 0);
  varint(o, static_cast<uint64_t>(v));  // negative int32: 10-byte two's complement, as protobuf does
}
void field_float(std::string& o, int field, float v) {
  tag(o, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (x86-64, aarch64)
  o.append(b, 4);
}

std::unique_ptr<Tokenizer> from_llama(const VocabSpec& v) {
  const size_t n = v.tokens.size();
  if (!v.scores.empty() && v.scores.size() != n)
    bad(v.source,
        "tokenizer.ggml.scores has " + std::to_string(v.scores.size()) + " entries for " + std::to_string(n) + " tokens");
  std::string proto, pieces;
  bool has_unk = false;
  int n_byte = 0;
  for (size_t i = 0; i < n && !v.token_types.empty(); ++i) n_byte += v.token_types[i] == 6;
  for (size_t i = 0; i < n; ++i) {
    int32_t type = v.token_types.empty() ? 1 : v.token_types[i];
    if (type < 1 || type > 6)
      bad(v.source, "token " + std::to_string(i) + " has token type " + std::to_string(type) + " (expected 1..6)");
    if (static_cast<int64_t>(i) == v.unk_id) type = 2;  // SentencePiece wants <unk> typed UNKNOWN (Phi-3 GGUF: CONTROL)
    else if (type == 2 && v.unk_id >= 0) type = 3;      // only one UNKNOWN piece
    has_unk |= type == 2;
    if (type == 6 && n_byte != 256) type = 1;  // an incomplete byte set: ordinary pieces (libsentencepiece's rule)
    if (v.tokens[i].empty()) bad(v.source, "token " + std::to_string(i) + " is empty");
    std::string p;
    field_bytes(p, 1, v.tokens[i]);
    field_float(p, 2, v.scores.empty() ? 0.0f : v.scores[i]);
    field_int(p, 3, type);
    field_bytes(pieces, 1, p);
  }
  if (!has_unk)
    bad(v.source, "a SentencePiece vocabulary needs an unknown token (tokenizer.ggml.unknown_token_id or a token of type 2)");
  proto = pieces;
  std::string trainer;
  field_int(trainer, 3, 2);  // model_type BPE
  field_int(trainer, 4, static_cast<int64_t>(n));
  // byte_fallback: libsentencepiece insists on all 256 <0xNN> pieces; with fewer they are ordinary pieces
  if (n_byte == 256) field_int(trainer, 35, 1);
  if (v.unk_id >= 0) field_int(trainer, 40, v.unk_id);
  field_int(trainer, 41, v.bos_id);
  field_int(trainer, 42, v.eos_id);
  field_int(trainer, 43, v.pad_id);
  field_bytes(proto, 2, trainer);
  std::string norm;
  field_bytes(norm, 1, "identity");
  field_int(norm, 3, v.add_space_prefix.value_or(true) ? 1 : 0);  // add_dummy_prefix
  field_int(norm, 4, 0);                                          // remove_extra_whitespaces
  field_int(norm, 5, 1);                                          // escape_whitespaces
  field_bytes(proto, 3, norm);
  return SentencePieceTokenizer::from_serialized(proto, v.source, v.add_bos.value_or(true), v.add_eos.value_or(false), v.bos_id,
                                                 v.eos_id);
}

// The merges of a BPE vocabulary ("left right", rank = order), each checked, into the builder.
void add_merges(detail::Builder& b, const VocabSpec& v) {
  for (size_t k = 0; k < v.merges.size(); ++k) {
    const std::string& s = v.merges[k];
    size_t sp = s.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
      bad(v.source, "merge " + std::to_string(k + 1) + ": expected \"left right\", got \"" + detail::printable(s) + "\"");
    b.add_merge(v.source, k + 1, std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
  }
}

std::unique_ptr<Tokenizer> from_gpt2(const VocabSpec& v) {
  std::string pre = v.pre.empty() ? "default" : v.pre;
  const PreEntry* entry = nullptr;
  for (const auto& e : pre_table())
    for (const char* nm : e.names)
      if (pre == nm) entry = &e;
  if (!entry)
    bad(v.source, "unknown pre-tokenizer \"" + detail::printable(pre) + "\" (tokenizer.ggml.pre); known: " + known_list());
  const size_t n = v.tokens.size();
  detail::Builder b;
  b.max_id = static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t type = v.token_types.empty() ? 1 : v.token_types[i];
    std::string raw;
    if (type == 3 || type == 4) {  // control / user-defined: text matched before pre-tokenizing
      // User-defined tokens may be stored in the byte-level spelling ("Ġ<tag>"): use the raw text then. But
      // not when those bytes are no text: DeepSeek's added tokens "ö", "À", ... (U+00F6, U+00C0) read as
      // byte-level spellings are the lone bytes 0xF6, 0xC0, which never occur in UTF-8 — they are meant
      // literally (Hugging Face matches the added token "ö" in the text, and so does llama.cpp).
      std::string content = type == 4 && detail::unicode_to_bytes(v.tokens[i], raw) && valid_utf8(raw) ? raw : v.tokens[i];
      if (content.empty()) continue;
      b.add_added(v.source, content, static_cast<int64_t>(i), type == 3);
    } else if (type == 5 && !detail::unicode_to_bytes(v.tokens[i], raw)) {
      continue;  // unused placeholder outside the alphabet
    } else {
      b.add_token(v.source, v.tokens[i], static_cast<int64_t>(i));
    }
  }
  b.check_vocabulary(v.source);
  add_merges(b, v);
  b.m->ignore_merges = entry->ignore_merges;
  std::vector<std::string> pats(entry->patterns.begin(), entry->patterns.end());
  auto m = b.finish(v.source, v.source, pats);
  auto in_range = [&](int64_t id) { return id >= 0 && id < static_cast<int64_t>(n); };
  m->bos = in_range(v.bos_id) ? static_cast<int32_t>(v.bos_id) : (v.bos_id == -1 ? -1 : m->bos);
  m->eos = in_range(v.eos_id) ? static_cast<int32_t>(v.eos_id) : (v.eos_id == -1 ? -1 : m->eos);
  m->add_bos_default = v.add_bos.value_or(entry->add_bos) && m->bos >= 0;
  m->add_eos_default = v.add_eos.value_or(false) && m->eos >= 0;
  return std::make_unique<BpeTokenizer>(m);
}

/// "gemma4" (Gemma-4): SentencePiece-style BPE with merges on raw UTF-8 — spaces become "▁", the text is split
/// at newline runs (a run that is itself a token is taken whole), characters merge by rank, a character the
/// vocabulary lacks becomes its <0xNN> tokens (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4).
std::unique_ptr<Tokenizer> from_gemma4(const VocabSpec& v) {
  const std::string space = "\xE2\x96\x81";
  const size_t n = v.tokens.size();
  detail::Builder b;
  b.max_id = static_cast<int64_t>(n);
  b.m->byte_level = false;
  for (size_t i = 0; i < n; ++i) {
    int32_t type = v.token_types.empty() ? 1 : v.token_types[i];
    if (v.tokens[i].empty()) continue;
    if (type == 3 || type == 4) {
      b.add_added(v.source, v.tokens[i], static_cast<int64_t>(i), type == 3);
      b.spelled_id.emplace(v.tokens[i], static_cast<int32_t>(i));
    } else {
      b.add_piece(v.source, v.tokens[i], static_cast<int64_t>(i), space);
    }
  }
  b.check_vocabulary(v.source);
  add_merges(b, v);
  auto& m = *b.m;
  m.byte_fallback = true;
  m.unk = v.unk_id >= 0 ? static_cast<int32_t>(v.unk_id) : -1;
  m.whole_newline_runs = true;
  m.norm.push_back({detail::NormStep::kReplace, " ", space});
  auto result = b.finish(v.source, v.source, {"[^\\n]+|[\\n]+"});
  result->bos = v.bos_id >= 0 ? static_cast<int32_t>(v.bos_id) : -1;
  result->eos = v.eos_id >= 0 ? static_cast<int32_t>(v.eos_id) : -1;
  result->add_bos_default = v.add_bos.value_or(true) && result->bos >= 0;
  result->add_eos_default = v.add_eos.value_or(false) && result->eos >= 0;
  return std::make_unique<BpeTokenizer>(result);
}

}  // namespace

std::vector<std::string> known_bpe_pre_names() {
  std::vector<std::string> out;
  for (const auto& e : pre_table())
    for (const char* n : e.names) out.push_back(n);
  return out;
}

std::unique_ptr<Tokenizer> tokenizer_from_vocab(const VocabSpec& v) {
  if (v.tokens.empty()) bad(v.source, "the vocabulary is empty (tokenizer.ggml.tokens)");
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size())
    bad(v.source, "tokenizer.ggml.token_type has " + std::to_string(v.token_types.size()) + " entries for " +
                      std::to_string(v.tokens.size()) + " tokens");
  if (v.tokens.size() >= (size_t{1} << 30)) bad(v.source, "too many tokens");
  for (int64_t id : {v.bos_id, v.eos_id, v.unk_id, v.pad_id})
    if (id >= static_cast<int64_t>(v.tokens.size()))
      bad(v.source,
          "special token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(v.tokens.size()));
  if (v.model == "gpt2") return from_gpt2(v);
  if (v.model == "llama") return from_llama(v);
  if (v.model == "gemma4") return from_gemma4(v);
  bad(v.source, "tokenizer model \"" + detail::printable(v.model) +
                    "\" (tokenizer.ggml.model) is not supported (supported: gpt2, llama, gemma4)");
}

}  // namespace vocablens
