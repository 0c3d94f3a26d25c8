// The embedding-only models of `vocablens train`: EmbedLM (z = E[x] W + b) and word2vec (skip-gram /
// CBOW with negative sampling), and their readers.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "train/safetensors_writer.hpp"
#include "train/trainer.hpp"
#include "util/json_depth.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tensor_store.hpp"
#include "util/regular_file.hpp"

namespace vocablens {

at::Tensor EmbedLM::hidden(const at::Tensor& ids) const {
  return E.index_select(0, ids.reshape({-1}).to(at::kLong)).view([&] {
    auto s = ids.sizes().vec();
    s.push_back(E.size(1));
    return s;
  }());
}

at::Tensor EmbedLM::logits(const at::Tensor& ids) const {
  at::Tensor h = hidden(ids);
  at::Tensor z = at::matmul(h, W);
  return b.defined() ? z + b : z;
}

namespace {

nlohmann::json read_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ostringstream ss;
  ss << detail::read_regular_file(path, detail::kMaxSmallJsonBytes, "config files");  // not /dev/zero, not a FIFO
  detail::check_json_depth(ss.str(), path);  // a downloaded model directory is untrusted input too
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) { throw FormatError(path, std::string("malformed JSON: ") + e.what()); }
}

std::string model_type(const nlohmann::json& j) {
  return j.is_object() && j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
}

at::Tensor expect(const TensorStore& st, const std::string& name, std::vector<int64_t> shape) {
  const at::Tensor& t = st.get(name);
  if (t.sizes() != at::IntArrayRef(shape) || t.scalar_type() != at::kFloat)
    throw FormatError(st.source, "tensor '" + name + "' has an unexpected shape or dtype");
  return t;
}

}  // namespace

// The EmbedLM's embedding and unembedding carry GPT-2's names (from the architecture table, no base prefix).
static std::string embed_name() { return hf_tensor_name(architecture("gpt2"), TensorRole::TokenEmbd, -1, ".weight", false); }
static std::string head_name() { return hf_tensor_name(architecture("gpt2"), TensorRole::Output, -1, ".weight", false); }
static std::string head_bias_name() { return hf_tensor_name(architecture("gpt2"), TensorRole::Output, -1, ".bias", false); }

EmbedLM load_embed_lm(const std::string& dir) {
  nlohmann::json j = read_config(dir);
  if (model_type(j) != "vocablens-embed-lm")
    throw FormatError(dir + "/config.json", "not an EmbedLM directory (model_type is not \"vocablens-embed-lm\")");
  const int64_t V = j.value("vocab_size", int64_t(0)), d = j.value("n_embd", int64_t(0));
  TensorStore st = read_safetensors(dir + "/model.safetensors");
  EmbedLM m;
  m.tied = j.value("tie_word_embeddings", true);
  m.E = expect(st, embed_name(), {V, d});
  m.W = m.tied ? m.E.t() : expect(st, head_name(), {V, d}).t();
  m.b = expect(st, head_bias_name(), {V});
  return m;
}

WordVectors load_word_vectors(const std::string& dir) {
  nlohmann::json j = read_config(dir);
  std::string mt = model_type(j);
  if (mt != "vocablens-skipgram" && mt != "vocablens-cbow" && mt != "vocablens-glove")
    throw FormatError(dir + "/config.json",
                      "not a word-vector directory (model_type is not vocablens-skipgram / vocablens-cbow / vocablens-glove)");
  const int64_t V = j.value("vocab_size", int64_t(0)), d = j.value("n_embd", int64_t(0));
  TensorStore st = read_safetensors(dir + "/embeddings.safetensors");
  WordVectors w;
  w.kind = mt.substr(10);
  w.vectors = expect(st, "embeddings", {V, d});
  w.context = expect(st, "context_embeddings", {V, d});
  return w;
}

bool is_embedding_directory(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec) || !std::filesystem::exists(path + "/config.json", ec)) return false;
  try {
    const std::string t = model_type(read_config(path));
    return t == "vocablens-embed-lm" || t == "vocablens-skipgram" || t == "vocablens-cbow" || t == "vocablens-glove";
  } catch (const std::exception&) { return false; }
}

at::Tensor load_embedding_matrix(const std::string& dir, const std::string& which) {
  if (which != "W_E" && which != "W_U") throw UsageError("matrix '" + which + "' of an embedding model: W_E or W_U");
  if (model_type(read_config(dir)) == "vocablens-embed-lm") {
    EmbedLM m = load_embed_lm(dir);
    return (which == "W_E" ? m.E : m.W.t()).contiguous();
  }
  WordVectors w = load_word_vectors(dir);
  return (which == "W_E" ? w.vectors : w.context).contiguous();
}

namespace train_detail {
namespace {

class EmbedLMTrainable final : public Trainable {
 public:
  EmbedLMTrainable(const TrainOptions& o, const TokenStream& s, int64_t vocab) : o_(o), s_(s), V_(vocab) {
    if (o.d_model < 1) throw UsageError("d_model must be positive");
    std::mt19937_64 rng(o.seed);
    params[embed_name()] = normal_tensor({V_, o.d_model}, 0.02, rng).requires_grad_(true);
    if (!o.tied) params[head_name()] = normal_tensor({V_, o.d_model}, 0.02, rng).requires_grad_(true);
    params[head_bias_name()] = at::zeros({V_}, at::TensorOptions().dtype(at::kFloat)).requires_grad_(true);
    starts_ = window_starts(s, o.n_ctx);
  }

  EmbedLM model() const {
    EmbedLM m;
    m.tied = o_.tied;
    m.E = params.at(embed_name());
    m.W = o_.tied ? m.E.t() : params.at(head_name()).t();
    m.b = params.at(head_bias_name());
    return m;
  }

  at::Tensor loss(std::mt19937_64& rng) override {
    at::Tensor in, tg;
    do sample_windows(s_, starts_, o_.batch_size, o_.n_ctx, rng, in, tg);
    while (!(tg != -100).any().item<bool>());
    at::Tensor z = model().logits(in);
    return at::cross_entropy_loss(z.reshape({-1, V_}), tg.reshape({-1}), {}, at::Reduction::Mean, -100);
  }

  void write(const std::string& dir) const override {
    nlohmann::ordered_json j;
    j["architectures"] = {"VocablensEmbedLM"};
    j["model_type"] = "vocablens-embed-lm";
    j["vocab_size"] = V_;
    j["n_embd"] = o_.d_model;
    j["tie_word_embeddings"] = o_.tied;
    j["torch_dtype"] = "float32";
    j["vocablens_trained"] = {{"model", "embed-lm"}, {"seed", o_.seed}, {"definition", "z = E[x] W + b, W = E^T when tied"}};
    write_file_atomic(dir + "/config.json", j.dump(2) + "\n");
    write_safetensors(dir + "/model.safetensors", params, {{"format", "pt"}});
  }

 private:
  const TrainOptions& o_;
  const TokenStream& s_;
  int64_t V_;
  std::vector<int64_t> starts_;
};

// word2vec: pairs are drawn from within one line; the newline token is never a centre or a context.
class Word2VecTrainable final : public Trainable {
 public:
  Word2VecTrainable(const TrainOptions& o, const TokenStream& s, int64_t vocab) : o_(o), s_(s), V_(vocab) {
    if (o.d_model < 1) throw UsageError("d_model must be positive");
    if (o.window < 1) throw UsageError("--window must be >= 1");
    if (o.negatives < 1) throw UsageError("--negatives must be >= 1");
    std::mt19937_64 rng(o.seed);
    // word2vec's initialisation: input vectors U(-0.5/d, 0.5/d), output vectors zero.
    params["embeddings"] = uniform_tensor({V_, o.d_model}, 0.5 / static_cast<double>(o.d_model), rng).requires_grad_(true);
    params["context_embeddings"] = at::zeros({V_, o.d_model}, at::TensorOptions().dtype(at::kFloat)).requires_grad_(true);
    // Lines with at least two content tokens, token -> line, unigram counts.
    std::vector<double> count(static_cast<size_t>(V_), 0.0);
    double total = 0;
    for (size_t l = 0; l < s.line_starts.size(); ++l) {
      const int64_t a = s.line_starts[l], b = s.line_ends[l];
      for (int64_t i = a; i < b; ++i) {
        count[static_cast<size_t>(s.ids[static_cast<size_t>(i)])] += 1;
        total += 1;
      }
      if (b - a >= 2) lines_.push_back(l);
    }
    if (lines_.empty()) throw UsageError("word2vec: the corpus has no line with two tokens");
    // Subsampling keep probability (word2vec's formula) and the unigram^0.75 negative table.
    keep_.assign(static_cast<size_t>(V_), 1.0);
    if (o.subsample > 0)
      for (size_t v = 0; v < count.size(); ++v)
        if (count[v] > 0) {
          const double f = count[v] / total, r = o.subsample / f;
          keep_[v] = std::min(1.0, std::sqrt(r) + r);
        }
    double acc = 0;
    cdf_.resize(count.size());
    for (size_t v = 0; v < count.size(); ++v) cdf_[v] = acc += std::pow(count[v], 0.75);
    for (auto& c : cdf_) c /= acc;
  }

  int64_t negative(std::mt19937_64& rng) const {
    const double u = uniform01(rng);
    auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
    if (it == cdf_.end()) --it;
    return static_cast<int64_t>(it - cdf_.begin());
  }

  // A centre position (subsampled) and its line's content range.
  void centre(std::mt19937_64& rng, int64_t& pos, int64_t& a, int64_t& b) const {
    for (;;) {
      const size_t l = lines_[below(rng, lines_.size())];
      a = s_.line_starts[l];
      b = s_.line_ends[l];
      pos = a + static_cast<int64_t>(below(rng, static_cast<uint64_t>(b - a)));
      if (uniform01(rng) < keep_[static_cast<size_t>(s_.ids[static_cast<size_t>(pos)])]) return;
    }
  }

  at::Tensor loss(std::mt19937_64& rng) override {
    const int64_t B = o_.batch_size, K = o_.negatives, W = o_.window;
    const bool cbow = o_.model == TrainModel::CBOW;
    const int64_t C = cbow ? 2 * W : 1;
    at::Tensor ctx = at::zeros({B, C}, at::TensorOptions().dtype(at::kLong));
    at::Tensor cmask = at::zeros({B, C}, at::TensorOptions().dtype(at::kFloat));
    at::Tensor tgt = at::empty({B}, at::TensorOptions().dtype(at::kLong));
    at::Tensor neg = at::empty({B, K}, at::TensorOptions().dtype(at::kLong));
    int64_t* pc = ctx.data_ptr<int64_t>();
    float* pm = cmask.data_ptr<float>();
    int64_t* pt = tgt.data_ptr<int64_t>();
    int64_t* pn = neg.data_ptr<int64_t>();
    for (int64_t i = 0; i < B; ++i) {
      int64_t pos, a, b;
      for (;;) {
        centre(rng, pos, a, b);
        const int64_t r = 1 + static_cast<int64_t>(below(rng, static_cast<uint64_t>(W)));
        if (cbow) {
          // Context: every token within radius r on the centre's line; target: the centre.
          int64_t n = 0;
          for (int64_t j = std::max(a, pos - r); j < std::min(b, pos + r + 1); ++j)
            if (j != pos) {
              pc[i * C + n] = s_.ids[static_cast<size_t>(j)];
              pm[i * C + n] = 1.0f;
              ++n;
            }
          if (n == 0) continue;
          pt[i] = s_.ids[static_cast<size_t>(pos)];
        } else {
          // One context token at offset ±1..r on the same line; "input" = centre, target = context.
          int64_t off = 1 + static_cast<int64_t>(below(rng, static_cast<uint64_t>(r)));
          if (below(rng, 2)) off = -off;
          const int64_t j = pos + off;
          if (j < a || j >= b) continue;
          pc[i * C] = s_.ids[static_cast<size_t>(pos)];
          pm[i * C] = 1.0f;
          pt[i] = s_.ids[static_cast<size_t>(j)];
        }
        break;
      }
      for (int64_t k = 0; k < K; ++k) pn[i * K + k] = negative(rng);
    }
    const at::Tensor& Win = params.at("embeddings");
    const at::Tensor& Wout = params.at("context_embeddings");
    const int64_t d = Win.size(1);
    at::Tensor h = (Win.index_select(0, ctx.view(-1)).view({B, C, d}) * cmask.unsqueeze(2)).sum(1) /
                   cmask.sum(1, true).clamp_min(1.0);               // [B, d]
    at::Tensor pos_score = (h * Wout.index_select(0, tgt)).sum(1);  // [B]
    at::Tensor neg_score = at::bmm(Wout.index_select(0, neg.view(-1)).view({B, K, d}), h.unsqueeze(2)).squeeze(2);
    return -(at::log_sigmoid(pos_score) + at::log_sigmoid(-neg_score).sum(1)).mean();
  }

  void write(const std::string& dir) const override {
    nlohmann::ordered_json j;
    const bool cbow = o_.model == TrainModel::CBOW;
    j["architectures"] = {cbow ? "VocablensCBOW" : "VocablensSkipGram"};
    j["model_type"] = cbow ? "vocablens-cbow" : "vocablens-skipgram";
    j["vocab_size"] = V_;
    j["n_embd"] = o_.d_model;
    j["window"] = o_.window;
    j["negatives"] = o_.negatives;
    j["subsample"] = o_.subsample;
    j["torch_dtype"] = "float32";
    j["vocablens_trained"] = {{"model", to_string(o_.model)}, {"seed", o_.seed}};
    write_file_atomic(dir + "/config.json", j.dump(2) + "\n");
    write_safetensors(dir + "/embeddings.safetensors", params, {{"format", "pt"}});
    at::Tensor E = params.at("embeddings").detach().contiguous();
    write_npy(dir + "/embeddings.npy", NdArray::f32({E.size(0), E.size(1)}, E.data_ptr<float>()));
  }

 private:
  const TrainOptions& o_;
  const TokenStream& s_;
  int64_t V_;
  std::vector<size_t> lines_;
  std::vector<double> keep_, cdf_;
};

}  // namespace

std::unique_ptr<Trainable> make_embed_lm(const TrainOptions& o, const TokenStream& s, int64_t vocab) {
  return std::make_unique<EmbedLMTrainable>(o, s, vocab);
}
std::unique_ptr<Trainable> make_word2vec(const TrainOptions& o, const TokenStream& s, int64_t vocab) {
  return std::make_unique<Word2VecTrainable>(o, s, vocab);
}

}  // namespace train_detail
}  // namespace vocablens
