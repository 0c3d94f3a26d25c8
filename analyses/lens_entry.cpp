// The logit lens's three analyses, their options declared once each, and the call every surface makes
// (vocablens/analysis_registry.hpp): `lens` (one prompt), `lens_corpus` (`lens --corpus FILE`: statistics over a
// text file) and `lens_batch` (`lens --prompts FILE`: many prompts, one result). The `vocablens lens` command
// offers the three through one set of flags (src/cli/cmd_lens.cpp).
#include <memory>

#include "entry_common.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens.hpp"

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
  }
  return lo;
}

void register_lens_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "lens";
  d.input = "prompt";
  d.summary = "Logit lens: every layer's residual through the final norm and unembedding (top-k, target rank, entropy, KL)";
  d.options = entry::prompt_decls();
  entry::append(d.options, {
      {"target", OptionType::Token, nullptr, "Target token for every position (its text, or #ID); default: the next token"},
      {"save_probs", OptionType::Flag, false,
       "Keep every layer's full log-distribution (log_probs [layers, T, V], float32) for compare's KL"},
      {"two_pass", OptionType::Flag, false,
       "Hold one layer at a time instead of every layer's residual [layers, T, d]: runs the forward twice and keeps "
       "the final distribution [T, V] (long prompts on large models; --dry-run shows both)"},
  });
  entry::append(d.options, reading_decls());
  r.add({std::move(d), [](const AnalysisRequest& q) {
           const auto ids = entry::prompt_of(q);
           auto r = logit_lens(q.model, ids, lens_options(q)).to_result(q.tok, entry::prompt_text(q, ids));
           if (entry::prompt_is_ids(q.options)) r.settings["prompt_ids"] = ids;  // the exact sequence read
           if (q.tok) {  // what `compare` checks: two runs read with one vocabulary
             r.provenance["tokenizer"] = q.tok->source();
             r.provenance["vocab_sha256"] = vocabulary_sha256(*q.tok);
           }
           return r;
         }});

  AnalysisDecl c;
  c.name = "lens_corpus";
  c.command = "lens";
  c.input = "corpus";
  c.summary = "Logit lens statistics per layer over a whole text file, streamed in context windows (`lens --corpus`)";
  c.options = {
      OptionDecl{"path", OptionType::Text, nullptr, "The text file (UTF-8), read and tokenised in chunks"}
          .as_required()
          .spelled("--corpus"),
      {"window", OptionType::Integer, nullptr, "Tokens per window (default: the model's context)", 2, 1e9},
      {"max_tokens", OptionType::Integer, nullptr, "Stop after this many predicted tokens (default: the whole file)", 1},
  };
  entry::append(c.options, reading_decls());
  r.add({std::move(c), [](const AnalysisRequest& q) {
           if (!q.tok) throw UsageError("lens_corpus: the model has no tokenizer to read the text with");
           CorpusLensOptions co = corpus_options(q);
           co.progress = [&q](uint64_t done, uint64_t total) {
             if (q.progress) q.progress(static_cast<int64_t>(done), static_cast<int64_t>(total));
           };
           auto res = logit_lens_corpus(q.model, *q.tok, q.options.at("path").get<std::string>(), co).to_result();
           res.provenance["tokenizer"] = q.tok->source();
           return res;
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
  r.add({std::move(b), [](const AnalysisRequest& q) {
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
