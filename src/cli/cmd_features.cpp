// `vocablens features MODEL --sae PATH [--top-k K] [--features 0,5-9] [--final-norm]`: SAE / transcoder
// features in vocabulary space (see vocablens/features.hpp): the tokens each decoder direction promotes
// and suppresses, exact and streamed; with --prompt the feature lens, with --corpus the corpus statistics.
// The flags come from the three analyses' declarations (analyses/features_entry.cpp: feature_logits,
// feature_lens, feature_corpus); the command keeps only the Neuronpedia export, which writes a file.
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "analyses/declared_options.hpp"
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
#include "vocablens/unembed.hpp"

namespace {

using vocablens::UsageError;
using nlohmann::json;

struct FeaturesCli {
  std::string model, tokenizer;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;   // feature_logits
  std::shared_ptr<vocablens::cli::DeclaredFlags> lens;    // what feature_lens adds (--prompt, --top-features, --bos)
  std::shared_ptr<vocablens::cli::DeclaredFlags> corpus;  // what feature_corpus adds (--corpus, --window, ...)
  std::string neuronpedia, np_model, np_set;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// The options typed for feature_logits that `decl` also declares, with the form's own: one call's options.
json form_options(const vocablens::AnalysisDecl& decl, const json& base_given, const json& own) {
  json out = json::object();
  for (auto it = base_given.begin(); it != base_given.end(); ++it)
    if (decl.find(it.key())) out[it.key()] = it.value();  // others (--features, --no-bottom, ...) do not apply
  for (auto it = own.begin(); it != own.end(); ++it) out[it.key()] = it.value();
  return out;
}

// The model, its tokenizer and the SAE of one call (the SAE read through the declaration: --sae, --hook).
struct Loaded {
  std::unique_ptr<vocablens::Model> m;
  std::unique_ptr<vocablens::Tokenizer> tok;
  std::shared_ptr<const vocablens::Sae> sae;
};

Loaded load(const FeaturesCli& c, const vocablens::DeclaredAnalysis& a, const json& resolved, bool tokenizer_required) {
  Loaded l;
  l.m = std::make_unique<vocablens::Model>(vocablens::load_model(c.model));
  const vocablens::AnalysisRequest q{*l.m, nullptr, resolved, {}, nullptr, vocablens::Surface::Cli, &a.decl};
  l.sae = vocablens::entries::sae_option(q);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = c.tokenizer;
  tf.alpha_only = resolved.contains("alpha_only") && resolved["alpha_only"].get<bool>();
  l.tok = vocablens::cli::load_tokenizer(c.model, tf, tokenizer_required);
  return l;
}

// The declared estimate of analysis `a` for these options, with the SAE already loaded (not read twice).
vocablens::AnalysisEstimate estimate(const vocablens::DeclaredAnalysis& a, const Loaded& l, const json& given) {
  vocablens::AnalysisInputs in;
  in.saes["sae"] = l.sae;
  return vocablens::estimate_analysis(a, *l.m, l.tok.get(), given, vocablens::Surface::Cli, &in);
}

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

int run_lens(const FeaturesCli& c, const json& given) {
  const auto& a = vocablens::find_analysis("feature_lens");
  const json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  Loaded l = load(c, a, resolved, /*tokenizer_required=*/true);
  const vocablens::Model& m = *l.m;
  const vocablens::Sae& sae = *l.sae;
  const vocablens::AnalysisRequest q{m, l.tok.get(), resolved, {}, nullptr, vocablens::Surface::Cli, &a.decl};
  std::vector<int64_t> ids = vocablens::entries::prompt_ids(q);
  if (auto rc = vocablens::cli::check_memory("features", estimate(a, l, given), c.dry_run)) return *rc;
  auto fl = vocablens::feature_lens(m, sae, ids, vocablens::entries::feature_lens_options(resolved), l.tok.get());
  auto r = fl.to_result(l.tok.get(), vocablens::entries::prompt_text(q, ids));
  vocablens::cli::fill_provenance(r, m);
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_lens(fl, l.tok.get(), color); });
  return 0;
}

int run_corpus(const FeaturesCli& c, const json& given) {
  vocablens::dist::init();  // under mpirun: windows shared by the ranks, rank 0 reports
  const auto& a = vocablens::find_analysis("feature_corpus");
  const json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  Loaded l = load(c, a, resolved, /*tokenizer_required=*/true);
  vocablens::SaeCorpusOptions o = vocablens::entries::feature_corpus_options(resolved);
  if (auto rc = vocablens::cli::check_memory("features", estimate(a, l, given), c.dry_run)) return *rc;
  const bool main_rank = vocablens::dist::rank() == 0;
  vocablens::cli::ProgressBar bar("features --corpus", "tokens");
  if (auto cb = bar.callback(); main_rank && cb)
    o.progress = [cb](uint64_t done, uint64_t total) { cb(static_cast<int64_t>(done), static_cast<int64_t>(total)); };
  auto s = vocablens::sae_corpus_stats(*l.m, *l.sae, *l.tok, resolved["path"].get<std::string>(), o);
  bar.finish();
  if (!main_rank) return 0;  // every rank holds the same result; one writes it
  auto r = s.to_result(l.tok.get());
  vocablens::cli::fill_provenance(r, *l.m);
  r.provenance["sae"] = l.sae->source;
  r.provenance["sae_layout"] = l.sae->layout;
  r.provenance["tokenizer"] = l.tok->source();
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_corpus(s, l.tok.get(), color); });
  return 0;
}

int run_features(const FeaturesCli& c) {
  const json given = c.flags->given(), lens_own = c.lens->given(), corpus_own = c.corpus->given();
  const bool prompt = lens_own.contains("prompt"), corpus = corpus_own.contains("path");
  if (!c.out.out_dir.empty()) vocablens::ensure_directory(c.out.out_dir);
  if (prompt && corpus) throw UsageError("give --prompt or --corpus, not both");
  if (prompt) return run_lens(c, form_options(vocablens::find_analysis("feature_lens").decl, given, lens_own));
  const auto& cd = vocablens::find_analysis("feature_corpus").decl;
  if (corpus && c.neuronpedia.empty()) return run_corpus(c, form_options(cd, given, corpus_own));
  const auto& a = vocablens::find_analysis("feature_logits");
  const json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  // --neuronpedia with --corpus: the corpus statistics feed frac_nonzero, the histograms and the contexts.
  const json corpus_resolved =
      corpus ? vocablens::resolve_options(cd, form_options(cd, given, corpus_own), vocablens::Surface::Cli) : json();
  Loaded l = load(c, a, resolved, /*tokenizer_required=*/corpus);
  const vocablens::Model& m = *l.m;
  const vocablens::Sae& sae = *l.sae;
  vocablens::SaeCorpusOptions so;
  if (corpus) {
    so = vocablens::entries::feature_corpus_options(corpus_resolved);
    so.ce_metrics = false;  // the batch has no use for them
  }
  if (corpus) {  // --neuronpedia with --corpus: the corpus pass, then the feature logits
    auto e = vocablens::estimate_sae_corpus_memory(m, sae, so);
    vocablens::entries::add_feature_logits_phase(e, m, sae, resolved["top_k"].get<int64_t>());
    if (auto rc = vocablens::cli::check_memory("features", "the feature logits of " + sae.source, e, c.dry_run,
                                               "--features (fewer features), --window or --contexts"))
      return *rc;
  } else if (auto rc = vocablens::cli::check_memory("features", estimate(a, l, given), c.dry_run)) {
    return *rc;
  }
  std::unique_ptr<vocablens::SaeCorpusStats> stats;
  if (corpus) {
    vocablens::dist::init();
    stats = std::make_unique<vocablens::SaeCorpusStats>(
        vocablens::sae_corpus_stats(m, sae, *l.tok, corpus_resolved["path"].get<std::string>(), so));
    if (vocablens::dist::rank() != 0) return 0;
  }
  vocablens::cli::ProgressBar bar("features", "features");
  const vocablens::AnalysisRequest q{m, l.tok.get(), resolved, bar.callback(), nullptr, vocablens::Surface::Cli, &a.decl};
  auto fl = vocablens::feature_logits(m, sae, vocablens::entries::feature_logits_options(q), l.tok.get());
  bar.finish();
  if (!c.neuronpedia.empty()) {
    vocablens::NeuronpediaOptions no;
    no.model_id = c.np_model.empty() ? m.source() : c.np_model;
    no.sae_set = c.np_set;
    auto batch = vocablens::neuronpedia_batch(fl, stats.get(), l.tok.get(), no);
    // Token text may hold partial UTF-8 characters (byte tokens): replaced, never a throw.
    vocablens::write_file_atomic(c.neuronpedia,
                                 batch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    fmt::print(stderr, "wrote {} features to {} (Neuronpedia dashboard batch{})\n", fl.features.size(), c.neuronpedia,
               stats ? ", with the corpus statistics" : "");
  }
  auto r = fl.to_result(l.tok.get());
  std::unique_ptr<vocablens::FeatureEncoderTokens> enc;
  if (!resolved["encoder"].is_null()) {
    enc = std::make_unique<vocablens::FeatureEncoderTokens>(vocablens::feature_encoder_tokens(
        m, sae, fl.features, fl.options.top_k, vocablens::parse_inverse_kind(resolved["encoder"].get<std::string>())));
    enc->add_to(r);
  }
  vocablens::cli::fill_provenance(r, m);
  r.provenance["sae"] = sae.source;
  r.provenance["sae_layout"] = sae.layout;
  r.provenance["sae_stored_dtype"] = sae.stored_dtype;
  if (l.tok) r.provenance["tokenizer"] = l.tok->source();
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_features(fl, l.tok.get(), m, color, enc.get()); });
  return 0;
}

vocablens::cli::Register registered_cmd_features{
    "features", vocablens::find_analysis("feature_logits").decl.summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<FeaturesCli>();
      const auto& base = vocablens::find_analysis("feature_logits").decl;
      c->flags = std::make_shared<vocablens::cli::DeclaredFlags>(base);
      c->lens = std::make_shared<vocablens::cli::DeclaredFlags>(
          vocablens::cli::options_not_in(vocablens::find_analysis("feature_lens").decl, base));
      c->corpus = std::make_shared<vocablens::cli::DeclaredFlags>(
          vocablens::cli::options_not_in(vocablens::find_analysis("feature_corpus").decl, base));
      sub.add_option("MODEL", c->model, vocablens::cli::kModelHelp)->required();
      c->flags->add_to(sub);
      c->lens->add_to(sub, {"prompt"});
      c->corpus->add_to(sub, {"path"});
      sub.add_option("--neuronpedia", c->neuronpedia,
                     "Also write the features as Neuronpedia's dashboard batch JSON to this file (SAEDashboard's format); "
                     "with --corpus, frac_nonzero, activation histograms and max-activating contexts come from it");
      sub.add_option("--neuronpedia-model", c->np_model, "With --neuronpedia: the model_id (default: the model path)");
      sub.add_option("--neuronpedia-set", c->np_set, "With --neuronpedia: the sae_set (default: the SAE path)");
      sub.add_option("--tokenizer", c->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--dry-run", c->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, c->out);
      sub.footer("With --prompt (the feature lens), --top-k counts the tokens listed per feature shown (default " +
                 vocablens::find_analysis("feature_lens").decl.find("top_k")->default_value.dump() + ").");
      return [c] { return run_features(*c); };
    }};

}  // namespace
