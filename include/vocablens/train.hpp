// vocablens/train.hpp — training small models from scratch with LibTorch and Adam, written as ordinary
// model directories that every vocablens analysis reads like a downloaded model.
//
// Models (TrainModel):
//  - EmbedLM  — the minimal next-token model z = E[x] W + b: tied (W = Eᵀ) or untied (W its own [d, V]).
//  - SkipGram — word2vec skip-gram with negative sampling: centre vector · context vector.
//  - CBOW     — word2vec continuous bag of words with negative sampling: mean of context vectors · centre.
//  - GloVe    — global co-occurrence vectors (glove.hpp): counts in a 1/distance-weighted window, then
//               AdaGrad on the weighted least-squares fit of log X; one step = one epoch.
//  - GPT      — a small GPT-2-architecture transformer (LayerNorm, gelu_new, biases, tied or untied
//               unembedding) with positions learned | sinusoidal | rope | alibi | none. It is trained
//               through vocablens::run_forward, the runner's own forward pass, so the trained model runs
//               identically in every analysis.
//
// Output directory (out_dir):
//   config.json          GPT: GPT2LMHeadModel, plus "vocablens_positions" for non-learned positions
//                        (the runner reads it; no wpe.weight is written then). EmbedLM: architecture
//                        "VocablensEmbedLM"; SkipGram/CBOW: "VocablensSkipGram" / "VocablensCBOW".
//   model.safetensors    GPT / EmbedLM weights under GPT-2 names (wte.weight, h.0.attn.c_attn.weight, ...,
//                        lm_head.weight only when untied, lm_head.bias for EmbedLM), F32.
//   embeddings.safetensors + embeddings.npy   GloVe: "embeddings" = W + W̃, "word_vectors", "context_embeddings",
//                        "bias", "context_bias" (glove.hpp). SkipGram/CBOW: "embeddings" [V, d] (the word vectors) and
//                        "context_embeddings" [V, d]; the .npy holds the word vectors.
//   vocab.json, merges.txt   the tokenizer (GPT-2 byte-level BPE trained on the corpus, bpe_trainer.hpp),
//                        or vocab.txt + tokenizer_config.json (WordPiece, tokenizer_algo "wordpiece",
//                        wordpiece_trainer.hpp), or the files of the tokenizer given with TrainOptions::tokenizer.
//   train_log.json       options, per-step loss, final loss, timings.
//   snapshots/step-<N>/  with snapshot_every: the model directory as it was after step N (kept; never removed)
//   checkpoint/          state.json (step, RNG state, losses, options), params-<step>.safetensors,
//                        optimizer-<step>.pt (Adam moments, torch::save): resume continues bit-identically.
//
// Loss masking: in a corpus, text between "<prompt>" and "</prompt>" (on one line) is part of the input
// but never a prediction target — no loss is computed for tokens inside a prompt span (the token right
// after the span is a target). Markers are removed before tokenising; each span is tokenised on its
// own, so put markers at word boundaries. Lines are tokenised separately ("\n" is its own token; a tokenizer
// without one, WordPiece, ends each line with its end-of-sequence token [SEP]).
//
// Determinism: the result is a function of the options and the corpus. Initial weights and every random
// choice (batch windows, word2vec pairs and negatives) come from std::mt19937_64 streams seeded with
// TrainOptions::seed; no LibTorch random numbers are used. Same seed → identical loss curve (for a
// fixed thread count).
//
//   vocablens::TrainOptions o;
//   o.model = vocablens::TrainModel::GPT;  o.synthetic = true;  o.out_dir = "runs/tiny";  o.steps = 500;
//   vocablens::TrainReport r = vocablens::train(o);        // r.final_loss, r.losses
//   vocablens::Model m = vocablens::load_model("runs/tiny");   // an ordinary model directory
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/model.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/synthetic.hpp"

namespace vocablens {

class Tokenizer;

enum class TrainModel { EmbedLM, SkipGram, CBOW, GPT, GloVe };
const char* to_string(TrainModel m);                       ///< "embed-lm", "skipgram", "cbow", "gpt", "glove"
TrainModel train_model_from_string(const std::string& s);  ///< throws UsageError

/// Reported after every step (and once more when training ends).
struct TrainProgress {
  int64_t step = 0;          ///< steps done (1-based after the first step)
  int64_t steps = 0;         ///< total steps of the run
  double loss = 0;           ///< this step's loss
  double smoothed_loss = 0;  ///< exponential moving average (0.95) of the loss
  double lr = 0;
  double seconds = 0;       ///< wall time of this process's run so far
  bool checkpoint = false;  ///< a checkpoint was written after this step
  bool done = false;
};

struct TrainOptions {
  TrainModel model = TrainModel::GPT;
  // ---- data ----
  std::string corpus;      ///< a text file (UTF-8 or any bytes); or:
  bool synthetic = false;  ///< the built-in corpus (synthetic.hpp)
  SyntheticOptions synthetic_options;
  std::string tokenizer;               ///< an existing tokenizer (file or directory); "" = train a BPE
  int64_t vocab_size = 1024;           ///< vocabulary size when training a tokenizer
  std::string tokenizer_algo = "bpe";  ///< the tokenizer trained when none is given: "bpe" | "wordpiece"
  // ---- output ----
  std::string out_dir;
  bool overwrite = false;  ///< replace an existing training run in out_dir
  // ---- optimisation (Adam; AdamW when weight_decay > 0, matrices only) ----
  uint64_t seed = 1;
  int64_t steps = 1000;
  /// Sequences of n_ctx tokens (GPT, EmbedLM) or (centre, context) pairs (word2vec); 0 = the model's
  /// default (GPT, EmbedLM: 32; word2vec: 256).
  int64_t batch_size = 0;
  double lr = 0;              ///< peak learning rate; 0 = the model's default (GPT 3e-3, others 1e-2)
  int64_t warmup_steps = 50;  ///< linear warm-up, then cosine decay to lr · min_lr_ratio
  double min_lr_ratio = 0.1;
  double beta1 = 0.9, beta2 = 0.99;
  double weight_decay = 0.0;
  double grad_clip = 1.0;  ///< global gradient-norm clip (0 = none)
  // ---- architecture ----
  int64_t d_model = 64;  ///< GPT width; EmbedLM / word2vec vector size
  bool tied = true;      ///< GPT / EmbedLM: unembedding tied to the embedding
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t d_mlp = 0;   ///< 0 = 4 · d_model
  int64_t n_ctx = 64;  ///< GPT context = training window (EmbedLM: window of pairs)
  PositionKind positions = PositionKind::Learned;
  double rope_theta = 10000.0;
  /// GPT: learn segment (token-type) embeddings W_seg [2, d] summed with token and position embeddings
  /// (tensor "token_type_embeddings.weight", config.json "vocablens_segments": 2); segment ids from
  /// assign_segments(segment_source). Inference without segment ids uses segment 0 everywhere.
  bool segments = false;
  std::string segment_source = "auto";  ///< "auto" | "prompt" | "lines"
  // ---- word2vec, GloVe ----
  /// Context radius; 0 = the model's default (word2vec 4: a radius in 1..window is drawn per pair;
  /// GloVe 10: every pair at distance <= window is counted, weighted 1/distance).
  int64_t window = 0;
  int64_t negatives = 5;
  double subsample = 1e-3;  ///< frequent-token subsampling threshold (0 = off)
  // ---- GloVe (glove.hpp): one step = one epoch; lr = AdaGrad's eta (default 0.05), no schedule ----
  double glove_x_max = 100.0;  ///< f(x) = min(1, (x / x_max)^alpha)
  double glove_alpha = 0.75;
  // ---- checkpoints and progress ----
  int64_t checkpoint_every = 0;  ///< also checkpoint every N steps (the end always checkpoints)
  /// Every N steps also keep a loadable model directory out_dir/snapshots/step-<N>/ (config, weights, tokenizer
  /// files), e.g. for `compare-embeddings` between two points of one run. GPT and EmbedLM; 0 = none. Per call
  /// (not saved in the checkpoint, like stop_after).
  int64_t snapshot_every = 0;
  bool resume = false;     ///< continue out_dir/checkpoint (its options win, except steps/stop_after/checkpoint_every)
  int64_t stop_after = 0;  ///< stop after this many steps in this call (checkpoint, resumable); 0 = run to `steps`
  /// LibTorch intra-op threads while training; 0 = automatic: the count init_runtime() set when
  /// VOCABLENS_THREADS is set, else one thread per million parameters (at least 1, at most that count).
  /// Small models gain little from threads and lose much on a busy machine (OpenMP threads spin).
  int threads = 0;
  std::function<void(const TrainProgress&)> on_progress;
};

struct TrainReport {
  std::string out_dir;
  TrainModel model = TrainModel::GPT;
  int64_t start_step = 0;      ///< step the run started from (> 0 after resume)
  int64_t step = 0;            ///< steps done in total
  int64_t steps = 0;           ///< steps planned
  std::vector<double> losses;  ///< loss of every step 1..step (earlier runs' from the checkpoint)
  double final_loss = 0;       ///< mean loss of the last min(50, step) steps
  double seconds = 0;          ///< wall time of this call
  int64_t parameters = 0;
  int64_t vocab_size = 0;
  int64_t corpus_tokens = 0;
  int64_t target_tokens = 0;       ///< tokens that are prediction targets (not in prompt spans)
  std::string tokenizer;           ///< where the tokenizer came from
  std::vector<std::string> notes;  ///< things the caller should tell the user (one line each)
};

/// Trains and writes out_dir. Throws UsageError (bad options, existing run without overwrite/resume)
/// or FormatError (unreadable corpus or tokenizer, unwritable directory).
TrainReport train(const TrainOptions& opts);

// ---- corpus ----------------------------------------------------------------------------------------------

/// A tokenised corpus: lines back to back, each followed by the newline token.
struct TokenStream {
  std::vector<int64_t> ids;
  std::vector<uint8_t> target;       ///< [ids.size()] 1 when the token is a prediction target
  std::vector<int64_t> line_starts;  ///< index of each line's first token
  std::vector<int64_t> line_ends;    ///< one past each line's last content token (before "\n")
  std::vector<uint8_t> segment;      ///< [ids.size()] segment id (assign_segments), or empty
  std::string segment_source;        ///< "prompt" or "lines" once assigned
};

/// Segment (token-type) ids for `train --segments`: "prompt" — 1 for the tokens after a line's last
/// <prompt> span (the answer: BERT's sentence B), 0 elsewhere (the prompt, lines without a span, "\n");
/// "lines" — alternating sentences, line i (and its "\n") gets i mod 2; "auto" — prompt when the corpus
/// has a prompt span, else lines. Throws UsageError for another name or "prompt" without any span.
void assign_segments(TokenStream& s, const std::string& source);

/// The text without "<prompt>" / "</prompt>" markers.
std::string strip_prompt_markers(std::string_view text);

/// Tokenises text line by line, honouring prompt markers (see above). Throws UsageError on an
/// unbalanced or nested marker, naming the line.
TokenStream tokenize_marked_text(const Tokenizer& tok, std::string_view text);

// ---- GPT --------------------------------------------------------------------------------------------------

/// The ModelConfig of the GPT the options describe, for a vocabulary of `vocab` tokens.
ModelConfig gpt_config(const TrainOptions& opts, int64_t vocab);

/// Freshly initialised GPT parameters (GPT-2 init: N(0, 0.02), residual projections N(0, 0.02/√(2L)),
/// positions N(0, 0.01), LayerNorm 1/0, biases 0), from a std::mt19937_64 seeded with `seed`.
struct GptParameters {
  std::map<std::string, at::Tensor> named;  ///< GPT-2 names -> leaf tensors (what model.safetensors holds)
  ModelWeights weights;                     ///< the runner's view of the same tensors
};
GptParameters init_gpt_parameters(const ModelConfig& cfg, uint64_t seed);

/// The runner's weights viewing a named GPT-2 tensor map (no copies).
ModelWeights gpt_weights_from_named(const ModelConfig& cfg, const std::map<std::string, at::Tensor>& named);

/// config.json text of a trained GPT (GPT2LMHeadModel + "vocablens_positions" when not learned).
std::string gpt_config_json(const ModelConfig& cfg, int64_t eos_id, const nlohmann::json& extra = {});

// ---- EmbedLM and word vectors ----------------------------------------------------------------------------

/// z = E[x] W + b.
struct EmbedLM {
  at::Tensor E;  ///< [V, d]
  at::Tensor W;  ///< [d, V]; a view of E.t() when tied
  at::Tensor b;  ///< [V]
  bool tied = true;
  at::Tensor hidden(const at::Tensor& ids) const;  ///< h = E[ids]: [..., d]
  at::Tensor logits(const at::Tensor& ids) const;  ///< h W + b: [..., V]
};

/// Reads an EmbedLM directory written by train(). Throws FormatError.
EmbedLM load_embed_lm(const std::string& dir);

struct WordVectors {
  std::string kind;    ///< "skipgram", "cbow" or "glove"
  at::Tensor vectors;  ///< [V, d] word (input) vectors; glove: W + W̃
  at::Tensor context;  ///< [V, d] context (output) vectors
};

/// Reads a SkipGram / CBOW / GloVe directory written by train(). Throws FormatError.
WordVectors load_word_vectors(const std::string& dir);

/// True when `path` is a directory written by train() for embed-lm, skipgram, cbow or glove (no transformer:
/// load_model() refuses it; its matrices come from load_embedding_matrix()).
bool is_embedding_directory(const std::string& path);

/// The token matrix [V, d] of an embed-lm / skipgram / cbow directory, rows = token ids, for the geometry
/// analyses (neighbours, knn, spectrum, anisotropy): "W_E" = E (embed-lm), the word vectors (word2vec) or
/// W + W̃ (glove); "W_U" = the output vectors Wᵀ (embed-lm; E itself when tied) or the context vectors
/// (word2vec, glove).
/// Throws FormatError (not such a directory) or UsageError (other names).
at::Tensor load_embedding_matrix(const std::string& dir, const std::string& which = "W_E");

}  // namespace vocablens
