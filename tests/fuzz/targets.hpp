// tests/fuzz/targets.hpp — what each libFuzzer harness does with one input, shared by the harnesses
// (tests/fuzz/fuzz_<name>.cpp, one LLVMFuzzerTestOneInput each) and by the regression test
// (tests/fuzz_regression_test.cpp), which replays tests/fuzz/regressions/<name>/* through exactly this
// code in the normal and the sanitizer builds.
//
// Contract checked on every input: the parser either accepts it or throws a vocablens::Error (whose
// what() is one line). Any other exception escapes to libFuzzer (reported as a crash), as does a
// sanitizer report, a leak, a timeout or an abort() from a broken property.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/stat.h>
#include <string>

#include "fuzz_common.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/notebook.hpp"
#include "vocablens/text_inputs.hpp"
#include "vocablens/report.hpp"
#include "vocablens/sentencepiece_tokenizer.hpp"
#include "vocablens/tokenizer.hpp"
#ifdef VOCABLENS_FUZZ_WITH_TORCH
#include <ATen/ATen.h>

#include "vocablens/gguf.hpp"
#include "vocablens/vocab_spec.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/transcoders.hpp"
#endif

namespace fuzz {

/// An Error's message must be one line (the CLI prints it as is).
inline void check_one_line(const vocablens::Error& e) {
  if (std::strchr(e.what(), '\n') != nullptr) std::abort();
}

/// config.json text -> parse_hf_config.
inline int config(const uint8_t* data, size_t size) {
  try {
    (void)vocablens::parse_hf_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// Arbitrary text through a GPT-2 BPE tokenizer: decode(encode(x)) == x, with and without specials.
inline int bpe_encode(const vocablens::Tokenizer& tok, const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (tok.decode(tok.encode(text)) != text) std::abort();
  vocablens::EncodeOptions special;
  special.special_tokens = true;
  if (tok.decode(tok.encode(text, special)) != text) std::abort();
  for (auto id : tok.encode(text)) (void)tok.display(id);
  return 0;
}

/// GPT-2 BPE vocabulary files. Byte 0 selects the reader (even: vocab.json + merges.txt, odd:
/// tokenizer.json); for the pair, bytes 1..4 give the length of the vocab.json part (mod the rest) and
/// merges.txt is what follows. Then encode/decode a fixed text with whatever was accepted.
inline int bpe_files(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  static const std::string vocab = scratch_path("bpe") + "-vocab.json";
  static const std::string merges = scratch_path("bpe") + "-merges.txt";
  static const std::string tokjson = scratch_path("bpe") + "-tokenizer.json";
  const bool hf = data[0] & 1;
  uint32_t n;
  std::memcpy(&n, data + 1, 4);
  const uint8_t* rest = data + 5;
  const size_t left = size - 5;
  try {
    std::unique_ptr<vocablens::BpeTokenizer> tok;
    if (hf) {
      write_input(tokjson, rest, left);
      tok = vocablens::BpeTokenizer::from_tokenizer_json(tokjson);
    } else {
      n = static_cast<uint32_t>(n % (left + 1));
      write_input(vocab, rest, n);
      write_input(merges, rest + n, left - n);
      tok = vocablens::BpeTokenizer::from_vocab_merges(vocab, merges);
    }
    // The merge table, the specials and the long-word path (> 128 bytes) with a fixed text.
    static const std::string text = std::string("Hello, world! <|endoftext|> caf\xc3\xa9 \xff\xfe 123 ") + std::string(300, 'a');
    vocablens::EncodeOptions special;
    special.special_tokens = true;
    for (const auto& opts : {vocablens::EncodeOptions{}, special}) {
      auto ids = tok->encode(text, opts);
      (void)tok->decode(ids);
      for (auto id : ids) (void)tok->display(id);
    }
    for (int64_t id = 0; id < tok->vocab_size() && id < 512; ++id) {
      (void)tok->display(id);
      (void)tok->piece(id);
    }
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// llama2.c tokenizer file + text: the first 4 bytes are the text length (mod the rest), the text follows,
/// the tokenizer file is the rest. Encode, decode and display with whatever was accepted.
inline int llama2c_tokenizer(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t n;
  std::memcpy(&n, data, 4);
  n = static_cast<uint32_t>(n % (size - 3));
  std::string text(reinterpret_cast<const char*>(data) + 4, n);
  static const std::string path = scratch_path("tok") + ".bin";
  write_input(path, data + 4 + n, size - 4 - n);
  try {
    auto tok = vocablens::load_tokenizer(path);
    auto ids = tok->encode(text);
    (void)tok->decode(ids);
    for (auto id : ids) (void)tok->display(id);
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// A run directory as `vocablens report DIR` reads it. Bytes 0..1 and 2..3 (little-endian, each mod what is
/// left) are the lengths of r.json and a.npy; t.csv is the rest. read_run_directory, then the HTML report
/// and the notebook of whatever was accepted (the renderers see every shape and value a file can hold).
inline int results(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  static const std::string dir = [] {
    std::string d = scratch_path("results");
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  size_t left = size - 4;
  const size_t n_json = (data[0] | (data[1] << 8)) % (left + 1);
  left -= n_json;
  const size_t n_npy = (data[2] | (data[3] << 8)) % (left + 1);
  left -= n_npy;
  write_input(dir + "/r.json", data + 4, n_json);
  write_input(dir + "/a.npy", data + 4 + n_json, n_npy);
  write_input(dir + "/t.csv", data + 4 + n_json + n_npy, left);
  try {
    auto results = vocablens::read_run_directory(dir);
    (void)vocablens::render_report_html(results);
    (void)vocablens::render_notebook(results);
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// A serialized SentencePiece ModelProto (tokenizer.model) through libsentencepiece: the charsmap check
/// (spm_charsmap.hpp) first, then, for what it accepts, encode every byte value and decode the ids. A
/// charsmap the check lets through and the normaliser reads outside of is an ASan report here.
inline int spm_model(const uint8_t* data, size_t size) {
  std::string text = "hello world \xEF\xBC\xA1\xEF\xBC\xA2 \xEF\xAC\x81 \xC2\xBD \xE3\x80\x80x";
  for (int c = 1; c < 256; ++c) text += static_cast<char>(c);
  try {
    auto tok = vocablens::SentencePieceTokenizer::from_serialized(std::string(reinterpret_cast<const char*>(data), size),
                                                                  "fuzz/tokenizer.model", true, false);
    auto ids = tok->encode(text);
    (void)tok->decode(ids);
    for (auto id : ids) (void)tok->display(id);
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// A run directory with two arrays changed at once (shapes that disagree with each other and with the
/// kind's declared shapes): [u16 json len][u16 npy len][r.json][a.npy][b.npy = the rest], then report and
/// notebook of what read_run_directory accepts.
inline int results_multi(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  static const std::string dir = [] {
    std::string d = scratch_path("results-multi");
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  size_t left = size - 4;
  const size_t n_json = (data[0] | (data[1] << 8)) % (left + 1);
  left -= n_json;
  const size_t n_a = (data[2] | (data[3] << 8)) % (left + 1);
  left -= n_a;
  write_input(dir + "/r.json", data + 4, n_json);
  write_input(dir + "/a.npy", data + 4 + n_json, n_a);
  write_input(dir + "/b.npy", data + 4 + n_json + n_a, left);
  try {
    auto results = vocablens::read_run_directory(dir);
    (void)vocablens::render_report_html(results);
    (void)vocablens::render_notebook(results);
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// The text files of `lens --prompts` and `lens --corpus` / `tuned-lens eval --corpus`. Byte 0 even: the rest is a
/// prompts file for read_lens_prompts (plain or JSON Lines); every prompt it accepts is non-empty, on a line after
/// the one before, and is tokenised. Byte 0 odd: the rest after byte 1 is a corpus read by for_each_corpus_chunk in
/// reads of 16 + byte 1 bytes; the pieces must concatenate to the file exactly, the bytes read must grow to its
/// size, and each piece goes through the GPT-2 tokenizer (decode(encode(piece)) == piece).
inline int prompts_corpus(const vocablens::Tokenizer& tok, const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const std::string path = scratch_path("prompts-corpus") + ".txt";
  if ((data[0] & 1) == 0) {
    write_input(path, data + 1, size - 1);
    try {
      int64_t last_line = 0;
      for (const auto& p : vocablens::read_lens_prompts(path)) {
        if (p.prompt.empty() || p.line <= last_line || p.line > static_cast<int64_t>(size)) std::abort();
        last_line = p.line;
        (void)tok.encode(p.prompt);
        if (!p.target.empty()) (void)tok.encode(p.target);
      }
    } catch (const vocablens::Error& e) { check_one_line(e); }
    return 0;
  }
  const size_t chunk = 16 + data[1];
  write_input(path, data + 2, size - 2);
  const std::string file(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string joined;
  uint64_t last_read = 0;
  bool ended = false;
  try {
    vocablens::for_each_corpus_chunk(path, chunk, [&](const std::string& text, uint64_t read, bool last) {
      if (ended || read < last_read || read > file.size()) std::abort();
      last_read = read;
      ended = last;
      joined += text;
      if (tok.decode(tok.encode(text)) != text) std::abort();
      return true;
    });
  } catch (const vocablens::Error& e) {
    check_one_line(e);
    return 0;
  }
  if (!ended || joined != file || last_read != file.size()) std::abort();
  return 0;
}

#ifdef VOCABLENS_FUZZ_WITH_TORCH
/// Touch every tensor: a view that points outside the mapping would fault here under ASan.
inline void touch(const vocablens::TensorStore& st) {
  for (auto& [name, t] : st.tensors)
    if (t.numel() > 0 && t.is_floating_point()) (void)t.sum().item<double>();
}

/// The safetensors header/offset parser (read_safetensors) on arbitrary bytes.
inline int safetensors(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("st") + ".safetensors";
  write_input(path, data, size);
  try {
    touch(vocablens::read_safetensors(path));
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// Dequantizes the first row of every tensor whose type vocablens can decode (the block decoders on
/// whatever bytes the file holds).
inline void dequantize_first_rows(const vocablens::GgufFile& g) {
  std::vector<float> row;
  for (const auto& t : g.tensors) {
    if (!vocablens::ggml_can_dequantize(t.type) || t.numel() == 0) continue;
    row.resize(static_cast<size_t>(t.ne[0]));
    vocablens::dequantize_row(t.type, g.tensor_data(t), row.data(), t.ne[0]);
  }
}

/// The GGUF reader, dequantization of each tensor's first row, and load_model (GGUF -> Model) plus a
/// one-token forward on whatever loads.
inline int gguf(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("gguf") + ".gguf";
  write_input(path, data, size);
  try {
    auto g = vocablens::read_gguf(path);
    dequantize_first_rows(g);
    auto m = vocablens::load_model(path);
    (void)m.forward(at::zeros({1, 1}, at::kLong));
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

}  // namespace fuzz
namespace vocablens {
ModelConfig gguf_model_config(const GgufFile& g);  // src/model/gguf_model.hpp (internal header, not on this path)
}  // namespace vocablens
namespace fuzz {

/// The GGUF reader only: read_gguf, the first row of every decodable tensor, gguf_vocab_spec and
/// gguf_model_config (metadata -> ModelConfig), without loading weights (fuzz_gguf_reader).
inline int gguf_reader(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("ggufr") + ".gguf";
  write_input(path, data, size);
  try {
    auto g = vocablens::read_gguf(path);
    dequantize_first_rows(g);
    try {
      (void)vocablens::gguf_vocab_spec(g);
    } catch (const vocablens::Error& e) { check_one_line(e); }
    (void)vocablens::gguf_model_config(g);
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// The PyTorch zip + restricted pickle reader (read_torch_zip) on arbitrary bytes.
inline int torch_zip(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("zip") + ".bin";
  write_input(path, data, size);
  try {
    // Odd-sized inputs: F16/BF16 storages kept as views in their dtype (as load_model reads pytorch_model.bin).
    touch(vocablens::read_torch_zip(path, (size & 1) == 0));
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// The llama2.c checkpoint header reader (load_model on a .bin), then one forward step of what it accepted.
/// Inputs are small, so accepted headers describe tiny models.
inline int llama2c(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("l2c") + ".bin";
  write_input(path, data, size);
  try {
    auto m = vocablens::load_model(path);
    (void)m.forward(at::zeros({1, 1}, at::kLong));
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// The SAE / transcoder readers (load_sae), one layout per input, then an encode and a decode of one zero and one
/// all-ones row through what loaded. Byte 0 picks the layout, bytes 1-2 (little endian, modulo what is left) the
/// length of the JSON part; the rest is the weights file:
///   0 SAELens folder      cfg.json (JSON part) + sae_weights.safetensors
///   1 Gemma Scope v1      layer_1/width_96/average_l0_20/params.npz (the JSON part unused)
///   2 Gemma Scope v2      resid_post/layer_2_width_96_l0_medium/params.safetensors
///   3 Llama Scope folder  hyperparams.json (JSON part) + checkpoints/final.safetensors
///   4 circuit-tracer      layer_1.safetensors
/// Whatever loads must have the shapes its header promises and encode/decode without a crash; a non-finite
/// output from finite weights is allowed (large weights overflow float32) but a loaded non-finite weight is not.
inline int sae(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  static const std::string root = [] {
    std::string d = scratch_path("sae");
    for (const char* sub :
         {"", "/saelens", "/gs1", "/gs1/layer_1", "/gs1/layer_1/width_96", "/gs1/layer_1/width_96/average_l0_20", "/gs2",
          "/gs2/resid_post", "/gs2/resid_post/layer_2_width_96_l0_medium", "/llamascope", "/llamascope/checkpoints", "/ct"})
      ::mkdir((d + sub).c_str(), 0700);
    return d;
  }();
  const int layout = data[0] % 5;
  size_t left = size - 3;
  const size_t n_json = static_cast<size_t>(data[1] | (data[2] << 8)) % (left + 1);
  const uint8_t* json = data + 3;
  const uint8_t* weights = json + n_json;
  const size_t n_weights = left - n_json;
  std::string path;
  switch (layout) {
    case 0:
      write_input(root + "/saelens/cfg.json", json, n_json);
      write_input(root + "/saelens/sae_weights.safetensors", weights, n_weights);
      path = root + "/saelens";
      break;
    case 1:
      path = root + "/gs1/layer_1/width_96/average_l0_20/params.npz";
      write_input(path, weights, n_weights);
      break;
    case 2:
      path = root + "/gs2/resid_post/layer_2_width_96_l0_medium/params.safetensors";
      write_input(path, weights, n_weights);
      break;
    case 3:
      write_input(root + "/llamascope/hyperparams.json", json, n_json);
      write_input(root + "/llamascope/checkpoints/final.safetensors", weights, n_weights);
      path = root + "/llamascope";
      break;
    default: path = root + "/ct/layer_1.safetensors"; write_input(path, weights, n_weights);
  }
  try {
    vocablens::Sae s = vocablens::load_sae(path);
    if (s.d_in < 1 || s.d_sae < 1 || s.d_out < 1) std::abort();
    if (s.W_enc.size(0) != s.d_in || s.W_enc.size(1) != s.d_sae) std::abort();
    if (s.W_dec.size(0) != s.d_sae || s.W_dec.size(1) != s.d_out) std::abort();
    for (const at::Tensor* t : {&s.W_enc, &s.W_dec, &s.b_enc, &s.b_dec, &s.threshold, &s.scaling_factor, &s.W_skip})
      if (t->defined() && t->numel() > 0 && !at::isfinite(t->to(at::kFloat)).all().item<bool>()) std::abort();
    at::Tensor x = at::cat({at::zeros({1, s.d_in}), at::ones({1, s.d_in})});
    at::Tensor f = s.encode(x);
    if (f.size(0) != 2 || f.size(1) != s.d_sae) std::abort();
    at::Tensor y = s.decode(f, x);
    if (y.size(0) != 2 || y.size(1) != s.d_out) std::abort();
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}

/// A small valid file of one F32 tensor per (name, shape) (values i / 7 - 1), for the transcoder harness's fixed parts.
inline std::string tiny_safetensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& ts) {
  std::string header = "{", data;
  for (const auto& [name, shape] : ts) {
    int64_t n = 1;
    std::string dims;
    for (int64_t d : shape) {
      n *= d;
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
    }
    const size_t off = data.size();
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(i % 13) / 7.0f - 1.0f;
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"F32\",\"shape\":[" + dims +
              "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t len = header.size();
  return std::string(reinterpret_cast<const char*>(&len), 8) + header + data;
}

/// The transcoder-set readers (load_transcoders): config.yaml and a cross-layer transcoder's files. Byte 0 picks
/// what the rest of the input is, beside fixed valid files of a 2-layer set (d_in = d_out = 4, 3 features):
///   0 config.yaml (the folder also holds layer_{0,1}.safetensors and W_enc_/W_dec_{0,1}.safetensors)
///   1 W_enc_1.safetensors of a cross_layer_transcoder      2 W_dec_0.safetensors of one
///   3 layer_1.safetensors of a transcoder_set
/// Whatever loads must have its promised shapes, encode and decode one row without a crash, and hold no
/// non-finite value in what it reads; anything else must be one Error line.
inline int transcoders(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const std::string root = [] {
    const std::string d = scratch_path("transcoders");
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  auto put = [](const std::string& path, const std::string& bytes) {
    write_input(path, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  };
  const std::string clt_cfg =
      "model_kind: cross_layer_transcoder\nfeature_input_hook: hook_resid_mid\n"
      "feature_output_hook: hook_mlp_out\n";
  const std::string plt_cfg =
      "model_kind: transcoder_set\nfeature_input_hook: ln2.hook_normalized\n"
      "feature_output_hook: mlp.hook_out\n";
  for (int i = 0; i < 2; ++i) {
    const std::string I = std::to_string(i);
    put(root + "/W_enc_" + I + ".safetensors",
        tiny_safetensors({{"W_enc_" + I, {3, 4}}, {"b_enc_" + I, {3}}, {"b_dec_" + I, {4}}, {"threshold_" + I, {3}}}));
    put(root + "/W_dec_" + I + ".safetensors", tiny_safetensors({{"W_dec_" + I, {3, 2 - i, 4}}}));
    put(root + "/layer_" + I + ".safetensors",
        tiny_safetensors({{"W_enc", {3, 4}}, {"W_dec", {3, 4}}, {"b_enc", {3}}, {"b_dec", {4}}}));
  }
  const int which = data[0] % 4;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const char* files[] = {"config.yaml", "W_enc_1.safetensors", "W_dec_0.safetensors", "layer_1.safetensors"};
  put(root + "/config.yaml", which == 3 ? plt_cfg : clt_cfg);
  put(root + "/" + files[which], rest);
  try {
    const vocablens::TranscoderSet set = vocablens::load_transcoders(root);
    if (set.n_layers < 1 || set.d_in < 1 || set.d_transcoder < 1 || set.d_out < 1) std::abort();
    std::vector<at::Tensor> f;
    for (int64_t l = 0; l < set.n_layers; ++l) {
      f.push_back(set.encode(l, at::ones({1, set.d_in})));
      if (f.back().size(1) != set.d_transcoder) std::abort();
      if (set.decoder_rows(l, 0).size(0) != set.n_outputs(l)) std::abort();
    }
    const at::Tensor y = set.decode(set.n_layers - 1, f, at::ones({1, set.d_in}));
    if (y.size(1) != set.d_out) std::abort();
  } catch (const vocablens::Error& e) { check_one_line(e); }
  return 0;
}
#endif

}  // namespace fuzz
