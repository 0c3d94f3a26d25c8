// `vocablens features MODEL --sae PATH [--top-k K] [--features 0,5-9] [--final-norm]`: SAE / transcoder
// features in vocabulary space (see vocablens/features.hpp): the tokens each decoder direction promotes
// and suppresses through the unembedding, exact and streamed.
#include <fmt/color.h>
#include <fmt/format.h>

#include <map>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/features.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct FeaturesCliOptions {
  std::string model, sae, hook, features, prompt;
  int64_t top_k = 10, top_features = 5;
  bool final_norm = false, no_bottom = false;
  vocablens::cli::TokenFilterFlags tokens_flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

void print_features(const vocablens::FeatureLogits& a, const vocablens::Tokenizer* tok, const vocablens::Model& m,
                    bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  fmt::print("{}\n", style(fmt::format("features · {} · {} ({}, {}) · {} of {} features · top {}{}", m.source(),
                                       a.sae_source, a.sae_layout, a.architecture, a.features.size(), a.d_sae,
                                       a.options.top_k, a.options.final_norm_scale ? " · through the final norm" : ""),
                           fmt::emphasis::bold));
  for (size_t q = 0; q < a.features.size(); ++q) {
    fmt::print("{} · ‖d‖ {:.4g}\n", style(fmt::format("feature {}", a.features[q]), fmt::emphasis::bold),
               a.decoder_norms[q]);
    std::string s = "  +";
    for (const auto& e : a.top[q]) s += fmt::format("  {} {:.3g}", text(e.j), e.value);
    fmt::print("{}\n", s);
    if (!a.bottom.empty()) {
      s = "  -";
      for (const auto& e : a.bottom[q]) s += fmt::format("  {} {:.3g}", text(e.j), e.value);
      fmt::print("{}\n", s);
    }
  }
}

void print_lens(const vocablens::FeatureLens& a, const vocablens::Tokenizer* tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  fmt::print("{}\n", style(fmt::format("feature lens · {} at {} · top {} features per position", a.sae_source,
                                       a.hook_name, a.options.top_features),
                           fmt::emphasis::bold));
  std::map<int64_t, std::string> ftext;
  for (size_t s = 0; s < a.shown.size() && s < a.shown_tokens.size(); ++s) {
    std::string t;
    for (const auto& e : a.shown_tokens[s]) t += " " + text(e.j);
    ftext[a.shown[s]] = t;
  }
  for (size_t t = 0; t < a.ids.size(); ++t) {
    fmt::print("{:>3} {:<14} L0 {:<4}", t, text(a.ids[t]), a.l0[t]);
    for (const auto& [f, v] : a.top[t]) fmt::print("  #{} {:.3g} ({})", f, v, ftext.count(f) ? ftext[f].substr(1) : "");
    fmt::print("\n");
  }
}

int run_lens(const FeaturesCliOptions& co, const vocablens::Sae& sae) {
  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::check_sae_fits(sae, m);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, /*required=*/true);
  std::vector<int64_t> ids = tok->encode(co.prompt);
  if (ids.empty()) throw UsageError("empty prompt: it encodes to no tokens");
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    const double Tn = static_cast<double>(ids.size());
    vocablens::CacheSpec spec;
    spec.resid_pre = spec.resid_mid = spec.resid_post = true;
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, false);
    e.add("features: the SAE and its activations [T, d_sae]", (2 * static_cast<double>(sae.d_sae) * d + Tn * static_cast<double>(sae.d_sae)) * 4);
    e.add_phase("features: W_U and the positions' logits", (d * V + Tn * V) * 4);
    if (auto rc = vocablens::cli::check_memory("features", fmt::format("the feature lens of {} tokens", ids.size()), e,
                                               co.dry_run, "shorten --prompt"))
      return *rc;
  }
  vocablens::FeatureLensOptions o;
  o.top_features = co.top_features;
  o.top_k = co.top_k;
  o.final_norm_scale = co.final_norm;
  auto a = vocablens::feature_lens(m, sae, ids, o, tok.get());
  auto r = a.to_result(tok.get(), co.prompt);
  vocablens::cli::fill_provenance(r, m);
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_lens(a, tok.get(), color); });
  return 0;
}

int run_features(const FeaturesCliOptions& co) {
  vocablens::FeatureLogitsOptions o;
  o.top_k = co.top_k;
  o.final_norm_scale = co.final_norm;
  o.bottom = !co.no_bottom;
  o.filter = vocablens::cli::token_filter(co.tokens_flags);
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);
  vocablens::SaeLoadOptions lo;
  lo.hook_name = co.hook;
  vocablens::Sae sae = vocablens::load_sae(co.sae, lo);
  if (!co.prompt.empty()) return run_lens(co, sae);
  if (!co.features.empty()) o.features = vocablens::parse_index_list(co.features, sae.d_sae, "feature");
  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::check_sae_fits(sae, m);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, false);
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    auto e = vocablens::cli::model_memory(m);
    e.add_phase("features: the SAE, W_U and one block of feature logits", (2 * static_cast<double>(sae.d_sae) * d + d * V + 1024 * V) * 4);
    if (auto rc = vocablens::cli::check_memory("features", "the feature logits of " + sae.source, e, co.dry_run, "--features (fewer features)"))
      return *rc;
  }
  vocablens::cli::ProgressBar bar("features", "features");
  o.progress = bar.callback();
  auto a = vocablens::feature_logits(m, sae, o, tok.get());
  bar.finish();
  auto r = a.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  r.provenance["sae_stored_dtype"] = sae.stored_dtype;
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_features(a, tok.get(), m, color); });
  return 0;
}

vocablens::cli::Register reg{
    "features",
    "SAE / transcoder features in vocabulary space: the tokens each feature's decoder direction promotes and suppresses",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<FeaturesCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--sae", o->sae,
                     "SAE or transcoder: SAELens folder, Gemma Scope params.npz / params.safetensors, Llama Scope "
                     "folder, circuit-tracer layer_N.safetensors")
          ->required();
      sub.add_option("--hook", o->hook, "Hook point the SAE reads (overrides the file's or the guessed one)");
      sub.add_option("--features", o->features, "Features, e.g. 0,5,10-20 (default: all)");
      sub.add_option("--top-k", o->top_k, "Tokens per feature and direction (default 10)");
      sub.add_option("--prompt", o->prompt,
                     "Feature lens instead: run the model on this text and show the features firing at each position");
      sub.add_option("--top-features", o->top_features, "With --prompt: features shown per position (default 5)");
      sub.add_flag("--final-norm", o->final_norm, "Scale each decoder direction by the final norm's weight first");
      sub.add_flag("--no-bottom", o->no_bottom, "Skip the lowest-scoring tokens");
      vocablens::cli::add_token_filter_options(sub, o->tokens_flags);
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_features(*o); };
    }};

}  // namespace
