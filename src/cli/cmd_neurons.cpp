// `vocablens neurons MODEL --layer L [--neurons 0,5-9] [--top-k 30]`: MLP neurons in vocabulary space
// (see vocablens/neurons.hpp): top tokens of each key (column of W_in), gate (W_gate) and value (row of W_out).
#include <fmt/color.h>
#include <fmt/format.h>

#include <memory>

#include "cli/command.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct NeuronsCliOptions {
  std::string model;
  int64_t layer = -1;
  std::string neurons;
  int64_t top_k = 30;
  std::string inverse = "pinv";
  double pinv_rtol = 1e-6;
  bool no_keys = false, no_values = false, no_gates = false, bottom = false;
  vocablens::cli::TokenFilterFlags tokens_flags;
  vocablens::cli::OutputOptions out;
};

void print_neurons(const vocablens::NeuronsAnalysis& a, const vocablens::Tokenizer* tok, const vocablens::Model& m,
                   bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  const auto& o = a.options;
  fmt::print("{}\n", style(fmt::format("neurons · {} · layer {} · {} of {} neurons · top {} · keys{} via {}", m.source(),
                                       o.layer, a.neurons.size(), a.d_mlp, o.top_k, a.gated ? "/gates" : "",
                                       vocablens::to_string(o.inverse)),
                           fmt::emphasis::bold));
  auto line = [&](const char* label, const std::vector<vocablens::TopkEntry>& lst) {
    if (lst.empty()) return;
    std::string s = fmt::format("  {:<7}", label);
    for (const auto& e : lst) s += "  " + text(e.j);
    fmt::print("{}\n", s);
  };
  for (const auto& n : a.neurons) {
    std::string norms;
    if (o.keys) norms += fmt::format(" · ‖key‖ {:.4g}", n.key_norm);
    if (o.gates && a.gated) norms += fmt::format(" · ‖gate‖ {:.4g}", n.gate_norm);
    if (o.values) norms += fmt::format(" · ‖value‖ {:.4g}", n.value_norm);
    fmt::print("{}{}\n", style(fmt::format("neuron {}", n.neuron), fmt::emphasis::bold), norms);
    line("key", n.key_top);
    line("key-", n.key_bottom);
    line("gate", n.gate_top);
    line("gate-", n.gate_bottom);
    line("value", n.value_top);
    line("value-", n.value_bottom);
  }
}

int run_neurons(const NeuronsCliOptions& co) {
  vocablens::NeuronsOptions o;
  o.layer = co.layer;
  if (!co.neurons.empty()) o.neurons = vocablens::parse_index_list(co.neurons);
  o.top_k = co.top_k;
  o.inverse = vocablens::parse_inverse_kind(co.inverse);
  o.pinv.rtol = co.pinv_rtol;
  o.keys = !co.no_keys;
  o.values = !co.no_values;
  o.gates = !co.no_gates;
  o.bottom = co.bottom;
  o.filter = vocablens::cli::token_filter(co.tokens_flags);
  if (!o.keys && !o.values && !o.gates) throw UsageError("--no-keys, --no-gates and --no-values leave nothing to show");
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, false);
  vocablens::cli::ProgressBar bar("neurons", "vectors");
  o.progress = bar.callback();
  auto a = vocablens::analyze_neurons(m, o, tok.get());
  bar.finish();
  auto r = a.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_neurons(a, tok.get(), m, color); });
  return 0;
}

vocablens::cli::Register reg{
    "neurons", "MLP neurons in vocabulary space: top tokens of each key, gate and value vector, with their norms",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<NeuronsCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--layer", o->layer, "Layer (0-based)")->required();
      sub.add_option("--neurons", o->neurons, "Neurons, e.g. 0,5,10-20 (default: all of the layer)");
      sub.add_option("--top-k", o->top_k, "Tokens per vector (default 30)");
      sub.add_option("--inverse", o->inverse,
                     "Keys/gates read through: pinv (exact E+, default), transpose (E^T), embed (W_E)")
          ->check(CLI::IsMember({"pinv", "transpose", "embed"}));
      sub.add_option("--pinv-rtol", o->pinv_rtol, "Singular values below rtol*max are dropped from E+ (default 1e-6)");
      sub.add_flag("--no-keys", o->no_keys, "Skip the keys (columns of W_in)");
      sub.add_flag("--no-gates", o->no_gates, "Skip the gates (gated MLPs)");
      sub.add_flag("--no-values", o->no_values, "Skip the values (rows of W_out)");
      sub.add_flag("--bottom", o->bottom, "Also the lowest-scoring tokens of each vector");
      vocablens::cli::add_token_filter_options(sub, o->tokens_flags);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_neurons(*o); };
    }};

}  // namespace
