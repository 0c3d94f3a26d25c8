// weight_tiles.hpp (internal) — the oracle for weight_matmul's tiles (vocablens/weight.hpp).
//
// weight_matmul() decodes each tile of a quantized or F16/BF16 weight straight into the compute dtype with the
// vector decoders (src/checkpoint/ggml_quants_simd.hpp) into a reused buffer. With reference tiles on, it
// instead runs the path those replaced: the scalar decoders into a fresh float32 tile, LibTorch's
// `.to(at::kBFloat16)` under --dtype bfloat16, at::mm, and a copy into the output. Both must give the same
// bits (tests/weight_tiles_test.cpp compares logits of whole models both ways); nothing else turns it on.
//
//   vocablens::set_reference_weight_tiles(true);  auto ref = model.forward(ids);
//   vocablens::set_reference_weight_tiles(false); auto got = model.forward(ids);   // equal bit for bit
#pragma once

namespace vocablens {

/// Process-wide switch (default off).
void set_reference_weight_tiles(bool on);

}  // namespace vocablens
