// vocablens/tensor_store.hpp — named tensors read from a checkpoint file, one reader per format.
//
// Readers validate what they read (sizes, offsets, dtypes) before touching tensor data and throw
// FormatError("<file>: <problem>") on anything wrong. Where the format allows it, tensors are zero-copy
// views of a read-only memory mapping: pages are read from disk only when touched, and the mapping
// lives as long as any tensor viewing it does (each tensor's deleter holds a reference).
//
//   auto store = vocablens::read_safetensors("gpt2/model.safetensors");
//   at::Tensor wte = store.get("wte.weight");          // [50257, 768], float32 view of the file
//   if (store.has("lm_head.weight")) ...
#pragma once
#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vocablens {

/// An ordered name -> tensor map with the file it came from (for error messages).
struct TensorStore {
  std::string source;  ///< path of the file (or index) read; used in error messages
  std::string format;  ///< "safetensors", "pytorch-zip", "llama2c"
  std::map<std::string, at::Tensor> tensors;
  /// Non-tensor values found beside the tensors (safetensors __metadata__, scalars in a pickled dict).
  nlohmann::json metadata = nlohmann::json::object();
  /// dtype of the tensors as stored in the file ("F32", "F16", "BF16", ...; sorted and '+'-joined when
  /// mixed). In `tensors`, half types (F16/BF16) are converted to float32 at load (LibTorch 1.13 has no
  /// CPU half matmul); F32 stays a zero-copy view; F64 and integer types keep their type.
  std::string stored_dtype;

  /// Names read through get(): the loader reports the tensors nobody used.
  mutable std::set<std::string> used;

  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  /// The tensor `name` (recorded in `used`); throws FormatError(source, "missing tensor 'name'").
  const at::Tensor& get(const std::string& name) const;
};

/// Reads one .safetensors file. Checks, as the format's specification demands: the 8-byte header length
/// lies inside the file, the header is well-formed JSON (nesting depth bounded), every entry has a known
/// dtype, a shape and data_offsets, bytes == numel * dtype size, offsets lie inside the data section and
/// do not overlap. F32 tensors are zero-copy (copied only if misaligned); F16/BF16 are converted to F32.
TensorStore read_safetensors(const std::string& path);
/// As above; with upcast_half == false, F16/BF16 tensors stay zero-copy views of their stored dtype
/// (load_model uses this: weights are kept as stored, see vocablens/weight.hpp).
TensorStore read_safetensors(const std::string& path, bool upcast_half);

/// Reads a sharded checkpoint through its model.safetensors.index.json ("weight_map": name -> shard file).
TensorStore read_safetensors_index(const std::string& index_path);
TensorStore read_safetensors_index(const std::string& index_path, bool upcast_half);

/// Reads a PyTorch zip archive written by torch.save (pytorch_model.bin, ckpt.pt) without executing
/// pickle code. Tensors are rebuilt only through the globals torch.save emits (collections.OrderedDict,
/// torch._utils._rebuild_tensor_v2 / _rebuild_parameter, torch.*Storage); globals that exist to run code
/// (os, subprocess, builtins.eval, ...) make the file fail; any other class becomes an inert placeholder
/// string in `metadata` ("<object argparse.Namespace>").
/// Nested dicts are flattened with '.' ("model.tok_embeddings.weight", integer keys in decimal);
/// non-tensor leaves (numbers, strings, booleans, None, lists of those) go to `metadata` under the same
/// flattened key; 0-d tensors appear both as a tensor and as a number in `metadata`. Tensors sharing a
/// storage (a tied lm_head) share data. Compressed entries, big-endian and pre-1.6 files are refused.
TensorStore read_torch_zip(const std::string& path);
/// As above; with upcast_half == false, F16/BF16 storages stay zero-copy views in their stored dtype
/// (load_model uses this for pytorch_model.bin: weights are kept as stored, see vocablens/weight.hpp).
TensorStore read_torch_zip(const std::string& path, bool upcast_half);

/// Reads a sharded torch.save checkpoint through its pytorch_model.bin.index.json (the same "weight_map"
/// as the safetensors index: name -> shard file beside it), each shard with read_torch_zip.
TensorStore read_torch_zip_index(const std::string& index_path, bool upcast_half);

namespace detail {
/// The sharded-index reader both formats share: validates the index (size, JSON depth, plain shard
/// names), reads each shard once with `read_shard`, and takes the tensors the weight_map lists.
TensorStore read_sharded_index(const std::string& index_path, const std::string& format,
                               const std::function<TensorStore(const std::string&)>& read_shard);
}  // namespace detail

}  // namespace vocablens
