// vocablens/vocablens.hpp — everything a program needs to read a transformer in vocabulary space, in one include.
//
// The flow is one way: text → tokens (tokenizer.hpp) → the model and its hooks (model.hpp, hooks.hpp, cache.hpp)
// → an analysis (lens.hpp, heads.hpp, neurons.hpp, features.hpp, ...) → a Result (result.hpp) → files
// (export.hpp, report.hpp, notebook.hpp). Each header below opens with its concept, a usage example, shapes
// and guarantees; include just the ones you use to keep compile times down, or this one to explore.
//
//   #include <vocablens/vocablens.hpp>
//
//   vocablens::Model m = vocablens::load_model("gpt2/");              // HF directory, .bin, GGUF, llama2.c
//   auto tok = vocablens::load_tokenizer_for("gpt2/");
//   auto lens = vocablens::logit_lens(m, tok->encode("The Eiffel Tower is in"), {});
//   vocablens::write_result(lens.to_result(tok.get(), "The Eiffel Tower is in"), "runs/eiffel");
//
// Not included: the building blocks that only the CLI needs (interrupt.hpp, timings.hpp, dist.hpp,
// analysis_registry.hpp, options.hpp); include them by name when you need them. Under vocablens/detail/ are the
// library's own helpers (atomic files, SHA-256, XXH64, the config hash, the signal side of interrupt.hpp, the
// lens engine), installed because the CLI, the Python module and the tests use them, but not part of the interface.
#pragma once

// Errors and plain data (no LibTorch).
#include "vocablens/error.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/arch.hpp"
#include "vocablens/result.hpp"
#include "vocablens/result_kinds.hpp"
#include "vocablens/provenance.hpp"
#include "vocablens/npy.hpp"

// Tokenizers.
#include "vocablens/tokenizer.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/wordpiece_tokenizer.hpp"
#include "vocablens/sentencepiece_tokenizer.hpp"
#include "vocablens/llama2c_tokenizer.hpp"
#include "vocablens/vocab_spec.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/token_filter.hpp"

// Checkpoints and the runner.
#include "vocablens/tensor_store.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/tuned_lens_checkpoint.hpp"
#include "vocablens/weight.hpp"
#include "vocablens/model.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/cache_spec.hpp"
#include "vocablens/cache.hpp"
#include "vocablens/forward_memo.hpp"
#include "vocablens/kv_cache.hpp"
#include "vocablens/attention.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/memory_estimate.hpp"

// Linear algebra the analyses share.
#include "vocablens/linalg/cosine.hpp"
#include "vocablens/linalg/factored.hpp"
#include "vocablens/linalg/gram.hpp"
#include "vocablens/linalg/pinv.hpp"
#include "vocablens/linalg/topk_stream.hpp"
#include "vocablens/unembed.hpp"

// Analyses.
#include "vocablens/lens.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/tuned_lens_train.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/transcoders.hpp"
#include "vocablens/features.hpp"
#include "vocablens/graph.hpp"
#include "vocablens/project.hpp"
#include "vocablens/attribution.hpp"
#include "vocablens/patching.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/knn.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/positions.hpp"

// Training from scratch.
#include "vocablens/train.hpp"
#include "vocablens/bpe_trainer.hpp"
#include "vocablens/wordpiece_trainer.hpp"
#include "vocablens/glove.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/planted.hpp"

// Results out.
#include "vocablens/export.hpp"
#include "vocablens/report.hpp"
#include "vocablens/notebook.hpp"
