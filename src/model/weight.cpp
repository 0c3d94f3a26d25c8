// Weights in their stored dtype: the packed-ggml registry, on-demand float32, and tiled matmuls.
#include "vocablens/weight.hpp"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <new>
#include <type_traits>
#include <unordered_map>

#include "checkpoint/ggml_quants_simd.hpp"
#include "model/quant_dot.hpp"
#include "model/bf16_gemm.hpp"
#include "model/f32_gemm.hpp"
#include "model/weight_tiles.hpp"
#include "vocablens/error.hpp"
#include "util/parallel.hpp"

namespace vocablens {
namespace {

struct PackedInfo {
  GgmlType type;
  int64_t cols;  // values per stored row
  int64_t row_bytes;
};

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<const void*, PackedInfo>& registry() {
  static std::unordered_map<const void*, PackedInfo> r;
  return r;
}

bool packed_info(const at::Tensor& w, PackedInfo& out) {
  if (!w.defined() || w.scalar_type() != at::kByte || !w.has_storage()) return false;
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(w.storage().data());
  if (it == registry().end()) return false;
  out = it->second;
  return true;
}

// A packed view: which logical dimension walks stored rows, how many rows, the first row's bytes.
struct PackedView {
  PackedInfo info;
  int row_dim;  // 0 or 1 (or -1 for a single row, 1-D)
  int64_t rows;
  const uint8_t* first;
};

PackedView packed_view(const at::Tensor& w) {
  PackedView v{};
  if (!packed_info(w, v.info)) throw UsageError("internal: not a packed weight");
  v.first = static_cast<const uint8_t*>(w.data_ptr());
  if (w.dim() == 1) {
    v.row_dim = -1;
    v.rows = 1;
    if (w.size(0) != v.info.cols) throw UsageError("a packed weight can only be viewed by whole rows");
    return v;
  }
  if (w.dim() != 2) throw UsageError("a packed weight must be a matrix");
  v.row_dim = w.stride(0) != 0 ? 0 : 1;
  if (w.stride(v.row_dim) != v.info.row_bytes || w.size(1 - v.row_dim) != v.info.cols)
    throw UsageError("a packed weight can only be viewed by whole rows");
  v.rows = w.size(v.row_dim);
  return v;
}

std::atomic<int> g_compute{static_cast<int>(ComputeDtype::Float32)};
std::atomic<bool> g_reference_tiles{false};

// Tiles hold about this many values (16 MB as float32): below the CLI's 32 MB malloc mmap threshold, so
// tile buffers are reused from the heap instead of being mapped and faulted in afresh each time (a 7B
// Q4_K lens spent more time in page faults than in arithmetic with 64 MB tiles).
constexpr int64_t kTileValues = int64_t(4) << 20;

// Where a tile's rows come from: stored rows of `cols` values (`row_bytes` apart), each the weight's values
// for one output column: a packed ggml matrix, or a dense F16/BF16 one stored [out, in] (the usual layout of
// GGUF and safetensors Linear weights, viewed as w = stored.t()).
struct RowSource {
  GgmlType type;
  int64_t cols, row_bytes;
  const uint8_t* first;
};
bool row_source(const at::Tensor& w, bool packed, RowSource& s) {
  if (packed) {
    const PackedView v = packed_view(w);
    if (v.row_dim != 1) return false;
    s = {v.info.type, v.info.cols, v.info.row_bytes, v.first};
    return true;
  }
  if (w.dim() != 2 || (w.scalar_type() != at::kHalf && w.scalar_type() != at::kBFloat16)) return false;
  const int64_t in = w.size(0);
  if (w.stride(0) != 1 || (w.size(1) > 1 && w.stride(1) != in)) return false;
  s = {w.scalar_type() == at::kHalf ? GgmlType::F16 : GgmlType::BF16, in, 2 * in, static_cast<const uint8_t*>(w.data_ptr())};
  return true;
}

// A buffer kept per thread and grown on demand: tiles are decoded into the same memory every time (no
// allocation, no page faults), and the GEMM reads them from there.
struct Scratch {
  void* p = nullptr;
  size_t cap = 0;
  ~Scratch() { std::free(p); }
  void* get(size_t bytes) {
    if (bytes > cap) {
      std::free(p);
      cap = (bytes + 4095) / 4096 * 4096;
      p = std::aligned_alloc(64, cap);
      if (!p) {
        cap = 0;
        throw std::bad_alloc();
      }
    }
    return p;
  }
};

// Rows [r0, r0 + n) decoded into dst [n, cols] in the compute dtype, rows in parallel.
template <typename T>
void decode_tile(const RowSource& s, int64_t r0, int64_t n, T* dst) {
  detail::parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if constexpr (std::is_same_v<T, float>) dequantize_row(s.type, s.first + (r0 + i) * s.row_bytes, dst + i * s.cols, s.cols);
      else dequantize_row_bf16(s.type, s.first + (r0 + i) * s.row_bytes, dst + i * s.cols, s.cols);
    }
  });
}

// Rows [r0, r0 + n) of a packed view as float32 [n, cols], rows decoded in parallel.
at::Tensor dequant_rows(const PackedView& v, int64_t r0, int64_t n) {
  at::Tensor out = at::empty({n, v.info.cols}, at::kFloat);
  decode_tile(RowSource{v.info.type, v.info.cols, v.info.row_bytes, v.first}, r0, n, out.data_ptr<float>());
  return out;
}

// c [N, M] (rows ldc apart) = x [N, K] · w [K, M] (+ b) by f32_gemm, for float32 CPU tensors of positive strides
// (a one-row or one-column operand's stride along its size-1 dimension is whatever; oneDNN is given a plain one).
// False, nothing written, where the operands do not fit or oneDNN does not run the product.
bool f32_gemm_into(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, float* c, int64_t ldc) {
  const auto plain = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.dim() == 2 && t.device().is_cpu() && t.stride(0) > 0 && t.stride(1) > 0;
  };
  if (!plain(x) || !plain(w) || x.size(1) != w.size(0) || (b.defined() && b.numel() != w.size(1))) return false;
  const at::Tensor xc = x.stride(1) == 1 || x.size(1) == 1 ? x : x.contiguous();
  const at::Tensor bc = b.defined() ? b.to(at::kFloat).contiguous() : at::Tensor();
  const int64_t N = x.size(0), K = x.size(1), M = w.size(1);
  return detail::f32_gemm(xc.data_ptr<float>(), N == 1 ? K : xc.stride(0), w.data_ptr<float>(), K == 1 ? M : w.stride(0),
                          M == 1 ? 1 : w.stride(1), bc.defined() ? bc.data_ptr<float>() : nullptr, c, ldc, N, K, M);
}

// The product as it was computed before the tiles were decoded straight into the GEMM's dtype: the scalar
// decoders into a fresh float32 tile, converted by LibTorch. Kept as the oracle the tests compare with.
at::Tensor reference_matmul(const at::Tensor& xc, const at::Tensor& w, bool packed, bool bf16, int64_t tile) {
  const int64_t out = w.size(1);
  at::Tensor y = at::empty({xc.size(0), out}, at::kFloat);
  PackedView v{};
  if (packed) v = packed_view(w);
  for (int64_t o0 = 0; o0 < out; o0 += tile) {
    const int64_t n = std::min(tile, out - o0);
    at::Tensor wt;
    if (packed) {
      wt = at::empty({n, v.info.cols}, at::kFloat);
      for (int64_t i = 0; i < n; ++i)
        dequantize_row_scalar(v.info.type, v.first + (o0 + i) * v.info.row_bytes, wt.data_ptr<float>() + i * v.info.cols,
                              v.info.cols);
      wt = wt.t();
    } else {
      wt = w.narrow(1, o0, n).to(at::kFloat);
    }
    if (bf16) {
      y.narrow(1, o0, n).copy_(detail::mm_bf16(xc, wt.to(at::kBFloat16)));
    } else {
      at::Tensor dst = y.narrow(1, o0, n);
      detail::mm_f32_out(dst, xc, wt);
    }
  }
  return y;
}

}  // namespace

at::Tensor make_packed_weight(std::shared_ptr<const void> owner, const uint8_t* data, GgmlType type, int64_t rows, int64_t cols) {
  int64_t bv = 0;
  size_t bb = 0;
  if (!ggml_block_layout(type, bv, bb) || cols % bv != 0 || rows < 1) throw UsageError("make_packed_weight: bad type or shape");
  const int64_t row_bytes = cols / bv * static_cast<int64_t>(bb);
  void* base = const_cast<uint8_t*>(data);
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[base] = PackedInfo{type, cols, row_bytes};
  }
  auto deleter = [owner, base](void*) mutable {
    {
      std::lock_guard<std::mutex> lock(registry_mutex());
      registry().erase(base);
    }
    owner.reset();
  };
  return at::from_blob(base, {rows, cols}, {row_bytes, 0}, deleter, at::TensorOptions().dtype(at::kByte));
}

bool is_packed_weight(const at::Tensor& w) {
  PackedInfo i;
  return packed_info(w, i);
}

GgmlType weight_storage_type(const at::Tensor& w) {
  PackedInfo i;
  if (packed_info(w, i)) return i.type;
  if (w.defined() && w.scalar_type() == at::kHalf) return GgmlType::F16;
  if (w.defined() && w.scalar_type() == at::kBFloat16) return GgmlType::BF16;
  return GgmlType::F32;
}

std::string weight_storage_name(const at::Tensor& w) { return ggml_type_name(static_cast<uint32_t>(weight_storage_type(w))); }

at::Tensor materialize_weight(const at::Tensor& w) {
  if (!w.defined() || w.scalar_type() == at::kFloat) return w;
  if (!is_packed_weight(w)) return w.to(at::kFloat);
  auto v = packed_view(w);
  at::Tensor m = dequant_rows(v, 0, v.rows);
  if (v.row_dim == -1) return m.view({v.info.cols});
  return v.row_dim == 0 ? m : m.t();
}

void set_compute_dtype(ComputeDtype d) { g_compute = static_cast<int>(d); }
ComputeDtype compute_dtype() { return static_cast<ComputeDtype>(g_compute.load()); }
ComputeDtype compute_dtype_from_string(const std::string& s) {
  if (s == "float32" || s == "fp32" || s == "f32") return ComputeDtype::Float32;
  if (s == "bfloat16" || s == "bf16") return ComputeDtype::BFloat16;
  if (s == "int8") return ComputeDtype::Int8;
  throw UsageError("unknown compute mode '" + s + "' (expected float32, bfloat16 or int8)");
}
const char* compute_dtype_name(ComputeDtype d) {
  switch (d) {
    case ComputeDtype::Float32: return "float32";
    case ComputeDtype::BFloat16: return "bfloat16";
    case ComputeDtype::Int8: return "int8";
  }
  return "float32";
}

namespace {

// Under --compute int8, a product whose weight type has no int8 kernel runs the exact float32 path; the first one
// of each type says so (once per process: a forward makes hundreds of products).
void note_exact_under_int8(GgmlType t) {
  static std::atomic<uint64_t> said{0};
  const uint64_t bit = uint64_t(1) << (static_cast<uint32_t>(t) & 63);
  if (said.fetch_or(bit) & bit) return;
  std::cerr << "vocablens: --compute int8: " << ggml_type_name(static_cast<uint32_t>(t))
            << " weights have no int8 kernel; their products run on the exact float32 path\n";
}

// x [N, in] @ the stored rows of `s` (out of them), llama.cpp's way: each row of x quantized to Q8_0 / Q8_K blocks
// once, then integer dot products with the weight's blocks, output rows split across threads.
at::Tensor int8_matmul(const at::Tensor& x, const RowSource& s, int64_t out) {
  const at::Tensor xc = x.contiguous();
  const int64_t N = xc.size(0), in = s.cols;
  at::Tensor y = at::empty({N, out}, xc.options().dtype(at::kFloat));
  if (N == 0 || out == 0) return y;
  const int64_t stride = qdot::act_row_bytes(s.type, in);
  static thread_local Scratch act_buf;
  uint8_t* act = static_cast<uint8_t*>(act_buf.get(static_cast<size_t>(N * stride)));
  const float* xp = xc.data_ptr<float>();
  detail::parallel_for(0, N, 16, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) qdot::quantize_row(s.type, xp + t * in, in, act + t * stride);
  });
  float* yp = y.data_ptr<float>();
  // Chunks of at least 32 output rows: a thread's share of a small matrix is not worth waking it for.
  detail::parallel_for(0, out, 32, [&](int64_t r0, int64_t r1) {
    qdot::dot_rows({s.type, s.first + r0 * s.row_bytes, s.row_bytes, r1 - r0, act, stride, N, in, yp + r0, out});
  });
  return y;
}

at::Tensor stored_weight_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// Columns [o0, o0 + n) of a stored (F16 / BF16 / quantized) weight [in, out] as a float32 [in, n] tile.
at::Tensor float_tile(const at::Tensor& w, int64_t o0, int64_t n) {
  if (!is_packed_weight(w)) return w.narrow(1, o0, n).to(at::kFloat);
  auto v = packed_view(w);
  if (v.row_dim != 1) return materialize_weight(w).narrow(1, o0, n);
  return dequant_rows(v, o0, n).t();
}

// x @ W for a weight stored in another dtype than float32, differentiable in x. The product itself writes into
// preallocated outputs (mm_out), which autograd refuses ("functions with out=... arguments don't support automatic
// differentiation"), so it runs as one autograd node: forward is the tiled product, backward dx = dy @ W^T with
// W decoded again one tile at a time. The weight stays frozen (no gradient) and is never held whole in float32;
// the node keeps only the stored tensor (a view of the loaded file).
struct StoredWeightMatmul : public torch::autograd::Function<StoredWeightMatmul> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->saved_data["w"] = w;
    return stored_weight_matmul(x, w, at::Tensor());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const at::Tensor w = ctx->saved_data["w"].toTensor();
    const at::Tensor dy = grads[0].to(at::kFloat);
    const int64_t in = w.size(0), out = w.size(1);
    const int64_t tile = std::max<int64_t>(1, std::min<int64_t>(out, kTileValues / std::max<int64_t>(in, 1)));
    at::Tensor dx = at::zeros({dy.size(0), in}, dy.options());
    for (int64_t o0 = 0; o0 < out; o0 += tile) {
      const int64_t n = std::min(tile, out - o0);
      dx.addmm_(dy.narrow(1, o0, n), float_tile(w, o0, n).t());
    }
    return {dx, at::Tensor()};
  }
};

}  // namespace

namespace detail {

at::Tensor mm_f32(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  // oneDNN records no gradient: a product autograd must see (Python gradients, training) stays with at::mm.
  const bool grad = at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()));
  if (!grad && x.dim() == 2 && w.dim() == 2) {
    at::Tensor y = at::empty({x.size(0), w.size(1)}, x.options());
    if (f32_gemm_into(x, w, b, y.data_ptr<float>(), y.size(1))) return y;
  }
  return b.defined() ? at::addmm(b, x, w) : at::mm(x, w);
}

void mm_f32_out(at::Tensor& dst, const at::Tensor& x, const at::Tensor& w) {
  // oneDNN's fast kernel (brgemm) wants the output's rows back to back: into a block of columns of a wider output
  // the product is computed in a [N, n] buffer and copied (N·n copies against N·n·K multiply-adds).
  const int64_t N = x.size(0), n = w.size(1);
  if (dst.scalar_type() == at::kFloat && dst.dim() == 2 && dst.size(0) == N && dst.size(1) == n && N > 0 && n > 0) {
    const bool direct = dst.is_contiguous();
    static thread_local Scratch part;
    float* c = direct ? dst.data_ptr<float>() : static_cast<float*>(part.get(static_cast<size_t>(N * n) * 4));
    if (f32_gemm_into(x, w, at::Tensor(), c, n)) {
      if (!direct) dst.copy_(at::from_blob(c, {N, n}, x.options()));
      return;
    }
  }
  at::mm_out(dst, x, w);
}

}  // namespace detail

at::Tensor weight_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (w.scalar_type() == at::kFloat) {
    if (compute_dtype() == ComputeDtype::Int8) note_exact_under_int8(GgmlType::F32);
    return detail::mm_f32(x, w, b);
  }
  if (at::GradMode::is_enabled() && x.requires_grad()) {
    at::Tensor y = StoredWeightMatmul::apply(x, w);
    return b.defined() ? y + b.to(at::kFloat) : y;
  }
  return stored_weight_matmul(x, w, b);
}

at::Tensor weight_matmul(const at::Tensor& x, const at::Tensor& w) { return weight_matmul(x, w, at::Tensor()); }

namespace {

at::Tensor stored_weight_matmul(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const bool bf16 = compute_dtype() == ComputeDtype::BFloat16;
  const int64_t N = x.size(0), in = w.size(0), out = w.size(1);
  const bool packed = is_packed_weight(w);
  if (compute_dtype() == ComputeDtype::Int8) {
    RowSource s{};
    if (packed && !g_reference_tiles.load() && row_source(w, true, s) && qdot::supported(s.type)) {
      at::Tensor y = int8_matmul(x.to(at::kFloat), s, out);
      return b.defined() ? y.add_(b) : y;
    }
    note_exact_under_int8(weight_storage_type(w));
  }
  if (packed && packed_view(w).row_dim != 1) {  // rows of storage run along `in`: rare; decode whole
    at::Tensor wf = materialize_weight(w);
    return b.defined() ? at::addmm(b, x, wf) : at::mm(x, wf);
  }
  if (!packed && bf16 && w.scalar_type() == at::kBFloat16) {
    at::Tensor y = detail::mm_bf16(x.to(at::kBFloat16), w).to(at::kFloat);
    return b.defined() ? y.add_(b) : y;
  }
  // Tiles of output columns: each is decoded (or upcast) into the compute dtype and multiplied.
  at::Tensor xc = bf16 ? x.to(at::kBFloat16) : x;
  const int64_t tile = std::max<int64_t>(1, std::min<int64_t>(out, kTileValues / std::max<int64_t>(in, 1)));
  RowSource s{};
  if (g_reference_tiles.load() || !row_source(w, packed, s)) {
    at::Tensor y = reference_matmul(xc, w, packed, bf16, tile);
    return b.defined() ? y.add_(b) : y;
  }
  // The tile is decoded as rows [n, in] and passed transposed: the same operand layout as before (the GEMMs see
  // identical shapes and strides, so their results do not change), read by BLAS / oneDNN without a copy.
  // float32 products go straight into their columns of y; bfloat16 ones (LibTorch's bf16 GEMM returns bf16)
  // into a reused [N, n] buffer, then widened into y.
  // Where LibTorch's bf16 GEMM is slow (no AVX-512, src/model/bf16_gemm.hpp), bfloat16 compute runs the same
  // arithmetic in float32: activations and tiles rounded to bf16 precision (their products are exact in float32),
  // float32 sums, each output rounded to bf16 at the end — what mm_bf16 does, without a bf16 buffer to widen.
  const bool emulate = bf16 && !detail::bf16_gemm_libtorch();
  const at::Tensor xg = emulate ? xc.to(at::kFloat) : xc;
  static thread_local Scratch tile_buf, part_buf;
  at::Tensor y = at::empty({N, out}, x.options().dtype(at::kFloat));
  const bool bf16_tiles = bf16 && !emulate;
  const at::ScalarType dt = bf16_tiles ? at::kBFloat16 : at::kFloat;
  const size_t esize = bf16_tiles ? 2 : 4;
  void* tb = tile_buf.get(static_cast<size_t>(tile * in) * esize);
  for (int64_t o0 = 0; o0 < out; o0 += tile) {
    const int64_t n = std::min(tile, out - o0);
    if (bf16_tiles) {
      decode_tile(s, o0, n, static_cast<uint16_t*>(tb));
    } else {
      decode_tile(s, o0, n, static_cast<float*>(tb));
      if (emulate) detail::round_to_bf16(static_cast<float*>(tb), n * in);
    }
    const at::Tensor wt = at::from_blob(tb, {n, in}, at::TensorOptions().dtype(dt)).t();  // [in, n]
    if (bf16_tiles) {
      at::Tensor part = at::from_blob(part_buf.get(static_cast<size_t>(N * n) * 2), {N, n}, at::TensorOptions().dtype(dt));
      detail::mm_bf16_out(part, xc, wt);
      y.narrow(1, o0, n).copy_(part);
    } else {
      at::Tensor dst = y.narrow(1, o0, n);
      detail::mm_f32_out(dst, xg, wt);
    }
  }
  if (emulate) detail::round_to_bf16(y.data_ptr<float>(), y.numel());
  return b.defined() ? y.add_(b) : y;
}

}  // namespace

void set_reference_weight_tiles(bool on) { g_reference_tiles = on; }

bool int8_product(const at::Tensor& w) {
  RowSource s{};
  return compute_dtype() == ComputeDtype::Int8 && is_packed_weight(w) && !g_reference_tiles.load() && row_source(w, true, s) &&
         qdot::supported(s.type);
}

at::Tensor weight_rows(const at::Tensor& w, const at::Tensor& ids) {
  if (!is_packed_weight(w)) return w.index_select(0, ids).to(at::kFloat);
  auto v = packed_view(w);
  if (v.row_dim != 0) return materialize_weight(w).index_select(0, ids);
  at::Tensor idc = ids.to(at::kLong).contiguous();
  const int64_t n = idc.numel();
  const int64_t* p = idc.data_ptr<int64_t>();
  at::Tensor out = at::empty({n, v.info.cols}, at::kFloat);
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] < 0 || p[i] >= v.rows) throw UsageError("row " + std::to_string(p[i]) + " is out of range");
    dequantize_row(v.info.type, v.first + p[i] * v.info.row_bytes, dst + i * v.info.cols, v.info.cols);
  }
  return out;
}

}  // namespace vocablens
