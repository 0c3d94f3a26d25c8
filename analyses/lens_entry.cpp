// The logit lens's three analyses, their options declared once each, and the call every surface makes
// (vocablens/analysis_registry.hpp): `lens` (one prompt), `lens_corpus` (`lens --corpus FILE`: statistics over a
// text file) and `lens_batch` (`lens --prompts FILE`: many prompts, one result). The `vocablens lens` command
// offers the three through one set of flags (src/cli/cmd_lens.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "entry_common.hpp"
#include "model/bf16_gemm.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/detail/lens_engine.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/compare.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/experts.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/weight.hpp"

namespace vocablens::entries {

namespace {

// The options the three forms share: how each layer is read.
std::vector<OptionDecl> reading_decls() {
  return {
      {"top_k", OptionType::Integer, 10, "Tokens reported per layer and position (0 = none)", 0, 1e6},
      {"resid_mid", OptionType::Flag, false, "Also lens the residual between attention and MLP of every block"},
      OptionDecl{"unembed", OptionType::Choice, "model",
                 "model (W_U) or pinv (E+, the pseudo-inverse of W_U^T; = pinv(W_E) when tied)"}
          .with_choices({"model", "pinv"}),
      {"decoder_blocks", OptionType::Integer, 0, "Treat the last k blocks as part of the decoder", 0, 1e6},
      {"tuned", OptionType::Text, nullptr,
       "Read every layer through a tuned lens's translators (a directory from `vocablens tuned-lens train`, or the "
       "tuned-lens package's params.pt + config.json)"},
  };
}

// The peak memory of the lens of T tokens (vocablens/analysis_estimate.hpp): the forward records nothing (each
// lens layer is normalised into the stack by a hook as it is produced), the stack [n, T, d] lives through the
// forward and the lens, then one block of logits (lens_detail::default_block_positions: 512-1024 rows of all
// layers, at most 256 MiB when more than 512 rows) at a time. With two_pass: the final distribution [T, V]
// instead of the stack, one layer's logit block at a time (and, for a tuned lens or decoder blocks, one
// normalised layer [T, d]).
AnalysisEstimate lens_estimate(const AnalysisRequest& q, int64_t T) {
  const auto& ro = q.options;
  const Model& m = q.model;
  // save_probs and two_pass are the one-prompt form's (lens_corpus and lens_batch declare neither).
  const bool resid_mid = ro.at("resid_mid").get<bool>(),
             save_probs = ro.contains("save_probs") && ro.at("save_probs").get<bool>(),
             two_pass = ro.contains("two_pass") && ro.at("two_pass").get<bool>(),
             pinv = ro.at("unembed").get<std::string>() == "pinv";
  const auto& c = m.config();
  const double n = static_cast<double>(c.n_layers + 1 + (resid_mid ? c.n_layers : 0)), d = static_cast<double>(c.d_model);
  const double V = static_cast<double>(c.vocab_size), Td = static_cast<double>(T),
               k = static_cast<double>(ro.at("top_k").get<int64_t>());
  // One pass: the logit blocks follow the forward (a phase; the forward's freed heap is trimmed in between).
  // Two passes: each layer's block is made by a hook while the forward runs, so both are resident together.
  // Under bfloat16 compute with a W_U not stored as float32 the block's product is a bf16 GEMM
  // (LensEngine::logits_into): the bf16 activations and result beside the float32 block, and where the CPU has
  // no AVX-512 (src/model/bf16_gemm.hpp) the float32 activations, one widened column block of W_U (<= 4 M values)
  // and its float32 product.
  const bool bf16 = compute_dtype() == ComputeDtype::BFloat16;
  const bool bf16_product = bf16 && m.weights().W_U.scalar_type() != at::kFloat && !pinv;
  // Under int8 compute a quantized W_U is multiplied in place (LensEngine): the product [R, V] is made beside the
  // block it is copied into, with the rows' int8 quantization (~1.1 bytes a value).
  const bool int8_w = !pinv && int8_product(m.weights().W_U);
  auto stats_and_block = [&](MemoryEstimate& e, double layers_per_block) {
    e.add("lens: per-position results", n * Td * (k * 12 + 64) + (save_probs ? n * Td * V * 4 : 0.0));
    const double rows =
        layers_per_block * static_cast<double>(std::min<int64_t>(
                               T, lens_detail::default_block_positions(static_cast<int64_t>(layers_per_block), c.vocab_size)));
    const double R = std::max(layers_per_block, rows);
    double block = R * (V + d) * 4;
    if (bf16_product) {
      block += R * (V + d) * 2;
      if (!detail::bf16_gemm_libtorch()) {
        const double cols = std::min(V, std::max(1.0, std::floor(static_cast<double>(detail::kBf16WidenValues) / d)));
        block += R * d * 4 + d * cols * 4 + R * cols * 4;
      }
    }
    if (int8_w) block += R * V * 4 + R * d * 1.2;
    const std::string with = bf16_product ? " (and its bfloat16 product)" : int8_w ? " (and its int8 product)" : "";
    if (layers_per_block > 1) e.add_phase("lens: one logit block" + with, block);
    else e.add("lens " + q.spelled("two_pass") + ": one layer's logit block" + with + ", made during the forward", block);
  };
  // The projection matrix the engine holds for the whole run (LensEngine's constructor): E+ [d, V] float32 with
  // unembed pinv; else W_U in place when stored as float32 (or bfloat16 under bfloat16 compute), otherwise a
  // copy — float32, or bfloat16 (made from a transient float32 one).
  auto projection = [&](MemoryEstimate& e) {
    const at::Tensor& stored = m.weights().W_U;
    if (pinv) {
      e.add("lens: E⁺ [d, V] as float32", d * V * 4);
      // computed unless cached (linalg/pinv.cpp): E as float32, one float64 chunk of 8192 rows and its product,
      // the d x d Gram matrix, eigenvectors, workspace and the kept projector
      e.add_phase("lens: E⁺ computed when not cached",
                  (stored.scalar_type() == at::kFloat ? 0.0 : d * V * 4) + 2 * 8192 * d * 8 + 5 * d * d * 8);
    } else if (bf16 && stored.scalar_type() != at::kFloat && stored.scalar_type() != at::kBFloat16) {
      e.add("lens: W_U as bfloat16 (stored as " + weight_storage_name(stored) + ")", d * V * 2);
      e.add_phase("lens: W_U's float32 copy, converted to bfloat16", d * V * 4);
    } else if (!bf16 && stored.scalar_type() != at::kFloat && !int8_w) {
      e.add("lens: W_U as float32 (stored as " + weight_storage_name(stored) + ")", d * V * 4);
    }
  };
  MemoryEstimate one_pass = estimate_forward_memory(m, 1, T, CacheSpec::none(), false);
  one_pass.add("lens: normalised residuals [layers, T, d]", n * Td * d * 4);
  projection(one_pass);
  stats_and_block(one_pass, n);
  MemoryEstimate two = estimate_forward_memory(m, 1, T, CacheSpec::none(), false);
  projection(two);
  two.add("lens " + q.spelled("two_pass") + ": the final distribution [T, V]", Td * V * 4);
  if (!ro.at("tuned").is_null() || ro.at("decoder_blocks").get<int64_t>() > 0)
    two.add("lens " + q.spelled("two_pass") + ": one normalised layer [T, d]", Td * d * 4);
  stats_and_block(two, 1);

  AnalysisEstimate e;
  e.memory = two_pass ? two : one_pass;
  e.what = fmt::format("the lens of {} tokens of {}", T, m.source());
  // How to need less, as each surface spells it (the HTTP API reads no files, so no corpus there).
  const bool cli = q.surface == Surface::Cli, http = q.surface == Surface::Http;
  e.reduce = std::string("give a shorter prompt") +
             (cli    ? ", or --corpus FILE --window N to read it in windows"
              : http ? ""
                     : ", or read it in windows with lens_corpus (path, window)") +
             (save_probs ? ", or leave out " + q.spelled("save_probs") : "");
  if (ro.contains("two_pass") && !two_pass && !save_probs && two.total() < one_pass.total()) {
    const std::string on = cli ? q.spelled("two_pass") : q.spelled("two_pass") + (http ? ": true" : "=True");
    e.reduce += fmt::format(", or {} (about {:.0f} MiB: two forwards, one layer held at a time)", on, two.total() / 1048576.0);
    e.note = fmt::format("with {}: about {:.1f} MiB (the forward runs twice; one layer's residual held at a time)",
                         q.spelled("two_pass"), two.total() / 1048576.0);
  }
  return e;
}

}  // namespace

LensOptions lens_options(const AnalysisRequest& q) {
  const auto& o = q.options;
  LensOptions lo;
  lo.top_k = o.at("top_k").get<int64_t>();
  lo.resid_mid = o.at("resid_mid").get<bool>();
  if (o.contains("save_probs")) lo.save_log_probs = o.at("save_probs").get<bool>();
  if (o.contains("two_pass")) lo.two_pass = o.at("two_pass").get<bool>();
  lo.unembed = o.at("unembed").get<std::string>() == "pinv" ? LensUnembed::PseudoInverse : LensUnembed::Model;
  lo.decoder_blocks = o.at("decoder_blocks").get<int64_t>();
  if (o.contains("target") && !o.at("target").is_null()) lo.target = entry::token_of(q, o.at("target"), "target");
  if (!o.at("tuned").is_null()) {
    auto tuned = std::make_shared<TunedLens>(load_tuned_lens(o.at("tuned").get<std::string>()));
    tuned->check_model(q.model);
    lo.tuned = tuned;
    lens_detail::validate_options(q.model, lo);  // a refused combination is said before the warning below
    if (!tuned->matches_unembedding(q.model))
      std::fprintf(stderr,
                   "vocablens: warning: the tuned lens %s was trained on a model with another unembedding than %s "
                   "(same shapes; fine for a fine-tune of that model, meaningless otherwise)\n",
                   o.at("tuned").get<std::string>().c_str(), q.model.source().c_str());
  }
  return lo;
}

void register_lens_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "lens";
  d.input = "prompt";
  d.summary = "Logit lens: every layer's residual through the final norm and unembedding (top-k, target rank, entropy, KL)";
  d.options = entry::prompt_decls();
  entry::append(
      d.options,
      {
          {"target", OptionType::Token, nullptr, "Target token for every position (its text, or #ID); default: the next token"},
          {"save_probs", OptionType::Flag, false,
           "Keep every layer's full log-distribution (log_probs [layers, T, V], float32) for compare's KL"},
          {"two_pass", OptionType::Flag, false,
           "Hold one layer at a time instead of every layer's residual [layers, T, d]: runs the forward twice and keeps "
           "the final distribution [T, V] (long prompts on large models; --dry-run shows both)"},
      });
  entry::append(d.options, reading_decls());
  entry::append(d.options, entry::expert_ablation_decls());
  // A click on a cell after the lens runs no block: the server replays the prompt's forward.
  d.reads_forward_only = true;
  // The answer's largest array, top_ids: top_k entries per position and lensed layer.
  d.answer_size = [](const nlohmann::json& o, const ModelConfig& cfg, double positions) {
    const double k = static_cast<double>(o.at("top_k").get<int64_t>());
    const double layers = static_cast<double>(cfg.n_layers + 1) * (o.at("resid_mid").get<bool>() ? 2 : 1);
    return AnswerSize{k * positions * layers,
                      fmt::format("top_k {:.0f} × {:.0f} positions × {:.0f} layers", k, positions, layers)};
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           const auto ids = entry::prompt_of(q);
           LensOptions lo = lens_options(q);
           const auto edits = entry::expert_interventions_of(q);
           lo.interventions = edits.hooks;
           auto r = logit_lens(q.model, ids, lo).to_result(q.tok, entry::prompt_text(q, ids));
           r.settings.update(edits.settings);  // the lens of another forward than the model's own: it says which
           if (entry::prompt_is_ids(q.options)) r.settings["prompt_ids"] = ids;  // the exact sequence read
           if (q.tok) {  // what `compare` checks: two runs read with one vocabulary
             r.provenance["tokenizer"] = q.tok->source();
             r.provenance["vocab_sha256"] = vocabulary_sha256(*q.tok);
           }
           return r;
         },
         [](const AnalysisRequest& q) { return lens_estimate(q, static_cast<int64_t>(entry::prompt_of(q).size())); }});

  AnalysisDecl c;
  c.name = "lens_corpus";
  c.command = "lens";
  c.input = "corpus";
  c.summary = "Logit lens statistics per layer over a whole text file, streamed in context windows (`lens --corpus`)";
  c.options = {
      OptionDecl{"path", OptionType::Text, nullptr, "The text file (UTF-8), read and tokenised in chunks"}.as_required().spelled(
          "--corpus"),
      {"window", OptionType::Integer, nullptr, "Tokens per window (default: the model's context)", 2, 1e9},
      {"max_tokens", OptionType::Integer, nullptr, "Stop after this many predicted tokens (default: the whole file)", 1},
  };
  entry::append(c.options, reading_decls());
  r.add({std::move(c),
         [](const AnalysisRequest& q) {
           if (!q.tok) throw UsageError("lens_corpus: the model has no tokenizer to read the text with");
           CorpusLensOptions co = corpus_options(q);
           co.progress = [&q](uint64_t done, uint64_t total) {
             if (q.progress) q.progress(static_cast<int64_t>(done), static_cast<int64_t>(total));
           };
           auto res = logit_lens_corpus(q.model, *q.tok, q.options.at("path").get<std::string>(), co).to_result();
           res.provenance["tokenizer"] = q.tok->source();
           return res;
         },
         // One window at a time: the lens of W tokens (the per-window sums are a few numbers per layer).
         [](const AnalysisRequest& q) {
           const int64_t n_ctx = q.model.config().n_ctx;
           const auto& w = q.options.at("window");
           const int64_t W = w.is_null() ? n_ctx : std::min<int64_t>(w.get<int64_t>(), n_ctx);
           AnalysisEstimate e = lens_estimate(q, W);
           e.what = fmt::format("the lens of {} in windows of {} tokens of {}", q.options.at("path").get<std::string>(), W,
                                q.model.source());
           e.reduce = q.spelled("window") + " (shorter windows)";
           return e;
         }});

  AnalysisDecl b;
  b.name = "lens_batch";
  b.command = "lens";
  b.input = "prompts";
  b.summary = "Logit lens over many prompts: one result with a prompt axis and a per-layer table (`lens --prompts`)";
  b.options = {
      OptionDecl{"prompts", OptionType::Text, nullptr,
                 "A prompts file: one prompt per line, or JSON Lines {\"prompt\": ..., \"target\": ...}"}
          .as_required()
          .spelled("--prompts"),
      {"bos", OptionType::Flag, nullptr, "Prepend the BOS token (default: the tokenizer's convention; llama2.c adds it)"},
  };
  entry::append(b.options, reading_decls());
  r.add({std::move(b),
         [](const AnalysisRequest& q) {
           if (!q.tok) throw UsageError("lens_batch: the model has no tokenizer to read the prompts with");
           const std::string path = q.options.at("prompts").get<std::string>();
           auto prompts = read_lens_prompts(path);
           EncodeOptions eo;
           if (q.options.at("bos").is_boolean()) eo.add_bos = q.options.at("bos").get<bool>();
           auto progress = [&q](size_t done, size_t total) {
             if (q.progress) q.progress(static_cast<int64_t>(done), static_cast<int64_t>(total));
           };
           auto batch = logit_lens_batch(q.model, *q.tok, prompts, lens_options(q), eo, progress);
           batch.source = path;
           auto res = batch.to_result(q.tok);
           res.provenance["tokenizer"] = q.tok->source();
           return res;
         },
         // The lens of the longest prompt (T tokens), a chunk's cached residuals (logit_lens_batch: at most 64
         // prompts and about 256 MB per forward) and every prompt's results, padded to T.
         [](const AnalysisRequest& q) {
           if (!q.tok) throw UsageError("lens_batch: the model has no tokenizer to read the prompts with");
           const std::string path = q.options.at("prompts").get<std::string>();
           const auto prompts = read_lens_prompts(path);
           EncodeOptions eo;
           if (q.options.at("bos").is_boolean()) eo.add_bos = q.options.at("bos").get<bool>();
           int64_t T = 1;
           for (const auto& p : prompts) T = std::max<int64_t>(T, static_cast<int64_t>(q.tok->encode(p.prompt, eo).size()));
           T = std::min<int64_t>(T, q.model.config().n_ctx);
           AnalysisEstimate e = lens_estimate(q, T);
           const auto& c = q.model.config();
           const double n = static_cast<double>(c.n_layers + 1 + (q.options.at("resid_mid").get<bool>() ? c.n_layers : 0));
           const double P = static_cast<double>(prompts.size()), Td = static_cast<double>(T);
           const double k = static_cast<double>(q.options.at("top_k").get<int64_t>());
           e.memory.add("lens_batch: one chunk's cached residuals",
                        std::min(256.0 * 1048576.0, std::min(64.0, P) * Td * n * static_cast<double>(c.d_model) * 4));
           e.memory.add("lens_batch: every prompt's results", P * n * Td * (k * 12 + 64));
           e.what = fmt::format("the lens of {} prompts of up to {} tokens of {}", prompts.size(), T, q.model.source());
           e.reduce = "fewer or shorter prompts, or a smaller " + q.spelled("top_k");
           return e;
         }});
}

CorpusLensOptions corpus_options(const AnalysisRequest& q) {
  CorpusLensOptions co;
  co.lens = lens_options(q);
  const auto& o = q.options;
  if (!o.at("window").is_null()) co.window = o.at("window").get<int64_t>();
  if (!o.at("max_tokens").is_null()) co.max_tokens = o.at("max_tokens").get<int64_t>();
  return co;
}

}  // namespace vocablens::entries
