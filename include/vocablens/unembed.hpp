// vocablens/unembed.hpp — the embedding matrix E, its pseudo-inverse E⁺, and projecting vectors to tokens.
//
// Conventions (docs/projections.md has the derivations and the mapping to Dar et al., ACL 2023, Table 1):
//   E   = W_Uᵀ   [V, d]   row t is token t's unembedding vector; the logits of a residual vector x are E x.
//   E⁺        [d, V]   the Moore–Penrose pseudo-inverse of E (E E⁺ E = E, E⁺ E = I_d when rank E = d).
// A vector the model WRITES into the residual stream (a hidden state, an MLP value, an OV output)
// scores token t as (x W_U)_t. A vector the model READS (an MLP key, a query/key direction, an OV input)
// scores token t as (x R)_t with the read projection R [d, V] chosen by InverseKind:
//   pinv       R = E⁺           exact: Dar's E' = E⁺ᵀ (their E is our W_U)
//   transpose  R = W_U = Eᵀ     Dar's approximation E' ≈ Eᵀ (what their released code does)
//   embed      R = W_Eᵀ         the input embedding (Elhage et al.'s W_U·W_OV·W_E circuits); = transpose when tied
//
//   vocablens::Pinv p = vocablens::embedding_pinv(model);     // E⁺, from the cache when E was seen before
//   at::Tensor Ep = p.pinv;                                   // [d, V] float32
//   at::Tensor R = vocablens::read_projection(model, vocablens::InverseKind::Pinv);
//   auto top = vocablens::project_topk(x /*[N, d]*/, model.W_U(), 10);   // top-10 tokens per row
//
// The cache: E⁺ of a given E is computed once (an SVD of E via the float64 eigen-decomposition of EᵀE,
// a few seconds for GPT-2's 50257×768) and stored as .npy in default_cache_dir(), named by a 64-bit
// xxHash of E's bytes and shape, written atomically. Cache problems (read-only disk, corrupt file) are
// never errors: E⁺ is then recomputed and Pinv::cache_note says why.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vocablens/result.hpp"
#include "vocablens/topk_stream.hpp"

namespace vocablens {

class Model;

enum class InverseKind { Pinv, Transpose, Embed };

/// "pinv" | "transpose" | "embed"; throws UsageError otherwise.
InverseKind parse_inverse_kind(const std::string& s);
const char* to_string(InverseKind k);

/// E = W_Uᵀ [V, d] (a view of the model's weights).
at::Tensor unembedding_matrix(const Model& m);

struct PinvOptions {
  /// Singular values s <= rtol · s_max count as zero (their directions are left out of E⁺).
  double rtol = 1e-6;
  bool use_cache = true;
  /// "" = default_cache_dir().
  std::string cache_dir;
};

struct Pinv {
  at::Tensor pinv;                      ///< E⁺ [d, V] float32 contiguous
  std::vector<double> singular_values;  ///< singular values of E, descending (d of them, zeros included)
  int64_t rank = 0;                     ///< number of singular values kept
  double rtol = 0;
  uint64_t hash = 0;                    ///< hash_tensor(E)
  std::string cache_path;               ///< the .npy file read or written ("" when none)
  bool from_cache = false;
  std::string cache_note;               ///< why the cache was not used, if it was not
};

/// The pseudo-inverse of any float32 matrix E [V, d] with V >= d (no cache unless opts.use_cache).
Pinv pseudo_inverse(const at::Tensor& E, const PinvOptions& opts = {});

/// E⁺ of the model's E = W_Uᵀ, cached (see above). The function the logit lens and others should use.
Pinv embedding_pinv(const Model& m, const PinvOptions& opts = {});

/// The read projection R [d, V] for `kind` (pinv computes or loads E⁺; the others are views).
at::Tensor read_projection(const Model& m, InverseKind kind, const PinvOptions& opts = {});

/// $VOCABLENS_CACHE, else $XDG_CACHE_HOME/vocablens, else $HOME/.cache/vocablens.
std::string default_cache_dir();

/// 64-bit xxHash (XXH64) of a byte range.
uint64_t hash_bytes(const void* data, size_t n, uint64_t seed = 0);
/// XXH64 of a float32 tensor's values in C order, seeded with its shape.
uint64_t hash_tensor(const at::Tensor& t);

/// Top-k tokens of each row of X [N, d] under the projection P [d, V] (W_U for written vectors, a read
/// projection for read vectors): exact, ordered (score desc, token id asc), streamed (never N×V at once
/// beyond one tile). `base` supplies filters (cols = allowed tokens, ...); its k is replaced by `k`.
std::vector<std::vector<TopkEntry>> project_topk(const at::Tensor& X, const at::Tensor& P, int64_t k,
                                                 const TopkStreamOptions& base = {});

// ---- token filters shared by the projections (Dar et al. restrict tables to readable tokens) ----

class Tokenizer;

/// Which tokens may appear in a projection's results.
struct TokenFilter {
  /// Only tokens whose bytes, after at most one leading space, are ASCII letters (at least one).
  bool alpha_only = false;
  /// Only these token ids (nullopt = no allow-list). Combined with alpha_only by intersection.
  std::optional<std::vector<int64_t>> allow;
  bool active() const { return alpha_only || allow.has_value(); }
};

/// The allowed ids in [0, V), ascending, or nullopt when the filter allows everything. alpha_only needs
/// a tokenizer (UsageError otherwise); ids the tokenizer does not know are not alphabetic. Allow-list ids
/// outside [0, V) are a UsageError.
std::optional<std::vector<int64_t>> allowed_tokens(int64_t V, const TokenFilter& f, const Tokenizer* tok);

/// True when token `id`'s bytes are one optional leading space followed by ASCII letters only.
bool is_alphabetic_token(const Tokenizer& tok, int64_t id);

/// One class id per token in [0, V): tokens equal after dropping leading spaces and ASCII-lowercasing
/// share a class (" Paris", "Paris", "paris"); tokens that normalise to "" and ids the tokenizer does not
/// know get -1 (never equal). For TopkStreamOptions::row_class / col_class.
std::vector<int64_t> normalized_token_classes(const Tokenizer& tok, int64_t V);

/// Reads a token allow-list file: whitespace-separated decimal ids; '#' starts a comment to end of line.
/// Throws FormatError naming the file on anything else.
std::vector<int64_t> read_token_id_list(const std::string& path);

// ---- hidden states at a hook point -> tokens ----

struct HiddenProjectionOptions {
  std::string hook = "resid_post";  ///< resid_pre | resid_mid | resid_post | attn_out | mlp_out | final_norm
  int64_t layer = -1;               ///< -1 = every layer (ignored for final_norm)
  int64_t top_k = 10;
  bool apply_final_norm = false;    ///< normalise with the model's final norm first (logit-lens style)
  bool read = false;                ///< project as a read vector (x R, R chosen by `inverse`) instead of x W_U
  InverseKind inverse = InverseKind::Pinv;
  PinvOptions pinv;
  std::vector<int64_t> positions;   ///< empty = every position (negative counts from the end)
  TokenFilter filter;
};

/// Top-k tokens of hidden states: layers × positions × k.
struct HiddenProjection {
  HiddenProjectionOptions options;
  std::vector<int64_t> ids;                 ///< the input token ids
  std::vector<int64_t> layers;              ///< hook layers, in order (-1 for final_norm)
  std::vector<int64_t> positions;           ///< resolved positions
  /// top[l][p] = top-k entries of layer layers[l], position positions[p] (TopkEntry.j = token id).
  std::vector<std::vector<std::vector<TopkEntry>>> top;
  std::vector<std::vector<double>> norms;   ///< ‖x‖ of each projected vector, [layer][position]
  /// kind "projection": settings, summary (tokens as text), tables "top_k", arrays of ids and scores.
  Result to_result(const Tokenizer* tok) const;
};

/// Runs the model on `ids` (int64 [T]) and projects the requested hook's vectors.
HiddenProjection project_hidden(const Model& m, const std::vector<int64_t>& ids, const HiddenProjectionOptions& o,
                                const Tokenizer* tok = nullptr);

}  // namespace vocablens
