// Attribution graphs: the transcoders as the engine reads them (vocablens/graph.hpp, GraphTranscoders) —
// a TranscoderSet of either kind, the points it may read and write, the checks against the model, and the
// folder reader every surface calls (load_graph_transcoders).
#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <utility>
#include <optional>

#include <fmt/format.h>

#include "graph_internal.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/transcoders.hpp"
#include "vocablens/weight.hpp"

namespace vocablens {
namespace graph_engine {

// Both kinds through one class: a per-layer feature writes its own layer's MLP output, a CLT feature of layer
// src writes every layer from src on (its W_dec_src [d_tc, L - src, d] holds one row per layer written).
class SetTranscoders : public GraphTranscoders {
 public:
  SetTranscoders(TranscoderSet s, GraphInput in, uint64_t serial = 0) : set_(std::move(s)), in_(in), serial_(serial) {}
  uint64_t serial() const { return serial_; }
  GraphInput input() const override { return in_; }
  int64_t n_layers() const override { return set_.n_layers; }
  int64_t n_features(int64_t l) const override { return set_.layers[static_cast<size_t>(l)].d_sae; }
  at::Tensor encode(int64_t l, const at::Tensor& x) const override { return set_.encode(l, x).to(at::kFloat); }
  at::Tensor encoder_rows(int64_t l, const at::Tensor& f) const override {
    // the rows asked for, selected before the upcast: the encoder is a view of its mapped file. Stored
    // [d_transcoder, d_in] (circuit-tracer's layout, a CLT's), W_enc [d_in, d_transcoder] is a transposed
    // view whose columns are the file's rows: taken as rows, only their pages are read (index_select along
    // dim 1 of the view would first copy the whole matrix)
    const at::Tensor& W = set_.layer(l).W_enc;
    if (!is_packed_weight(W) && W.t().is_contiguous()) return f32(W.t().index_select(0, f)).contiguous();
    return (is_packed_weight(W) ? f32(W).index_select(1, f) : f32(W.index_select(1, f))).t().contiguous();
  }
  bool writes(int64_t src, int64_t out) const override { return clt() ? out >= src : src == out; }
  at::Tensor decoder_rows(int64_t src, int64_t out, const at::Tensor& f) const override {
    if (clt()) {
      at::Tensor rows = f32(set_.clt_decoders[static_cast<size_t>(src)].index_select(0, f).select(1, out - src));
      // a large CLT is checked for NaN/Inf as its parts are read (load_transcoders checked a small one whole)
      if (set_.encoder_checked && !all_finite(rows))
        throw FormatError(set_.decoder_files[static_cast<size_t>(src)],
                          fmt::format("decoder rows of layer {} features into block {} have NaN or infinite values", src, out));
      return rows.contiguous();
    }
    const Sae& s = set_.layers[static_cast<size_t>(src)];
    // the rows first, then the upcast (a BF16 decoder is never upcast whole)
    at::Tensor rows = is_packed_weight(s.W_dec) ? f32(s.W_dec).index_select(0, f) : f32(s.W_dec.index_select(0, f));
    if (s.scaling_factor.defined()) rows = rows * f32(s.scaling_factor).index_select(0, f).unsqueeze(1);
    return rows.contiguous();
  }
  at::Tensor output(int64_t out, const std::vector<at::Tensor>& mlp_in, const std::vector<at::Tensor>& features) const override {
    const at::Tensor& x = mlp_in[static_cast<size_t>(out)];
    if (clt() || is_packed_weight(set_.layers[static_cast<size_t>(out)].W_dec))
      return set_.decode(out, features, x).to(at::kFloat);
    // A per-layer set: only the features active somewhere in the prompt write anything (a few thousand of
    // 24 576 on GPT-2 small), so the layer decodes as an SAE of those alone (Sae::decode: biases, scaling,
    // skip as before) — a quarter of the product, and only their decoder rows are read.
    const at::Tensor& f = features[static_cast<size_t>(out)];
    const at::Tensor on = f.ne(0).any(0).nonzero().squeeze(1);
    Sae part = set_.layer(out);
    part.W_dec = part.W_dec.index_select(0, on);
    if (part.scaling_factor.defined()) part.scaling_factor = part.scaling_factor.index_select(0, on);
    part.d_sae = on.size(0);
    return part.decode(f.index_select(1, on), x).to(at::kFloat);
  }
  at::Tensor skip(int64_t l) const override { return f32(set_.layers[static_cast<size_t>(l)].W_skip); }
  std::string source() const override { return set_.source; }
  void release(int64_t l) const override { set_.release_pages(l); }
  int64_t resident_bytes() const override {
    int64_t most = 0;
    if (!clt())
      for (const Sae& s : set_.layers) {
        int64_t n = 0;
        for (const at::Tensor* t : {&s.W_enc, &s.W_dec, &s.W_skip, &s.b_enc, &s.b_dec, &s.threshold})
          if (t->defined()) n += static_cast<int64_t>(t->nbytes());
        most = std::max(most, n);
      }
    return most;
  }

 private:
  bool clt() const { return set_.kind == TranscoderKind::CrossLayer; }
  TranscoderSet set_;
  GraphInput in_;
  uint64_t serial_ = 0;  ///< which read of a folder this is (load_set); 0: built from given SAEs
};

// The points a transcoder may read (vocablens/graph.hpp, GraphInput), by their name within a block.
std::optional<GraphInput> input_of_point(const std::string& point) {
  if (point.empty() || point == "mlp.hook_in") return GraphInput::MlpIn;
  if (point == "ln2.hook_normalized") return GraphInput::Ln2Normalized;
  if (point == "hook_resid_mid") return GraphInput::ResidMid;
  return std::nullopt;
}
// The same for a transcoder's full hook name at layer l (empty: the MLP's input).
std::optional<GraphInput> input_of_hook(const std::string& hook, int64_t l) {
  const std::string b = "blocks." + std::to_string(l) + ".";
  if (hook.empty()) return GraphInput::MlpIn;
  if (hook.rfind(b, 0) != 0) return std::nullopt;
  return input_of_point(hook.substr(b.size()));
}
bool reads_mlp_input(const std::string& hook, int64_t l) { return input_of_hook(hook, l).has_value(); }

at::Tensor transcoder_input(const Model& m, int64_t l, const at::Tensor& mid, GraphInput in) {
  const ModelConfig& c = m.config();
  const LayerWeights& w = m.weights().layers[l];
  if (in == GraphInput::ResidMid) return mid;
  if (in == GraphInput::Ln2Normalized) return apply_norm(mid, c.norm, c.norm_eps, at::Tensor(), at::Tensor());
  return apply_norm(mid, c.norm, c.norm_eps, f32(w.ln2_w), f32(w.ln2_b));
}
bool writes_mlp_output(const std::string& hook, int64_t l) {
  const std::string b = "blocks." + std::to_string(l) + ".";
  return hook.empty() || hook == b + "hook_mlp_out" || hook == b + "mlp.hook_out";
}

void check_transcoder(const Sae& s, int64_t l, const Model& m) {
  const int64_t d = m.config().d_model;
  if (s.d_in != d || s.d_out != d)
    throw UsageError(
        fmt::format("{}: transcoder of layer {} reads {} and writes {} values; the model's MLP "
                    "input and output have {} (d_model)",
                    s.source, l, s.d_in, s.d_out, d));
  if (!reads_mlp_input(s.hook_name, l))
    throw UsageError(
        fmt::format("{}: transcoder of layer {} reads {}; an attribution graph needs the MLP's "
                    "input of its layer (blocks.{}.mlp.hook_in, .ln2.hook_normalized or .hook_resid_mid)",
                    s.source, l, s.hook_name, l));
  if (!writes_mlp_output(s.hook_name_out, l))
    throw UsageError(
        fmt::format("{}: transcoder of layer {} writes {}; an attribution graph needs the MLP output "
                    "of its layer (blocks.{}.hook_mlp_out)",
                    s.source, l, s.hook_name_out, l));
  if (s.normalize != SaeNormalize::None && s.normalize != SaeNormalize::ExpectedAverageOnlyIn)
    throw UsageError(
        fmt::format("{}: transcoder normalises its input ({}), so its features are not linear in it; "
                    "the replacement model needs a linear encoder",
                    s.source, to_string(s.normalize)));
  if (s.apply_b_dec_to_input && s.d_in != s.d_out)
    throw UsageError(s.source + ": apply_b_dec_to_input with different input and output widths");
}

// ---- reading a folder once for an estimate and its run ------------------------------------------------

// Every surface estimates a graph's memory (which loads the set and runs the encoders) before it runs the
// graph, and both read the folder: a large set's NaN/Inf check scans every weight (1.8 GB on the GPT-2-small
// shape). The estimate's set — views of its mappings, its pages given back — is kept for the next read of
// the same folder, handed over once (then nothing stays mapped for it), and only while the folder and every
// file it read keep their size and modification time; anything else reads the folder again.
struct FileStamp {
  std::string path;
  int64_t size = -1, mtime_ns = -1;
  bool operator==(const FileStamp& o) const { return path == o.path && size == o.size && mtime_ns == o.mtime_ns; }
};

FileStamp stamp(const std::string& path) {
  FileStamp f{path};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    f.size = static_cast<int64_t>(st.st_size);
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  return f;
}

std::vector<FileStamp> stamps(const std::string& dir, const TranscoderSet& set) {
  std::vector<FileStamp> v{stamp(dir)};
  if (!set.config_path.empty()) v.push_back(stamp(set.config_path));
  for (const auto* files : {&set.encoder_files, &set.decoder_files})
    for (const std::string& f : *files) v.push_back(stamp(f));
  return v;
}

// The set and the serial number of its read (1, 2, ...: a set handed over keeps its number).
std::pair<TranscoderSet, uint64_t> load_set(const std::string& dir, const TranscoderLoadOptions& lo, bool keep_for_next) {
  struct Kept {
    std::string dir;
    std::vector<FileStamp> files;
    TranscoderSet set;
    uint64_t serial = 0;
  };
  static std::atomic<uint64_t> reads{0};
  static std::mutex mu;
  static Kept* kept = new Kept;  // never destroyed: a set left in it unmaps at exit, after every other static
  {
    std::lock_guard<std::mutex> lock(mu);
    Kept k = std::move(*kept);
    *kept = Kept{};
    if (k.dir == dir && !k.files.empty() && stamps(dir, k.set) == k.files) return {std::move(k.set), k.serial};
  }
  TranscoderSet set = load_transcoders(dir, lo);
  const uint64_t serial = ++reads;
  if (keep_for_next) {
    std::vector<FileStamp> files = stamps(dir, set);
    std::lock_guard<std::mutex> lock(mu);
    *kept = Kept{dir, std::move(files), set, serial};
  }
  return {std::move(set), serial};
}

uint64_t transcoders_serial(const GraphTranscoders& tcs) {
  const auto* s = dynamic_cast<const SetTranscoders*>(&tcs);
  return s ? s->serial() : 0;
}

}  // namespace graph_engine

std::unique_ptr<GraphTranscoders> per_layer_transcoders(std::vector<Sae> saes, const Model& model) {
  for (size_t l = 0; l < saes.size(); ++l) graph_engine::check_transcoder(saes[l], static_cast<int64_t>(l), model);
  TranscoderSet set;
  set.kind = TranscoderKind::PerLayer;
  set.n_layers = static_cast<int64_t>(saes.size());
  set.source = saes.empty() ? std::string() : saes.front().source + (saes.size() > 1 ? " ..." : "");
  // every layer read at the same point
  GraphInput in = GraphInput::MlpIn;
  for (size_t l = 0; l < saes.size(); ++l) {
    const GraphInput here = *graph_engine::input_of_hook(saes[l].hook_name, static_cast<int64_t>(l));
    if (l > 0 && here != in)
      throw UsageError(
          fmt::format("{}: transcoder of layer {} reads {}, another point than layer 0's ({}); an "
                      "attribution graph reads every layer at the same point",
                      saes[l].source, l, saes[l].hook_name, saes[0].hook_name));
    in = here;
  }
  set.layers = std::move(saes);
  return std::make_unique<graph_engine::SetTranscoders>(std::move(set), in);
}

std::unique_ptr<GraphTranscoders> graph_engine::load_graph_transcoders(const std::string& dir, const Model& model,
                                                                       bool keep_for_next) {
  // a folder without config.yaml is circuit-tracer's plain per-layer layout, read at the MLP's input and output
  TranscoderLoadOptions lo;
  lo.default_input_hook = "mlp.hook_in";
  lo.default_output_hook = "hook_mlp_out";
  auto [set, serial] = graph_engine::load_set(dir, lo, keep_for_next);
  const int64_t L = model.config().n_layers;
  if (set.config_path.empty() && set.n_layers < L)
    throw FormatError(set.source, fmt::format("no layer_{}.safetensors ({} has {} layers; one transcoder per layer)",
                                              set.n_layers, model.source(), L));
  // The engine reads transcoders at the MLP's input, ln2's normalised input or resid_mid (all linear in
  // resid_mid with ln2 frozen) and writes features at the MLP's output; any other point is refused by name.
  const std::string where = set.config_path.empty() ? set.source : set.config_path;
  const std::optional<GraphInput> in = graph_engine::input_of_point(set.input_point);
  if (!in)
    throw UsageError(
        fmt::format("{}: feature_input_hook '{}' — an attribution graph reads transcoders at the MLP's "
                    "input (mlp.hook_in: ln2's output, its weight and bias applied; ln2.hook_normalized, "
                    "before them; or hook_resid_mid, before ln2)",
                    where, set.feature_input_hook));
  if (set.output_point != "hook_mlp_out")
    throw UsageError(
        fmt::format("{}: feature_output_hook '{}' — an attribution graph needs transcoders writing the "
                    "MLP's output (hook_mlp_out or mlp.hook_out)",
                    where, set.feature_output_hook));
  check_transcoders_fit(set, model);
  for (int64_t l = 0; l < set.n_layers; ++l) graph_engine::check_transcoder(set.layers[static_cast<size_t>(l)], l, model);
  return std::make_unique<graph_engine::SetTranscoders>(std::move(set), *in, serial);
}

std::unique_ptr<GraphTranscoders> load_graph_transcoders(const std::string& dir, const Model& model) {
  return graph_engine::load_graph_transcoders(dir, model, false);
}

}  // namespace vocablens
