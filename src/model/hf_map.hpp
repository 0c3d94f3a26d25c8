// Mapping a Hugging Face checkpoint's tensors onto ModelWeights through the architecture table (arch.hpp).
#pragma once
#include <string>

#include "vocablens/model.hpp"

namespace vocablens::detail {

/// Reads every role of `c.family` from `st` (names with or without the family's base prefix), checks each
/// shape against the config (a contradiction of num_key_value_heads or head_dim is named as such), splits
/// fused tensors (q|k|v, per-head q k v, gate|up) into roles, folds Gemma's (1 + w) norm offset and OPT's
/// learned-position offset and project_in/out, and ties W_U to W_E when the config says so and the file has
/// no unembedding. Views of the stored tensors where the layout allows (transposes, narrows); copies for
/// per-head fused q/k/v and folded tensors. Throws FormatError naming `st.source` or `cfg_path`.
ModelWeights map_hf_weights(const TensorStore& st, const ModelConfig& c, const std::string& cfg_path);

}  // namespace vocablens::detail
