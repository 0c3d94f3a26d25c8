// `vocablens project MODEL --prompt TEXT --hook resid_post.2 [--top-k 10]`: hidden states at a hook point
// projected to tokens (Dar et al.'s hE: x W_U, no final norm unless --final-norm; see vocablens/unembed.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/project.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/unembed.hpp"

namespace {

using vocablens::UsageError;

struct ProjectCliOptions {
  std::string model;
  std::string prompt;
  std::vector<int64_t> prompt_ids;
  std::string hook = "resid_post";
  int64_t top_k = 10;
  std::vector<int64_t> positions;
  bool final_norm = false, read = false, bos = false, no_bos = false;
  std::string inverse = "pinv";
  double pinv_rtol = 1e-6;
  vocablens::cli::TokenFilterFlags tokens_flags;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

// "resid_post.2" -> ("resid_post", 2); "resid_post" -> ("resid_post", -1).
std::pair<std::string, int64_t> parse_hook(const std::string& h) {
  auto dot = h.rfind('.');
  if (dot == std::string::npos) return {h, -1};
  std::string name = h.substr(0, dot), num = h.substr(dot + 1);
  if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 9)
    throw UsageError("--hook '" + h + "': expected NAME or NAME.LAYER, e.g. resid_post.2");
  return {name, std::stoll(num)};
}

void print_projection(const vocablens::HiddenProjection& p, const vocablens::Tokenizer& tok, const vocablens::Model& m,
                      bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  const auto& o = p.options;
  fmt::print("{}\n",
             style(fmt::format("projection · {} · {} · {} · top {}", m.source(), o.hook,
                               o.read ? std::string("read through ") + vocablens::to_string(o.inverse) : "x W_U",
                               o.top_k) +
                       (o.apply_final_norm ? " · final norm applied" : ""),
                   fmt::emphasis::bold));
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (p.layers[l] >= 0) fmt::print("\n{}\n", style(fmt::format("{}.{}", o.hook, p.layers[l]), fmt::emphasis::bold));
    for (size_t q = 0; q < p.positions.size(); ++q) {
      std::string line = fmt::format("  {:>4} {:<12} ‖x‖ {:>8.3f} →", p.positions[q],
                                     tok.display(p.ids[static_cast<size_t>(p.positions[q])]), p.norms[l][q]);
      for (const auto& e : p.top[l][q]) line += fmt::format("  {} {:.3g}", tok.display(e.j), e.value);
      fmt::print("{}\n", line);
    }
  }
}

int run_project(const ProjectCliOptions& co) {
  if (co.prompt.empty() && co.prompt_ids.empty())
    throw UsageError("give --prompt TEXT (at least one character) or --prompt-ids IDS");
  if (!co.prompt.empty() && !co.prompt_ids.empty()) throw UsageError("give either --prompt or --prompt-ids, not both");
  if (!co.prompt_ids.empty() && (co.bos || co.no_bos))
    throw UsageError("--bos/--no-bos apply to --prompt text; --prompt-ids are used exactly as given");
  if (co.bos && co.no_bos) throw UsageError("--bos and --no-bos cannot be used together");
  vocablens::HiddenProjectionOptions o;
  auto [hook, layer] = parse_hook(co.hook);
  o.hook = hook;
  o.layer = layer;
  if (hook == "final_norm" && layer >= 0) throw UsageError("--hook final_norm takes no layer");
  o.top_k = co.top_k;
  o.positions = co.positions;
  o.apply_final_norm = co.final_norm;
  o.read = co.read;
  o.inverse = vocablens::parse_inverse_kind(co.inverse);
  o.pinv.rtol = co.pinv_rtol;
  o.filter = vocablens::cli::token_filter(co.tokens_flags);
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  vocablens::adapt_threads_to(m);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, /*required=*/true);  // the prompt needs it
  vocablens::EncodeOptions eo;
  if (co.bos) eo.add_bos = true;
  if (co.no_bos) eo.add_bos = false;
  std::vector<int64_t> ids = co.prompt_ids.empty() ? tok->encode(co.prompt, eo) : co.prompt_ids;
  if (ids.empty()) throw UsageError("empty prompt: it encodes to no tokens");
  for (int64_t id : ids)
    if (id < 0 || id >= m.config().vocab_size)
      throw UsageError("--prompt-ids: id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(m.config().vocab_size) + ")");
  if (static_cast<int64_t>(ids.size()) > m.config().n_ctx)
    throw UsageError("the prompt is " + std::to_string(ids.size()) + " tokens, longer than the model's context of " +
                     std::to_string(m.config().n_ctx) + " tokens");
  {
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    const double Tn = static_cast<double>(ids.size());
    (void)Tn;
    vocablens::CacheSpec spec = [] { vocablens::CacheSpec s; s.resid_pre = s.resid_mid = s.resid_post = s.attn_out = s.mlp_out = true; return s; }();
    auto e = vocablens::estimate_forward_memory(m, 1, static_cast<int64_t>(ids.size()), spec, false);
    e.add_phase("project: the read side (E+ or W_U) and the positions' logits", (2 * d * V + Tn * V) * 4);
    if (auto rc = vocablens::cli::check_memory("project", fmt::format("the projection of {} tokens of {}", ids.size(), m.source()), e, co.dry_run, "shorten the prompt, or --position (fewer positions)"))
      return *rc;
  }
  auto p = vocablens::project_hidden(m, ids, o, tok.get());
  auto r = p.to_result(tok.get());
  r.settings["prompt"] = co.prompt.empty() ? tok->decode(ids) : co.prompt;
  if (!co.prompt_ids.empty()) r.settings["prompt_ids"] = ids;
  vocablens::cli::fill_provenance(r, m);
  r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] { print_projection(p, *tok, m, color); });
  return 0;
}

vocablens::cli::Register reg{
    "project", "Hidden states at a hook point projected to tokens (x W_U, or read through E+ / E^T)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<ProjectCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--prompt", o->prompt, "Text to run (tokenised with the model's tokenizer)");
      sub.add_option("--prompt-ids", o->prompt_ids,
                     "Token ids to run instead of text, used exactly as given (no BOS added), e.g. --prompt-ids 1,403,407")
          ->delimiter(',');
      sub.add_option("--hook", o->hook,
                     "resid_pre|resid_mid|resid_post|attn_out|mlp_out[.LAYER] or final_norm (default resid_post, "
                     "every layer)");
      sub.add_option("--top-k", o->top_k, "Tokens per vector (default 10)");
      sub.add_option("--position", o->positions, "Positions to show (repeatable; negative = from the end; default all)")
          ->allow_extra_args(false);
      sub.add_flag("--final-norm", o->final_norm, "Apply the model's final norm first (logit-lens style)");
      sub.add_flag("--read", o->read, "Project as a vector the model reads (x R, R from --inverse) instead of x W_U");
      sub.add_option("--inverse", o->inverse, "With --read: pinv (exact E+, default), transpose (E^T), embed (W_E)")
          ->check(CLI::IsMember({"pinv", "transpose", "embed"}));
      sub.add_option("--pinv-rtol", o->pinv_rtol, "Singular values below rtol*max are dropped from E+ (default 1e-6)");
      vocablens::cli::add_token_filter_options(sub, o->tokens_flags);
      sub.add_flag("--bos", o->bos, "Prepend the BOS token to the prompt");
      sub.add_flag("--no-bos", o->no_bos, "Do not prepend BOS (llama2.c tokenizers add it by default)");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_project(*o); };
    }};

}  // namespace
