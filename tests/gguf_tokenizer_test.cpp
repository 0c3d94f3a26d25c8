// A GGUF file's own vocabulary (tokenizer.ggml.*) reached through load_tokenizer_for() / load_tokenizer(),
// the path every command takes (`vocablens lens model.gguf --prompt TEXT` needs no side tokenizer).
// Reference: llama.cpp's tokenizer test vectors (models/ggml-vocab-NAME.gguf.inp / .out: ids written by
// Hugging Face's Python tokenizers, no BOS, special tokens parsed) from the llama.cpp reference that
// scripts/setup_llama_ref.sh installs ($VOCABLENS_LLAMA_REF, else ~/.cache/vocablens/llama-cpp-3.22.1); the
// test FAILS when it is missing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/vocab_spec.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

std::string llama_models_dir() {
  const char* e = std::getenv("VOCABLENS_LLAMA_REF");
  const char* h = std::getenv("HOME");
  std::string ref = e ? e : std::string(h ? h : "/root") + "/.cache/vocablens/llama-cpp-3.22.1";
  return ref + "/llama.cpp/models";
}

bool exists(const std::string& p) { return std::ifstream(p).good(); }

// As llama.cpp's tests/test-tokenizer-0.cpp reads them: texts separated by "\n__ggml_vocab_test__\n".
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string raw = vl_test::read_file(path), sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      out.push_back(raw.substr(pos));
      break;
    }
    out.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int64_t>> read_ids(const std::string& path) {
  std::vector<std::vector<int64_t>> out;
  std::istringstream in(vl_test::read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int64_t> ids;
    int64_t id;
    while (ls >> id) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

}  // namespace

TEST_CASE("load_tokenizer_for(model.gguf) uses the GGUF's vocabulary: llama.cpp's test vectors, id for id") {
  const std::string dir = llama_models_dir();
  INFO("llama.cpp reference expected at " << dir << " (run scripts/setup_llama_ref.sh, or set VOCABLENS_LLAMA_REF)");
  REQUIRE(exists(dir + "/ggml-vocab-llama-spm.gguf"));
  REQUIRE(vocablens::is_gguf_file(dir + "/ggml-vocab-llama-spm.gguf"));  // (also links the GGUF reader, which sets the hook)
  // SentencePiece (llama), Phi-3's SentencePiece variant, and byte-level BPE with eight pre-tokenizers: GPT-2's
  // (also MPT's), Llama-3's, Qwen2's, Falcon's (punctuation runs, then three-digit groups split off), StarCoder's
  // and Refact's (every digit alone), DeepSeek-LLM's and DeepSeek-Coder's (explicit letter and punctuation
  // ranges, CJK/Hangul runs apart, newlines alone). Falcon, StarCoder and Refact lack some single-byte tokens.
  for (const char* fam : {"llama-spm", "phi-3", "gpt-2", "mpt", "llama-bpe", "qwen2", "falcon", "starcoder", "refact",
                          "deepseek-llm", "deepseek-coder"}) {
    const std::string g = dir + "/ggml-vocab-" + fam + ".gguf";
    INFO(g);
    auto tok = vocablens::load_tokenizer_for(g);  // no side tokenizer: the vocabulary inside the file
    auto texts = read_inputs(g + ".inp");
    auto want = read_ids(g + ".out");
    REQUIRE(texts.size() == want.size());
    REQUIRE(texts.size() == 46);  // this release's vectors (node-llama-cpp 3.22.1)
    vocablens::EncodeOptions o;
    o.add_bos = false;
    o.special_tokens = true;
    size_t equal = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto got = tok->encode(texts[i], o);
      if (got == want[i]) ++equal;
      else UNSCOPED_INFO("text " << i << " differs");
    }
    CHECK(equal == texts.size());
    // The same file given explicitly (--tokenizer model.gguf) reads the same vocabulary.
    auto again = vocablens::load_tokenizer(g);
    CHECK(again->vocab_size() == tok->vocab_size());
    CHECK(again->encode(texts[5], o) == tok->encode(texts[5], o));
  }
}

TEST_CASE("a byte-level vocabulary without some single-byte tokens refuses a text holding those bytes, naming the byte") {
  // Falcon's vocabulary has no token for the control characters 0x03..0x05 (among 28 bytes); Hugging Face and
  // llama.cpp drop such bytes from the ids without a word. Here the text is refused instead.
  const std::string g = llama_models_dir() + "/ggml-vocab-falcon.gguf";
  REQUIRE(exists(g));
  auto tok = vocablens::load_tokenizer_for(g);
  vocablens::EncodeOptions o;
  o.add_bos = false;
  CHECK(!tok->encode("Hello world", o).empty());
  try {
    (void)tok->encode(std::string("a\x03"
                                  "b"),
                      o);
    FAIL("expected a UsageError");
  } catch (const vocablens::UsageError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("0x03") != std::string::npos);
    CHECK(msg.find("control character") != std::string::npos);
    CHECK(msg.find(g) != std::string::npos);
  }
}

TEST_CASE("DeepSeek's added Latin-1 tokens (ö, À, ...) match their text, as in llama.cpp") {
  // DeepSeek's vocabularies add "õ", "÷", "Á", ..., "û" as user-defined tokens; read as byte-level spellings
  // they would be the lone bytes 0xF5, 0xF7, 0xC1, ..., which never occur in UTF-8. Reference: the ids of
  // llama.cpp's llama_tokenize (libllama of node-llama-cpp 3.22.1, add_special, parse_special) for these texts.
  const std::vector<std::string> texts = {
      "J\xC3\xB6rg Hoh \xC3\x80 la carte, 2007",
      "\xC3\xB5\xC3\xB7\xC3\x81\xC3\xBD\xC3\xBF\xC3\xB8\xC3\xBA\xC3\xBE\xC3\xBC\xC3\xB9\xC3\xB6\xC3\xBB"};
  const std::vector<std::pair<const char*, std::vector<std::vector<int64_t>>>> want = {
      {"deepseek-coder",
       {{32013, 41, 32011, 13507, 414, 2085, 207, 32004, 446, 7714, 68, 11, 207, 17, 15, 15, 22},
        {32013, 32000, 32001, 32002, 32003, 32005, 32006, 32007, 32008, 32009, 32010, 32011, 32012}}},
      {"deepseek-llm",
       {{100000, 41, 100003, 10704, 415, 2099, 207, 100010, 446, 86371, 11, 207, 17, 15, 15, 22},
        {100000, 100006, 100007, 100012, 100009, 100005, 100002, 100004, 100013, 100014, 100011, 100003, 100008}}}};
  for (const auto& [fam, ids] : want) {
    const std::string g = llama_models_dir() + "/ggml-vocab-" + fam + ".gguf";
    INFO(g);
    REQUIRE(exists(g));
    auto tok = vocablens::load_tokenizer_for(g);
    vocablens::EncodeOptions o;
    o.add_bos = true;
    o.special_tokens = true;
    for (size_t i = 0; i < texts.size(); ++i) CHECK(tok->encode(texts[i], o) == ids[i]);
  }
}

TEST_CASE("a GGUF model's own vocabulary equals the Hugging Face tokenizer it was converted from") {
  // gpt2-tiny-q8_0.gguf carries GPT-2's vocabulary (tokenizer.ggml.*, copied from llama.cpp's ggml-vocab-gpt-2.gguf);
  // the gpt2-tiny fixture directory has GPT-2's vocab.json + merges.txt (checked against tiktoken elsewhere).
  const std::string g = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/gpt2-tiny-q8_0.gguf";
  const std::string hf = vl_test::fixture("gpt2-tiny");
  if (hf.empty()) return;
  auto from_gguf = vocablens::load_tokenizer_for(g);
  auto from_hf = vocablens::load_tokenizer_for(hf);
  CHECK(from_gguf->vocab_size() == from_hf->vocab_size());
  CHECK(static_cast<int64_t>(vocablens::gguf_vocab_spec(vocablens::read_gguf(g)).tokens.size()) == from_gguf->vocab_size());
  for (const char* text : {"The Eiffel Tower is in Paris.", "  two  spaces,\ttabs\n and newlines\n\n",
                           "don't 123456 ünïcödé 日本語 🙂", "<|endoftext|> is text here"}) {
    INFO(text);
    CHECK(from_gguf->encode(text) == from_hf->encode(text));
  }
}

TEST_CASE("a GGUF without tokenizer.ggml.* metadata: one line naming the file") {
  const std::string d = vl_test::temp_dir("gguf-notok");
  // A valid GGUF v3 with no tensors and one metadata key (general.architecture = "llama").
  std::string b = "GGUF";
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    b += s;
  };
  u32(3), u64(0), u64(1);
  str("general.architecture"), u32(8), str("llama");
  vl_test::write_file(d + "/m.gguf", b);
  try {
    (void)vocablens::load_tokenizer(d + "/m.gguf");
    FAIL("expected a FormatError");
  } catch (const vocablens::FormatError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(d + "/m.gguf") != std::string::npos);
    CHECK(msg.find("no tokenizer") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // load_tokenizer_for falls back to the files beside the model; none here -> the usual message.
  CHECK_THROWS_AS(vocablens::load_tokenizer_for(d + "/m.gguf"), vocablens::FormatError);
}

TEST_CASE("CLI: lens on a GGUF needs no side tokenizer; inspect shows family, shapes and per-type counts") {
  const std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  const std::string data = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf";
  const std::string out = vl_test::temp_dir("gguf-lens");
  std::string log;
  // stories260K-f32.gguf has no tokenizer file beside it in tests/data/gguf: the ids come from its metadata.
  int rc = vl_test::run_command("'" + cli + "' lens '" + data +
                                    "/stories260K-f32.gguf' --prompt 'Once upon a time' --top-k 3 --out '" + out + "/lens' 2>&1",
                                log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(vl_test::read_file(out + "/lens/logit_lens.json").find("logit_lens") != std::string::npos);
  rc = vl_test::run_command("'" + cli + "' inspect '" + data + "/llamak-q4_k_m.gguf' 2>&1", log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("family llama") != std::string::npos);
  CHECK(log.find("Q4_K") != std::string::npos);
  CHECK(log.find("layers") != std::string::npos);
  CHECK(log.find("d_model") != std::string::npos);
  // `vocablens tokenize model.gguf TEXT` (no side tokenizer) on llama.cpp's Llama SentencePiece vocabulary: the ids
  // of its test vector " Hello world" (ggml-vocab-llama-spm.gguf.out, written by Hugging Face's tokenizers).
  const std::string spm = llama_models_dir() + "/ggml-vocab-llama-spm.gguf";
  rc = vl_test::run_command("'" + cli + "' tokenize '" + spm + "' ' Hello world' --no-bos 2>&1", log);
  INFO(log);
  REQUIRE(rc == 0);
  CHECK(log.find("ids: [29871, 15043, 3186]") != std::string::npos);
}
