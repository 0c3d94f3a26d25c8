// `vocablens ablate MODEL --prompt TEXT --head L.H [--neuron L.N] [--resid L.P] [--mode zero|mean]`:
// knock out sites and show the prediction before and after (see vocablens/ablation.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/token_arg.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

using vocablens::UsageError;

struct AblateCliOptions {
  std::string model, tokenizer, prompt, target, mode = "zero";
  std::vector<std::string> heads, neurons, resids, hooks, mean_over;
  int64_t position = -1, top_k = 10;
  bool bos = false, no_bos = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

void print_ablation(const vocablens::AblationResult& a, const vocablens::Tokenizer& tok, bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  std::string sites;
  for (const auto& s : a.options.sites) sites += (sites.empty() ? "" : ", ") + s.label();
  fmt::print("{}\n", style(fmt::format("ablation ({}) of {} · {} · position {}",
                                       a.options.mode == vocablens::AblationMode::Mean ? "mean" : "zero", sites,
                                       a.model_source, a.position),
                           fmt::emphasis::bold));
  fmt::print("target {}: logit {:.4f} -> {:.4f} ({:+.4f}), p {:.4f} -> {:.4f}, rank {} -> {}\n",
             tok.display(a.target), a.before.target_logit, a.after.target_logit,
             a.after.target_logit - a.before.target_logit, a.before.target_prob, a.after.target_prob,
             a.before.target_rank, a.after.target_rank);
  fmt::print("KL(before || after) {:.5f} nats · largest logit change {:.4f}\n", a.kl, a.max_logit_change);
  fmt::print("{}\n", style(fmt::format("{:>4}  {:<20} {:>7}   {:<20} {:>7}", "rank", "before", "p", "after", "p"),
                           fmt::emphasis::bold));
  for (size_t j = 0; j < std::max(a.before.top_ids.size(), a.after.top_ids.size()); ++j) {
    auto col = [&](const vocablens::Prediction& p) {
      if (j >= p.top_ids.size()) return fmt::format("{:<20} {:>7}", "", "");
      std::string t = vocablens::cli::first_columns(tok.display(p.top_ids[j]), 20);
      size_t cols = 0;
      for (unsigned char ch : t) cols += (ch & 0xC0) != 0x80;
      return t + std::string(21 - cols, ' ') + fmt::format("{:>7.4f}", p.top_probs[j]);
    };
    fmt::print("{:>4}  {}   {}\n", j + 1, col(a.before), col(a.after));
  }
}

int run_ablate(const AblateCliOptions& o) {
  if (o.bos && o.no_bos) throw UsageError("--bos and --no-bos cannot be used together");
  vocablens::AblationOptions ao;
  for (const auto& s : o.heads) ao.sites.push_back(vocablens::parse_ablation_site("head", s));
  for (const auto& s : o.neurons) ao.sites.push_back(vocablens::parse_ablation_site("neuron", s));
  for (const auto& s : o.resids) ao.sites.push_back(vocablens::parse_ablation_site("resid", s));
  for (const auto& s : o.hooks) ao.sites.push_back(vocablens::parse_ablation_site("hook", s));
  if (ao.sites.empty())
    throw UsageError("nothing to ablate: give --head L.H, --neuron L.N, --resid L.P or --hook NAME (repeatable)");
  if (o.mode != "zero" && o.mode != "mean") throw UsageError("--mode must be zero or mean (got '" + o.mode + "')");
  ao.mode = o.mode == "mean" ? vocablens::AblationMode::Mean : vocablens::AblationMode::Zero;
  if (!o.mean_over.empty() && ao.mode != vocablens::AblationMode::Mean)
    throw UsageError("--mean-over has a meaning only with --mode mean");
  ao.position = o.position;
  ao.top_k = o.top_k;
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  const int bos = o.bos ? 1 : o.no_bos ? 0 : -1;
  auto ids = vocablens::cli::encode_prompt(*tok, o.prompt, "--prompt", bos);
  for (const auto& t : o.mean_over) ao.reference.push_back(vocablens::cli::encode_prompt(*tok, t, "--mean-over", bos));
  if (!o.target.empty()) ao.target = vocablens::cli::resolve_token(*tok, o.target, "--target");
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    const double Tn = static_cast<double>(ids.size());
    (void)Tn;
    vocablens::CacheSpec spec = [] { vocablens::CacheSpec s; s.resid_pre = s.resid_post = true; return s; }();
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, true);
    e.add("ablate: the clean run's logits and the mean references", Tn * V * 4 * 2);
    if (auto rc = vocablens::cli::check_memory("ablate", fmt::format("ablating over {} tokens of {}", ids.size(), m.source()), e, o.dry_run, "shorten --prompt (and the --mean-over texts)"))
      return *rc;
  }
  auto a = vocablens::ablate(m, ids, ao);
  auto r = a.to_result(tok.get(), o.prompt);
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  vocablens::cli::emit(r, o.out, [&] { print_ablation(a, *tok, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register reg{
    "ablate",
    "Zero- or mean-ablate heads, MLP neurons or residual positions and show the prediction before and after",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<AblateCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--prompt", o->prompt, "Text to run")->required();
      sub.add_option("--head", o->heads, "Head LAYER.HEAD, e.g. 1.3 (blocks.L.attn.hook_z); repeatable");
      sub.add_option("--neuron", o->neurons, "MLP neuron LAYER.NEURON, e.g. 0.17 (blocks.L.mlp.hook_post); repeatable");
      sub.add_option("--resid", o->resids, "Residual stream entering block LAYER at POSITION, LAYER.POSITION; repeatable");
      sub.add_option("--hook", o->hooks, "A whole activation by hook name, e.g. blocks.1.hook_attn_out or mlp_out.1 "
                                         "(docs/interventions.md lists them); repeatable");
      sub.add_option("--mode", o->mode, "zero, or mean: the activation's mean over every position of the prompt "
                                        "(or of the --mean-over prompts)")
          ->check(CLI::IsMember({"zero", "mean"}))
          ->capture_default_str();
      sub.add_option("--mean-over", o->mean_over, "Reference prompt for --mode mean; repeatable");
      sub.add_option("--target", o->target, "Token to follow (default: the unablated run's top prediction)");
      sub.add_option("--position", o->position, "Position whose prediction is shown (default -1: the last)");
      sub.add_option("--top-k", o->top_k, "Predictions listed (default 10)");
      sub.add_option("--tokenizer", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--bos", o->bos, "Prepend the BOS token");
      sub.add_flag("--no-bos", o->no_bos, "Do not prepend BOS (llama2.c tokenizers add it by default)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_ablate(*o); };
    }};

}  // namespace
