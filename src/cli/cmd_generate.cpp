// `vocablens generate MODEL --steps N`: greedy decoding, printed as text (like llama2.c's run.c -t 0).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "cli/memory_check.hpp"
#include "cli/token_arg.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/error.hpp"
#include "vocablens/experts.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/model.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_steer.hpp"
#include "vocablens/timings.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct GenerateOptions {
  std::string model;
  std::string tokenizer;
  std::string prompt;
  std::vector<int64_t> prompt_ids;
  int64_t steps = 64;
  int64_t runc_n = -1;   // -n: run.c's meaning (positions incl. the prompt); -1 = not given
  int64_t stop_id = -2;  // -2: the model's convention; -1: never stop early
  bool print_ids = false;
  bool dry_run = false;
  std::string steer;        // "love-hate": add scale * (E[love] - E[hate]) to the residual stream
  int64_t steer_layer = 0;  // read only when typed (steer_layer_given); default n_layers / 2
  bool steer_layer_given = false;
  double steer_scale = 0;     // the `steer` analysis's declared default (analyses/steer_entry.cpp)
  bool steer_given = false;   // --steer-layer or --steer-scale typed
  std::string sae, sae_hook;  // --sae: steer with a feature's decoder direction instead
  int64_t steer_feature = -1;
  double feature_scale = 4.0;
  bool feature_scale_given = false;
  std::vector<std::string> scale_expert;  // "L.E=FACTOR": a mixture's expert's output scaled where chosen
};

// --steer "A-B": the steering vector W_E[A] - W_E[B]. A word without a leading space is looked up as the
// mid-sentence token " A" first (GPT-2 style), then as "A"; "#ID" names a token by id.
at::Tensor steering_vector(const vocablens::Model& m, const vocablens::Tokenizer* tok, const std::string& spec,
                           std::string& shown) {
  if (!tok) throw vocablens::UsageError("--steer needs the model's tokenizer (use --tokenizer)");
  const size_t dash = spec.find('-', 1);
  if (dash == std::string::npos || dash + 1 >= spec.size())
    throw vocablens::UsageError("--steer expects PLUS-MINUS, e.g. --steer \"love-hate\" (got '" + spec + "')");
  auto side = [&](const std::string& w) -> int64_t {
    if (w.empty() || w[0] == ' ' || w[0] == '#') return vocablens::cli::resolve_token(*tok, w, "--steer");
    if (auto id = tok->token_to_id(" " + w)) return *id;
    return vocablens::cli::resolve_token(*tok, w, "--steer");
  };
  const int64_t plus = side(spec.substr(0, dash)), minus = side(spec.substr(dash + 1));
  shown = "E[" + tok->display(plus) + "] - E[" + tok->display(minus) + "]";
  return vocablens::embedding_difference(m, plus, minus);
}

int run_generate(const GenerateOptions& o) {
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  const auto& c = m.config();
  std::unique_ptr<vocablens::Tokenizer> tok;
  try {
    vocablens::timings::Phase phase("load");
    tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  } catch (const vocablens::FormatError& e) {
    if (!o.tokenizer.empty() || !o.prompt.empty()) throw;  // asked for explicitly: an error
  }
  std::vector<int64_t> prompt = o.prompt_ids;
  if (!o.prompt.empty()) {
    if (!prompt.empty()) throw vocablens::UsageError("give either --prompt or --prompt-ids, not both");
    vocablens::timings::Phase phase("tokenise");
    prompt = tok->encode(o.prompt);  // llama2.c vocabularies add BOS themselves, as run.c does
  }
  if (prompt.empty()) {
    int64_t bos = tok ? tok->bos_id() : c.bos_token_id;
    if (bos < 0) bos = c.bos_token_id;
    if (bos < 0) throw vocablens::UsageError("the model has no BOS token: give --prompt or --prompt-ids");
    prompt = {bos};
  }
  if (o.steps < 0) throw vocablens::UsageError("--steps must be >= 0");
  if (static_cast<int64_t>(prompt.size()) > c.n_ctx)
    throw vocablens::UsageError("the prompt has " + std::to_string(prompt.size()) +
                                " tokens, longer than the model's context of " + std::to_string(c.n_ctx));
  int64_t steps = o.steps;
  if (o.runc_n >= 0) {
    // run.c: -n counts positions from the first prompt token (0 or more than seq_len: seq_len); the token
    // predicted at the last position is printed, so it prints n - (prompt length - 1) new tokens.
    const int64_t n = o.runc_n == 0 || o.runc_n > c.n_ctx ? c.n_ctx : o.runc_n;
    steps = std::max<int64_t>(0, n - (static_cast<int64_t>(prompt.size()) - 1));
  }
  {
    // At most the context: a full pass over every position (steering runs full passes; plain decoding runs
    // the prompt, then one position per step) beside the keys and values of every position.
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(prompt.size()) + steps, c.n_ctx);
    auto e = vocablens::estimate_forward_memory(m, 1, T, vocablens::CacheSpec::none(), true);
    e.add(fmt::format("KV cache [{} positions]", T), vocablens::kv_cache_bytes(c, 1, T));
    if (auto rc = vocablens::cli::check_memory("generate", fmt::format("generation up to {} positions with {}", T, m.source()), e,
                                               o.dry_run, "lower --steps or shorten the prompt"))
      return *rc;
  }
  // llama2.c's run.c ends a sample when the model emits BOS; Hugging Face models end at EOS.
  int64_t stop = o.stop_id;
  if (stop == -2) stop = c.architecture == "llama2.c" ? c.bos_token_id : c.eos_token_id;
  if (o.steer_feature >= 0 && o.sae.empty()) throw vocablens::UsageError("--steer-feature needs --sae PATH");
  if (!o.sae.empty() && o.steer_feature < 0)
    throw vocablens::UsageError("--sae needs --steer-feature N (the feature to steer with)");
  if (o.feature_scale_given && o.steer_feature < 0) throw vocablens::UsageError("--scale needs --sae PATH --steer-feature N");
  if (o.steer_feature >= 0 && !o.steer.empty()) throw vocablens::UsageError("give --steer or --steer-feature, not both");
  if (o.steer.empty() && o.steer_given) throw vocablens::UsageError("--steer-layer and --steer-scale need --steer PLUS-MINUS");
  // Parsed before any decoding: a dense model or a bad spec is refused in one line.
  const auto scales = vocablens::parse_expert_scales(o.scale_expert, c, m.source());
  if (!scales.empty() && (o.steer_feature >= 0 || !o.steer.empty()))
    throw vocablens::UsageError("give --scale-expert or --steer / --steer-feature, not both");
  // Steered text means little alone: the unsteered continuation of the same prompt is printed above it.
  std::vector<int64_t> ids, plain;
  std::string steer_label;
  if (o.steer_feature >= 0) {
    vocablens::SaeLoadOptions lo;
    lo.hook_name = o.sae_hook;
    vocablens::Sae sae = vocablens::load_sae(o.sae, lo);
    vocablens::check_sae_fits(sae, m);
    const std::string hook = vocablens::sae_write_hook(sae);
    const double norm = vocablens::feature_direction(sae, o.steer_feature).norm().item<double>();
    fmt::print(stderr, "steering: {:+g} x W_dec[{}] of {} added to {} at every position (|W_dec[{}]| = {:.4f})\n",
               o.feature_scale, o.steer_feature, sae.source, hook, o.steer_feature, norm);
    plain = m.generate_greedy(prompt, steps, stop);
    ids = vocablens::generate_greedy_with_hooks(m, prompt, steps, stop,
                                                vocablens::feature_steering_hooks(sae, o.steer_feature, o.feature_scale));
    steer_label = fmt::format("steered ({:+g} x feature {}, {})", o.feature_scale, o.steer_feature, hook);
  } else if (!o.steer.empty()) {
    std::string shown;
    at::Tensor v = steering_vector(m, tok.get(), o.steer, shown);
    // As the `steer` analysis reads its layer over HTTP and in Python: negative counts from the end (-1 =
    // the last block), so one number means one layer on every surface.
    const int64_t L = c.n_layers;
    if (o.steer_layer_given && (o.steer_layer < -L || o.steer_layer >= L))
      throw vocablens::UsageError("--steer-layer " + std::to_string(o.steer_layer) + " is out of range (the model has " +
                                  std::to_string(L) + " layers: 0.." + std::to_string(L - 1) + ", or -1..-" + std::to_string(L) +
                                  " from the end)");
    const int64_t layer = !o.steer_layer_given ? L / 2 : o.steer_layer < 0 ? o.steer_layer + L : o.steer_layer;
    fmt::print(stderr, "steering: {:+g} x ({}) added to blocks.{}.hook_resid_pre at every position (|v| = {:.4f})\n",
               o.steer_scale, shown, layer, v.norm().item<double>());
    plain = m.generate_greedy(prompt, steps, stop);
    ids = vocablens::generate_greedy_with_hooks(m, prompt, steps, stop, vocablens::steering_hooks(v, layer, o.steer_scale));
    steer_label = fmt::format("steered ({:+g} x {}, layer {})", o.steer_scale, shown, layer);
  } else if (!scales.empty()) {
    vocablens::HookList hooks;
    vocablens::add_expert_scales(hooks, scales);
    std::vector<std::string> shown;
    for (const auto& x : scales) shown.push_back(fmt::format("{}.{}={}", x.layer, x.expert, x.factor));
    fmt::print(stderr, "steering: router weight of expert LAYER.EXPERT times FACTOR where chosen: {}\n", fmt::join(shown, ", "));
    plain = m.generate_greedy(prompt, steps, stop);
    ids = vocablens::generate_greedy_with_hooks(m, prompt, steps, stop, hooks);
    steer_label = fmt::format("steered (experts {})", fmt::join(shown, ", "));
  } else {
    ids = m.generate_greedy(prompt, steps, stop);
  }
  auto trim = [&](std::vector<int64_t>& x) {
    if (!x.empty() && x.back() == stop && stop >= 0 && x.size() > prompt.size()) x.pop_back();
  };
  trim(ids);
  trim(plain);
  vocablens::timings::Phase phase("write");
  if (o.print_ids || !tok) {
    if (!tok) std::cerr << "vocablens: no tokenizer found beside the model; printing ids (use --tokenizer)\n";
    if (!steer_label.empty()) {
      fmt::print("unsteered: {}\n", fmt::join(plain, " "));
      fmt::print("{}: {}\n", steer_label, fmt::join(ids, " "));
    } else {
      fmt::print("{}\n", fmt::join(ids, " "));
    }
    return 0;
  }
  auto put = [](const std::string& label, const std::string& text) {
    if (!label.empty()) std::fputs((label + ": ").c_str(), stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  };
  if (!steer_label.empty()) put("unsteered", tok->decode(plain));
  put(steer_label, tok->decode(ids));
  return 0;
}

vocablens::cli::Register registered_cmd_generate{
    "generate", "Greedy decoding from a prompt (default: BOS), printed as text", [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<GenerateOptions>();
      sub.add_option("MODEL", o->model, vocablens::cli::kModelHelp)->required();
      auto* steps = sub.add_option("--steps", o->steps,
                                   "Number of NEW tokens to generate after the prompt (stops earlier at the stop token or "
                                   "when the context is full: as run.c, the token predicted at the last position is kept)")
                        ->capture_default_str();
      sub.add_option("-n", o->runc_n,
                     "run.c's -n: positions to run counting the prompt (prints n - prompt tokens + 1 new tokens; "
                     "0 or more than the context = the context). Unlike --steps, which counts new tokens only")
          ->excludes(steps)
          ->check(CLI::NonNegativeNumber);  // -5 is a mistake, not "unset" (exit 2)
      sub.add_option("--prompt,-p", o->prompt, "Prompt text (encoded with the model's tokenizer)");
      sub.add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids, e.g. --prompt-ids 1 403 407")->delimiter(',');
      sub.add_option("--tokenizer,-z", o->tokenizer, "Tokenizer file or directory when it is not beside the model");
      sub.add_option("--stop-id", o->stop_id,
                     "Stop when this id is generated (default: BOS for llama2.c models as run.c does, EOS otherwise; -1: never)");
      sub.add_flag("--ids", o->print_ids, "Print token ids instead of text");
      sub.add_flag("--dry-run", o->dry_run, vocablens::cli::kDryRunHelp);
      sub.add_option("--steer", o->steer,
                     "Steer with PLUS-MINUS, e.g. \"love-hate\": adds scale * (W_E[ love] - W_E[ hate]) to the residual "
                     "stream entering --steer-layer, at every position");
      // The steering parameters are the `steer` analysis's (Python's vocablens.steer): help and defaults from there.
      const auto& steer = vocablens::find_analysis("steer").decl;
      o->steer_scale = steer.find("scale")->default_value.get<double>();
      auto* steer_layer = sub.add_option("--steer-layer", o->steer_layer, steer.find("layer")->help);
      auto* steer_scale = sub.add_option("--steer-scale", o->steer_scale, steer.find("scale")->help)->capture_default_str();
      sub.add_option("--sae", o->sae,
                     "With --steer-feature: the SAE or transcoder whose feature steers (any layout "
                     "`vocablens features` reads)");
      // --hook as `features --hook` spells it; --sae-hook, the older name, is the same option.
      sub.add_option("--hook,--sae-hook", o->sae_hook,
                     "Hook point the SAE reads (overrides the file's or the guessed one), as `features --hook`");
      sub.add_option("--steer-feature", o->steer_feature,
                     "Steer with this SAE feature: adds scale * W_dec[N] at the SAE's hook (a transcoder: where it "
                     "writes), at every position; the unsteered text is printed too")
          ->check(CLI::NonNegativeNumber);
      auto* fscale = sub.add_option("--scale", o->feature_scale,
                                    "With --steer-feature: the multiplier s of W_dec[N] "
                                    "(default 4; negative subtracts it)");
      sub.add_option("--scale-expert", o->scale_expert,
                     "Mixtures of experts: multiply expert LAYER.EXPERT's output by FACTOR wherever the router chose "
                     "it, e.g. 1.5=2 (its router weight times FACTOR; 0 removes it); repeatable; the unscaled text is "
                     "printed too");
      return [o, fscale, steer_layer, steer_scale] {
        o->feature_scale_given = fscale->count() > 0;
        o->steer_layer_given = steer_layer->count() > 0;
        o->steer_given = o->steer_layer_given || steer_scale->count() > 0;
        return run_generate(*o);
      };
    }};

}  // namespace
