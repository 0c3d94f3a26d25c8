// `vocablens features MODEL --sae PATH [--top-k K] [--features 0,5-9] [--final-norm]`: SAE / transcoder
// features in vocabulary space (see vocablens/features.hpp): the tokens each decoder direction promotes
// and suppresses, exact and streamed; with --prompt the feature lens, with --corpus the corpus statistics.
// The flags come from the three analyses' declarations (analyses/features_entry.cpp: feature_logits,
// feature_lens, feature_corpus); each form is run_analysis and a printer reading its Result, and --neuronpedia
// writes the batch from the Results (feature_logits', with --corpus feature_corpus' too).
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
#include "vocablens/model.hpp"
#include "vocablens/neuronpedia.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using nlohmann::json;
using vocablens::UsageError;

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

// The model, its tokenizer and the SAE of one call (the SAE read once, through the declaration: --sae, --hook,
// and handed to the estimate and the run as an input).
struct FeaturesLoaded {
  std::unique_ptr<vocablens::Model> m;
  std::unique_ptr<vocablens::Tokenizer> tok;
  vocablens::AnalysisInputs in;
};

FeaturesLoaded load_features(const FeaturesCli& c, const vocablens::DeclaredAnalysis& a, const json& resolved,
                             bool tokenizer_required) {
  FeaturesLoaded l;
  l.m = std::make_unique<vocablens::Model>(vocablens::load_model(c.model));
  const vocablens::AnalysisRequest q{*l.m, nullptr, resolved, {}, nullptr, vocablens::Surface::Cli, &a.decl};
  l.in.saes["sae"] = vocablens::entries::sae_option(q);
  vocablens::cli::TokenFilterFlags tf;
  tf.tokenizer = c.tokenizer;
  tf.alpha_only = resolved.contains("alpha_only") && resolved["alpha_only"].get<bool>();
  l.tok = vocablens::cli::load_tokenizer(c.model, tf, tokenizer_required);
  return l;
}

vocablens::AnalysisEstimate estimate(const vocablens::DeclaredAnalysis& a, const FeaturesLoaded& l, const json& given) {
  return vocablens::estimate_analysis(a, *l.m, l.tok.get(), given, vocablens::Surface::Cli, &l.in);
}

vocablens::Result run_form(const vocablens::DeclaredAnalysis& a, const FeaturesLoaded& l, const json& given,
                           std::function<void(int64_t, int64_t)> progress = {}) {
  auto r = vocablens::run_analysis(a, *l.m, l.tok.get(), given, vocablens::Surface::Cli, std::move(progress), nullptr, &l.in);
  vocablens::cli::fill_provenance(r, *l.m);
  return r;
}

// Rows of a [rows, k] array padded with -1 (ids) end at the first -1.
template <class F>
void each_feature_id(const int64_t* ids, size_t row, size_t k, F f) {
  for (size_t e = row * k; ids && e < (row + 1) * k && ids[e] >= 0; ++e) f(ids[e], e);
}

size_t feature_rows(const vocablens::Result& r, const char* name) {
  auto it = r.arrays.find(name);
  return it == r.arrays.end() || it->second.shape.empty() ? 0 : static_cast<size_t>(it->second.shape[0]);
}

// The tables below are read back from the Result (what --format json prints), as every command's.
void print_features(const vocablens::Result& r, const vocablens::Tokenizer* tok, const vocablens::Model& m, bool color) {
  using vocablens::cli::array_values;
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  const auto& set = r.settings;
  const size_t N = feature_rows(r, "feature_ids"), k = static_cast<size_t>(set["top_k"].get<int64_t>());
  fmt::print("{}\n", style(fmt::format("features · {} · {} ({}, {}) · {} of {} features · top {}{}", m.source(),
                                       set["sae"].get<std::string>(), set["layout"].get<std::string>(),
                                       r.summary["architecture"].get<std::string>(), N, r.summary["d_sae"].get<int64_t>(), k,
                                       set["final_norm_scale"].get<bool>() ? " · through the final norm" : ""),
                           fmt::emphasis::bold));
  const int64_t* features = array_values<int64_t>(r, "feature_ids");
  const double* norms = array_values<double>(r, "decoder_norms");
  const int64_t* enc_ids = array_values<int64_t>(r, "encoder_top_ids");
  const double* enc_values = array_values<double>(r, "encoder_top_values");
  const size_t enc_k = enc_ids ? static_cast<size_t>(r.arrays.at("encoder_top_ids").shape[1]) : 0;
  for (size_t q = 0; q < N; ++q) {
    fmt::print("{} · ‖d‖ {:.4g}\n", style(fmt::format("feature {}", features[q]), fmt::emphasis::bold), norms[q]);
    for (const char* dir : {"top", "bottom"}) {
      const int64_t* ids = array_values<int64_t>(r, (std::string(dir) + "_ids").c_str());
      const double* values = array_values<double>(r, (std::string(dir) + "_values").c_str());
      if (!ids) continue;
      std::string s = dir[0] == 't' ? "  +" : "  -";
      each_feature_id(ids, q, k, [&](int64_t id, size_t e) { s += fmt::format("  {} {:.3g}", text(id), values[e]); });
      fmt::print("{}\n", s);
    }
    if (enc_ids) {
      std::string s = fmt::format("  enc ({})", set["encoder_read"].get<std::string>());
      each_feature_id(enc_ids, q, enc_k, [&](int64_t id, size_t e) { s += fmt::format("  {} {:.3g}", text(id), enc_values[e]); });
      fmt::print("{}\n", s);
    }
  }
}

void print_feature_lens(const vocablens::Result& r, const vocablens::Tokenizer* tok, bool color) {
  using vocablens::cli::array_values;
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  const auto& set = r.settings;
  const size_t n = static_cast<size_t>(set["top_features"].get<int64_t>());
  fmt::print("{}\n", style(fmt::format("feature lens · {} at {} · top {} features per position", set["sae"].get<std::string>(),
                                       set["hook_name"].get<std::string>(), n),
                           fmt::emphasis::bold));
  std::map<int64_t, std::string> ftext;
  const int64_t* shown = array_values<int64_t>(r, "shown_features");
  const int64_t* shown_ids = array_values<int64_t>(r, "shown_token_ids");
  const size_t k = static_cast<size_t>(set["top_k"].get<int64_t>());
  for (size_t s = 0; shown_ids && s < feature_rows(r, "shown_features"); ++s) {
    std::string t;
    each_feature_id(shown_ids, s, k, [&](int64_t id, size_t) { t += " " + text(id); });
    ftext[shown[s]] = t;
  }
  const int64_t* ids = array_values<int64_t>(r, "ids");
  const int64_t* l0 = array_values<int64_t>(r, "l0");
  const int64_t* top = array_values<int64_t>(r, "top_features");
  const double* acts = array_values<double>(r, "top_activations");
  for (size_t t = 0; t < feature_rows(r, "ids"); ++t) {
    fmt::print("{:>3} {:<14} L0 {:<4}", t, text(ids[t]), l0[t]);
    each_feature_id(top, t, n, [&](int64_t f, size_t e) {
      fmt::print("  #{} {:.3g} ({})", f, acts[e], ftext.count(f) ? ftext[f].substr(1) : "");
    });
    fmt::print("\n");
  }
}

void print_feature_corpus(const vocablens::Result& r, const vocablens::Tokenizer* tok, bool color) {
  using vocablens::cli::array_values;
  auto style = [&](const std::string& t, fmt::text_style st) { return color ? fmt::format(st, "{}", t) : t; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  const auto& set = r.settings;
  const auto& s = r.summary["metrics"];
  const int64_t positions = s["positions"].get<int64_t>(), d_sae = s["d_sae"].get<int64_t>();
  fmt::print("{}\n",
             style(fmt::format("feature corpus · {} at {} · {} · {} positions in {} windows of {}", set["sae"].get<std::string>(),
                               set["hook_name"].get<std::string>(), set["corpus"].get<std::string>(), positions,
                               s["windows"].get<int64_t>(), set["window"].get<int64_t>()),
                   fmt::emphasis::bold));
  fmt::print("  L0 {:.4g} · dead {} of {} · MSE {:.4g} · explained variance {:.4g} · cos {:.4g}\n", s["mean_l0"].get<double>(),
             s["dead_features"].get<int64_t>(), d_sae, s["mse"].get<double>(), s["explained_variance"].get<double>(),
             s["cossim"].get<double>());
  if (set["ce_metrics"].get<bool>())
    fmt::print("  CE clean {:.4f} · with SAE {:.4f} · zero-ablated {:.4f} · CE loss recovered {:.4f} · KL with SAE {:.4g}\n",
               s["ce_loss_without_sae"].get<double>(), s["ce_loss_with_sae"].get<double>(),
               s["ce_loss_with_ablation"].get<double>(), s["ce_loss_score"].get<double>(), s["kl_div_with_sae"].get<double>());
  // The densest features first, each with its strongest context (the first of its rows: rank 1).
  const int64_t* fire_count = array_values<int64_t>(r, "fire_count");
  std::vector<int64_t> order(static_cast<size_t>(d_sae));
  for (int64_t f = 0; f < d_sae; ++f) order[static_cast<size_t>(f)] = f;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return fire_count[static_cast<size_t>(a)] > fire_count[static_cast<size_t>(b)]; });
  const size_t R = feature_rows(r, "context_features");
  const int64_t* cf = array_values<int64_t>(r, "context_features");
  const int64_t* cat = array_values<int64_t>(r, "context_at");
  const int64_t* cids = array_values<int64_t>(r, "context_ids");
  const double* ca = array_values<double>(r, "context_activations");
  const size_t C = R ? static_cast<size_t>(r.arrays.at("context_ids").shape[1]) : 0;
  for (size_t i = 0; i < order.size() && i < 10; ++i) {
    const int64_t f = order[i];
    std::string ctx;
    const int64_t* first = cf ? std::lower_bound(cf, cf + R, f) : nullptr;
    if (first && first != cf + R && *first == f) {
      const size_t c = static_cast<size_t>(first - cf);
      each_feature_id(cids, c, C, [&](int64_t id, size_t e) {
        ctx += static_cast<int64_t>(e - c * C) == cat[c] ? "[" + text(id) + "]" : text(id);
      });
      ctx = fmt::format("  max {:.3g}: {}", ca[c], ctx);
    }
    fmt::print("  #{:<6} density {:.4f}{}\n", f,
               static_cast<double>(fire_count[static_cast<size_t>(f)]) / static_cast<double>(positions), ctx);
  }
}

int run_feature_lens(const FeaturesCli& c, const json& given) {
  const auto& a = vocablens::find_analysis("feature_lens");
  const json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  FeaturesLoaded l = load_features(c, a, resolved, /*tokenizer_required=*/true);
  if (auto rc = vocablens::cli::check_memory("features", estimate(a, l, given), c.dry_run)) return *rc;
  auto r = run_form(a, l, given);
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_feature_lens(r, l.tok.get(), color); });
  return 0;
}

int run_feature_corpus(const FeaturesCli& c, const json& given) {
  vocablens::dist::init();  // under mpirun: windows shared by the ranks, rank 0 reports
  const auto& a = vocablens::find_analysis("feature_corpus");
  const json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  FeaturesLoaded l = load_features(c, a, resolved, /*tokenizer_required=*/true);
  if (auto rc = vocablens::cli::check_memory("features", estimate(a, l, given), c.dry_run)) return *rc;
  const bool main_rank = vocablens::dist::rank() == 0;
  vocablens::cli::ProgressBar bar("features --corpus", "tokens");
  auto r = run_form(a, l, given, main_rank ? bar.callback() : std::function<void(int64_t, int64_t)>());
  bar.finish();
  if (!main_rank) return 0;  // every rank holds the same result; one writes it
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_feature_corpus(r, l.tok.get(), color); });
  return 0;
}

// --neuronpedia FILE: Neuronpedia's dashboard batch from the feature logits' Result and, with --corpus, the
// corpus statistics' Result (without the CE passes, which the batch has no use for).
void write_neuronpedia(const FeaturesCli& c, const FeaturesLoaded& l, const vocablens::Result& logits,
                       const vocablens::Result* corpus) {
  vocablens::NeuronpediaOptions no;
  no.model_id = c.np_model.empty() ? l.m->source() : c.np_model;
  no.sae_set = c.np_set;
  auto batch = vocablens::neuronpedia_batch(logits, corpus, l.tok.get(), no);
  // Token text may hold partial UTF-8 characters (byte tokens): replaced, never a throw.
  vocablens::write_file_atomic(c.neuronpedia, batch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  fmt::print(stderr, "wrote {} features to {} (Neuronpedia dashboard batch{})\n", feature_rows(logits, "feature_ids"),
             c.neuronpedia, corpus ? ", with the corpus statistics" : "");
}

int run_features(const FeaturesCli& c) {
  const json given = c.flags->given(), lens_own = c.lens->given(), corpus_own = c.corpus->given();
  const bool prompt = lens_own.contains("prompt"), corpus = corpus_own.contains("path");
  if (!c.out.out_dir.empty()) vocablens::ensure_directory(c.out.out_dir);
  if (prompt && corpus) throw UsageError("give --prompt or --corpus, not both");
  if (prompt) return run_feature_lens(c, form_options(vocablens::find_analysis("feature_lens").decl, given, lens_own));
  const auto& ca = vocablens::find_analysis("feature_corpus");
  if (corpus && c.neuronpedia.empty()) return run_feature_corpus(c, form_options(ca.decl, given, corpus_own));
  const auto& a = vocablens::find_analysis("feature_logits");
  const json resolved = vocablens::resolve_options(a.decl, given, vocablens::Surface::Cli);
  json corpus_given = corpus ? form_options(ca.decl, given, corpus_own) : json();
  if (corpus) corpus_given["ce"] = false;
  FeaturesLoaded l = load_features(c, a, resolved, /*tokenizer_required=*/corpus);
  // --neuronpedia with --corpus: the corpus pass, then the feature logits, estimated together by their slice.
  const vocablens::AnalysisEstimate e = corpus ? vocablens::entries::neuronpedia_corpus_estimate(
                                                     *l.m, l.tok.get(), given, corpus_given, vocablens::Surface::Cli, &l.in)
                                               : estimate(a, l, given);
  if (auto rc = vocablens::cli::check_memory("features", e, c.dry_run)) return *rc;
  std::unique_ptr<vocablens::Result> stats;
  if (corpus) {
    vocablens::dist::init();
    stats = std::make_unique<vocablens::Result>(run_form(ca, l, corpus_given));
    if (vocablens::dist::rank() != 0) return 0;
  }
  vocablens::cli::ProgressBar bar("features", "features");
  auto r = run_form(a, l, given, bar.callback());
  bar.finish();
  if (!c.neuronpedia.empty()) write_neuronpedia(c, l, r, stats.get());
  const bool color = vocablens::cli::use_color(c.out);
  vocablens::cli::emit(r, c.out, [&] { print_features(r, l.tok.get(), *l.m, color); });
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
