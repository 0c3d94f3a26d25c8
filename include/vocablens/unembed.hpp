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
// never errors: E⁺ is then recomputed and Pinv::cache_note says why (vocablens/linalg/pinv.hpp).
// Which tokens a projection may report: vocablens/token_filter.hpp; hidden states at a hook point
// projected to tokens (the `project` command): vocablens/project.hpp.
#pragma once
#include "vocablens/tensor_fwd.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/linalg/pinv.hpp"
#include "vocablens/linalg/topk_stream.hpp"

namespace vocablens {

class Model;

enum class InverseKind { Pinv, Transpose, Embed };

/// "pinv" | "transpose" | "embed"; throws UsageError otherwise.
InverseKind parse_inverse_kind(const std::string& s);
const char* to_string(InverseKind k);

/// E = W_Uᵀ [V, d] (a view of the model's weights).
at::Tensor unembedding_matrix(const Model& m);

/// E⁺ of the model's E = W_Uᵀ, cached (see above). The function the logit lens and others should use.
Pinv embedding_pinv(const Model& m, const PinvOptions& opts = {});

/// The read projection R [d, V] for `kind` (pinv computes or loads E⁺; the others are views).
at::Tensor read_projection(const Model& m, InverseKind kind, const PinvOptions& opts = {});

/// Top-k tokens of each row of X [N, d] under the projection P [d, V] (W_U for written vectors, a read
/// projection for read vectors): exact, ordered (score desc, token id asc), streamed (never N×V at once
/// beyond one tile). `base` supplies filters (cols = allowed tokens, ...); its k is replaced by `k`.
std::vector<std::vector<TopkEntry>> project_topk(const at::Tensor& X, const at::Tensor& P, int64_t k,
                                                 const TopkStreamOptions& base = {});

}  // namespace vocablens
