// `vocablens heads MODEL [--layer L --head H] [--kind ov|qk] [--top-k 50]`: attention heads in vocabulary
// space (see vocablens/heads.hpp): exact top-k (token, token) pairs of each head's OV / QK circuit,
// per-token lists, singular values, eigenvalues and copying scores.
#include <limits>
#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/output.hpp"
#include "cli/progress.hpp"
#include "cli/token_filter_options.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/token_id.hpp"

namespace {

using vocablens::UsageError;

struct HeadsCliOptions {
  std::string model;
  std::string layers, heads;
  std::string kind = "both";
  int64_t top_k = 50;
  std::string inverse = "pinv";
  double pinv_rtol = 1e-6;
  std::vector<std::string> tokens;
  std::vector<int64_t> token_ids;
  int64_t per_token_k = 0;
  bool drop_same_token = false, drop_same_word = false;
  vocablens::cli::TokenFilterFlags tokens_flags;
  bool no_spectra = false, no_prune = false, verbose = false;
  bool dry_run = false;
  vocablens::cli::OutputOptions out;
};

size_t columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string fit(const std::string& s, size_t width) {
  if (columns(s) <= width) return s + std::string(width - columns(s), ' ');
  std::string out;
  size_t n = 0;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if ((c & 0xC0) != 0x80) {
      if (n == width - 1) break;
      ++n;
    }
    out.push_back(ch);
  }
  return out + "…";
}

int64_t resolve_token(const vocablens::Tokenizer& tok, const std::string& s) {
  if (s.empty()) throw UsageError("--token is empty: give one token, e.g. --token \" Paris\"");
  std::vector<int64_t> ids;
  if (auto id = vocablens::single_token_id(tok, s, &ids)) return *id;
  throw UsageError("--token '" + s + "' is " + std::to_string(ids.size()) + " tokens (" +
                   vocablens::display_ids(tok, ids, 8, /*ellipsis=*/false) + "); give a single token, or --token-id");
}

void print_heads(const vocablens::HeadsAnalysis& a, const vocablens::Tokenizer* tok, const vocablens::Model& m,
                 bool color) {
  auto style = [&](const std::string& s, fmt::text_style st) { return color ? fmt::format(st, "{}", s) : s; };
  auto text = [&](int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); };
  const auto& o = a.options;
  fmt::print("{}\n", style(fmt::format("heads · {} · inverse {} · {} circuit{} · top {}{}", m.source(),
                                       vocablens::to_string(o.inverse), a.circuits.size(),
                                       a.circuits.size() == 1 ? "" : "s", o.top_k,
                                       a.allowed_tokens < a.vocab_size
                                           ? fmt::format(" · {} of {} tokens allowed", a.allowed_tokens, a.vocab_size)
                                           : ""),
                           fmt::emphasis::bold));
  fmt::print("ov: src = attended token, dst = token whose logit it raises · qk: src = query token, dst = key token\n");
  const bool compact = a.circuits.size() > 4;
  const int64_t shown = compact ? std::min<int64_t>(o.top_k, 6) : o.top_k;
  for (const auto& c : a.circuits) {
    std::string head = fmt::format("layer {} head {} · {}", c.layer, c.head, vocablens::to_string(c.kind));
    std::string spec = o.spectra ? fmt::format(" · copying score {:+.3f} (W_{} {:+.3f}) · σ₁ {:.4g}", c.copying_score,
                                               c.kind == vocablens::CircuitKind::OV ? "VO" : "QK",
                                               c.weight_copying_score,
                                               c.singular_values.empty() ? std::numeric_limits<double>::quiet_NaN()  // a NaN circuit
                                                                           : c.singular_values[0])
                                 : "";
    fmt::print("\n{}{}\n", style(head, fmt::emphasis::bold), spec);
    if (compact) {
      std::string line;
      for (int64_t q = 0; q < shown && q < static_cast<int64_t>(c.top.size()); ++q)
        line += (q ? "  " : "  ") + text(c.top[q].i) + "→" + text(c.top[q].j) + fmt::format(" {:.3g}", c.top[q].value);
      fmt::print("{}\n", line);
    } else {
      for (size_t q = 0; q < c.top.size(); ++q)
        // Issue #16: 4 significant digits ({:.4f} printed 0.0003 on every row of a small circuit).
        fmt::print("  {:>4}  {} → {} {:>10.4g}\n", q + 1, fit(text(c.top[q].i), 16), fit(text(c.top[q].j), 16),
                   c.top[q].value);
    }
    for (size_t s = 0; s < c.per_token.size(); ++s) {
      std::string line = fmt::format("  {} {} →", c.kind == vocablens::CircuitKind::OV ? "from" : "query",
                                     style(text(o.source_tokens[s]), fmt::fg(fmt::terminal_color::cyan)));
      for (const auto& e : c.per_token[s]) line += fmt::format("  {} {:.3g}", text(e.j), e.value);
      fmt::print("{}\n", line);
    }
  }
  if (compact && shown < o.top_k)
    fmt::print("\n(first {} of {} pairs per circuit shown; --format csv/json or --out DIR for all)\n", shown, o.top_k);
}

int run_heads(const HeadsCliOptions& co) {
  vocablens::HeadsOptions o;
  if (co.kind == "both") o.kinds = {vocablens::CircuitKind::OV, vocablens::CircuitKind::QK};
  else o.kinds = {vocablens::parse_circuit_kind(co.kind)};
  if (co.top_k < 1) throw UsageError("--top-k must be at least 1");
  if (co.per_token_k < 0) throw UsageError("--per-token-k must be >= 0");
  o.top_k = co.top_k;
  o.per_token_k = co.per_token_k;
  o.inverse = vocablens::parse_inverse_kind(co.inverse);
  o.pinv.rtol = co.pinv_rtol;
  o.drop_same_token = co.drop_same_token;
  o.drop_same_normalized = co.drop_same_word;
  o.filter = vocablens::cli::token_filter(co.tokens_flags);
  o.spectra = !co.no_spectra;
  o.prune = !co.no_prune;
  if (!co.out.out_dir.empty()) vocablens::ensure_directory(co.out.out_dir);

  vocablens::Model m = vocablens::load_model(co.model);
  auto tok = vocablens::cli::load_tokenizer(co.model, co.tokens_flags, !co.tokens.empty() || co.drop_same_word);
  for (const auto& s : co.tokens) o.source_tokens.push_back(resolve_token(*tok, s));
  for (int64_t id : co.token_ids) o.source_tokens.push_back(id);
  {
    // The read side E+ [d, V] (with the SVD that makes it) and the streamed tiles of the V x V circuit.
    const auto& cf = m.config();
    const double d = static_cast<double>(cf.d_model), V = static_cast<double>(cf.vocab_size);
    (void)d; (void)V;
    auto e = vocablens::cli::model_memory(m);
    e.add_phase(o.inverse == vocablens::InverseKind::Pinv ? "heads: E+ and its SVD, one tile of the V x V circuit"
                                                                   : "heads: the read side, one tile of the V x V circuit",
                (3 * d * V + 4 * 256 * V) * 4);
    if (auto rc = vocablens::cli::check_memory("heads", "the head circuits of " + m.source(), e, co.dry_run,
                                               "--inverse transpose (no pseudo-inverse)"))
      return *rc;
  }

  // Issue #16: the lists are read against the model's counts, checked before a range is expanded
  // ("--layer 0-99999999999" was expanded to 10^11 entries first).
  if (!co.layers.empty()) o.layers = vocablens::parse_index_list(co.layers, m.config().n_layers, "layer");
  if (!co.heads.empty()) o.heads = vocablens::parse_index_list(co.heads, m.config().n_heads, "head");
  vocablens::cli::ProgressBar bar("heads", "circuits");
  o.progress = bar.callback();
  auto a = vocablens::analyze_heads(m, o, tok.get());
  bar.finish();
  auto r = a.to_result(tok.get());
  vocablens::cli::fill_provenance(r, m);
  if (tok) r.provenance["tokenizer"] = tok->source();
  const bool color = vocablens::cli::use_color(co.out);
  vocablens::cli::emit(r, co.out, [&] {
    print_heads(a, tok.get(), m, color);
    if (co.verbose) {
      double dense = 0, gemm = 0, secs = 0;
      for (const auto& c : a.circuits) {
        dense += c.stats.dense_flops;
        gemm += c.stats.gemm_flops;
        secs += c.stats.seconds;
      }
      fmt::print("\nstreamed {:.3g} dense GFLOP ({:.1f}% multiplied after norm-bound pruning) in {:.2f} s\n", dense / 1e9,
                 dense > 0 ? 100 * gemm / dense : 0.0, secs);
    }
  });
  return 0;
}

vocablens::cli::Register reg{
    "heads",
    "Attention heads in vocabulary space: exact top-k token pairs of each OV / QK circuit, spectra, copying scores",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<HeadsCliOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      sub.add_option("--layer", o->layers, "Layers, e.g. 3 or 0,2-4 (default: all)");
      sub.add_option("--head", o->heads, "Heads, e.g. 7 or 0-3 (default: all)");
      sub.add_option("--kind", o->kind, "ov, qk or both (default both)")->check(CLI::IsMember({"ov", "qk", "both"}));
      sub.add_option("--top-k", o->top_k, "Token pairs per circuit (default 50)");
      sub.add_option("--inverse", o->inverse,
                     "Read side: pinv (exact E+, default), transpose (Dar et al.'s E^T approximation), embed (W_E)")
          ->check(CLI::IsMember({"pinv", "transpose", "embed"}));
      sub.add_option("--pinv-rtol", o->pinv_rtol, "Singular values below rtol*max are dropped from E+ (default 1e-6)");
      sub.add_option("--token", o->tokens, "Also list the best targets (ov) / keys (qk) of this token (repeatable)");
      sub.add_option("--token-id", o->token_ids, "Like --token, by id (repeatable)");
      sub.add_option("--per-token-k", o->per_token_k, "Length of the --token lists (default: --top-k)");
      sub.add_flag("--drop-same-token", o->drop_same_token, "Drop pairs (t, t)");
      sub.add_flag("--drop-same-word", o->drop_same_word,
                   "Drop pairs of tokens equal up to leading spaces and case (\" Paris\", \"paris\")");
      vocablens::cli::add_token_filter_options(sub, o->tokens_flags);
      sub.add_flag("--no-spectra", o->no_spectra, "Skip singular values, eigenvalues and copying scores");
      sub.add_flag("--no-prune", o->no_prune, "Multiply every tile (the results are identical; for timing)");
      sub.add_flag("--verbose", o->verbose, "Report the streamed work and time");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_heads(*o); };
    }};

}  // namespace
