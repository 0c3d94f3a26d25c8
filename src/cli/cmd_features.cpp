// `vocablens features MODEL --sae PATH [--top-k K] [--features 0,5-9] [--final-norm]`: SAE / transcoder
// features in vocabulary space (see vocablens/features.hpp): the tokens each decoder direction promotes
// and suppresses through the unembedding, exact and streamed.
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/feature_encoder.hpp"
#include "vocablens/features.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neuronpedia.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct FeaturesCliOptions {
  std::string model, sae, hook, features, prompt, corpus;
  std::string neuronpedia, np_model, np_set, encoder;
  int64_t top_k = 10, top_features = 5;
  int64_t max_tokens = 0, window = 0, contexts = 5;
  bool final_norm = false, no_bottom = false, no_ce = false;
  vocablens::cli::TokenFilterFlags tokens_flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

void print_features(const vocablens::FeatureLogits& a, const vocablens::Tokenizer* tok, const vocablens::Model& m,
                    bool color, const vocablens::FeatureEncoderTokens* enc = nullptr) {
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
    if (enc && q < enc->top.size()) {
      s = fmt::format("  enc ({})", vocablens::to_string(enc->kind));
      for (const auto& e : enc->top[q]) s += fmt::format("  {} {:.3g}", text(e.j), e.value);
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

void print_corpus(const vocablens::SaeCorpusStats& s, const vocablens::Tokenizer* tok, bool color) {
  auto style = [&](const std::string& t, fmt::text_style st) { return color ? fmt::format(st, "{}", t) : t; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  fmt::print("{}\n", style(fmt::format("feature corpus · {} at {} · {} · {} positions in {} windows of {}", s.sae_source,
                                       s.hook_name, s.corpus, s.positions, s.windows, s.window),
                           fmt::emphasis::bold));
  fmt::print("  L0 {:.4g} · dead {} of {} · MSE {:.4g} · explained variance {:.4g} · cos {:.4g}\n", s.mean_l0, s.dead(),
             s.d_sae, s.mse, s.explained_variance, s.cossim);
  if (s.options.ce_metrics)
    fmt::print("  CE clean {:.4f} · with SAE {:.4f} · zero-ablated {:.4f} · CE loss recovered {:.4f} · KL with SAE {:.4g}\n",
               s.ce_clean, s.ce_sae, s.ce_zero, s.ce_loss_score, s.kl_sae);
  // The densest features first, each with its strongest context.
  std::vector<int64_t> order(static_cast<size_t>(s.d_sae));
  for (int64_t f = 0; f < s.d_sae; ++f) order[static_cast<size_t>(f)] = f;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return s.fire_count[static_cast<size_t>(a)] > s.fire_count[static_cast<size_t>(b)];
  });
  for (size_t i = 0; i < order.size() && i < 10; ++i) {
    const int64_t f = order[i];
    std::string ctx;
    if (!s.top_contexts[static_cast<size_t>(f)].empty()) {
      const auto& c = s.top_contexts[static_cast<size_t>(f)][0];
      for (size_t k = 0; k < c.ids.size(); ++k)
        ctx += static_cast<int64_t>(k) == c.at ? "[" + text(c.ids[k]) + "]" : text(c.ids[k]);
      ctx = fmt::format("  max {:.3g}: {}", c.activation, ctx);
    }
    fmt::print("  #{:<6} density {:.4f}{}\n", f,
               static_cast<double>(s.fire_count[static_cast<size_t>(f)]) / static_cast<double>(s.positions), ctx);
  }
}

int run_corpus(const FeaturesCliOptions& co, const vocablens::Sae& sae) {
  vocablens::dist::init();  // under mpirun: windows shared by the ranks, rank 0 reports
  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::check_sae_fits(sae, m);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, /*required=*/true);
  vocablens::SaeCorpusOptions o;
  o.max_tokens = co.max_tokens;
  o.window = co.window;
  o.contexts = co.contexts;
  o.ce_metrics = !co.no_ce;
  if (auto rc = vocablens::cli::check_memory(
          "features", fmt::format("the corpus statistics of {} ({} features)", sae.source, sae.d_sae),
          vocablens::estimate_sae_corpus_memory(m, sae, o), co.dry_run, "--window (fewer tokens per forward), --contexts or --no-ce"))
    return *rc;
  const bool main_rank = vocablens::dist::rank() == 0;
  vocablens::cli::ProgressBar bar("corpus", co.max_tokens > 0 ? "tokens" : "bytes");
  if (auto cb = bar.callback(); main_rank && cb)
    o.progress = [cb](uint64_t done, uint64_t total) { cb(static_cast<int64_t>(done), static_cast<int64_t>(total)); };
  auto s = vocablens::sae_corpus_stats(m, sae, *tok, co.corpus, o);
  bar.finish();
  if (!main_rank) return 0;  // every rank holds the same result; one writes it
  auto r = s.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_corpus(s, tok.get(), color); });
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
  if (!co.prompt.empty() && !co.corpus.empty()) throw UsageError("give --prompt or --corpus, not both");
  if (!co.prompt.empty()) return run_lens(co, sae);
  if (!co.corpus.empty() && co.neuronpedia.empty()) return run_corpus(co, sae);
  if (!co.features.empty()) o.features = vocablens::parse_index_list(co.features, sae.d_sae, "feature");
  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::check_sae_fits(sae, m);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, !co.corpus.empty());
  // --neuronpedia with --corpus: the corpus statistics feed frac_nonzero, the histograms and the contexts.
  vocablens::SaeCorpusOptions so;
  so.max_tokens = co.max_tokens;
  so.window = co.window;
  so.contexts = co.contexts;
  so.ce_metrics = false;  // the batch has no use for them
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    auto e = co.corpus.empty() ? vocablens::cli::model_memory(m) : vocablens::estimate_sae_corpus_memory(m, sae, so);
    e.add_phase("features: the SAE, W_U and one block of feature logits", (2 * static_cast<double>(sae.d_sae) * d + d * V + 1024 * V) * 4);
    if (auto rc = vocablens::cli::check_memory("features", "the feature logits of " + sae.source, e, co.dry_run,
                                               co.corpus.empty() ? "--features (fewer features)"
                                                                 : "--features (fewer features), --window or --contexts"))
      return *rc;
  }
  std::unique_ptr<vocablens::SaeCorpusStats> stats;
  if (!co.corpus.empty()) {
    vocablens::dist::init();
    stats = std::make_unique<vocablens::SaeCorpusStats>(vocablens::sae_corpus_stats(m, sae, *tok, co.corpus, so));
    if (vocablens::dist::rank() != 0) return 0;
  }
  vocablens::cli::ProgressBar bar("features", "features");
  o.progress = bar.callback();
  auto a = vocablens::feature_logits(m, sae, o, tok.get());
  bar.finish();
  if (!co.neuronpedia.empty()) {
    vocablens::NeuronpediaOptions no;
    no.model_id = co.np_model.empty() ? m.source() : co.np_model;
    no.sae_set = co.np_set;
    auto batch = vocablens::neuronpedia_batch(a, stats.get(), tok.get(), no);
    // Token text may hold partial UTF-8 characters (byte tokens): replaced, never a throw.
    vocablens::write_file_atomic(co.neuronpedia,
                                 batch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    fmt::print(stderr, "wrote {} features to {} (Neuronpedia dashboard batch{})\n", a.features.size(), co.neuronpedia,
               stats ? ", with the corpus statistics" : "");
  }
  auto r = a.to_result(tok.get());
  std::unique_ptr<vocablens::FeatureEncoderTokens> enc;
  if (!co.encoder.empty()) {
    enc = std::make_unique<vocablens::FeatureEncoderTokens>(vocablens::feature_encoder_tokens(
        m, sae, a.features, co.top_k, vocablens::parse_inverse_kind(co.encoder)));
    enc->add_to(r);
  }
  vocablens::cli::fill_provenance(r, m);
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  r.provenance["sae_stored_dtype"] = sae.stored_dtype;
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_features(a, tok.get(), m, color, enc.get()); });
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
      sub.add_option("--corpus", o->corpus,
                     "Corpus statistics instead: stream this text file through the model with the SAE (firing density, "
                     "histograms, dead features, L0, max-activating contexts, MSE, explained variance, CE loss recovered)");
      sub.add_option("--max-tokens", o->max_tokens, "With --corpus: stop after this many scored tokens (default: all)");
      sub.add_option("--window", o->window, "With --corpus: tokens per window (default: the model's context)");
      sub.add_option("--contexts", o->contexts, "With --corpus: max-activating contexts kept per feature (default 5)");
      sub.add_flag("--no-ce", o->no_ce, "With --corpus: skip the spliced and zero-ablated forward passes (CE, KL)");
      sub.add_option("--neuronpedia", o->neuronpedia,
                     "Also write the features as Neuronpedia's dashboard batch JSON to this file (SAEDashboard's format); "
                     "with --corpus, frac_nonzero, activation histograms and max-activating contexts come from it");
      sub.add_option("--neuronpedia-model", o->np_model, "With --neuronpedia: the model_id (default: the model path)");
      sub.add_option("--neuronpedia-set", o->np_set, "With --neuronpedia: the sae_set (default: the SAE path)");
      sub.add_option("--encoder", o->encoder,
                     "Also read each feature's ENCODER direction through a read projection: pinv (E+, Dar et al.), "
                     "transpose (W_U) or embed (W_E): the tokens that excite the feature most (arrays encoder_top_*)");
      sub.add_flag("--final-norm", o->final_norm, "Scale each decoder direction by the final norm's weight first");
      sub.add_flag("--no-bottom", o->no_bottom, "Skip the lowest-scoring tokens");
      vocablens::cli::add_token_filter_options(sub, o->tokens_flags);
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_features(*o); };
    }};

}  // namespace
