// vocablens/gguf.hpp — GGUF files (llama.cpp's model format): metadata, tensor infos, dequantization.
//
// A GGUF file is a header (magic "GGUF", version 2 or 3, tensor and key-value counts), typed key-value
// metadata ("general.architecture" = "llama", "llama.block_count" = 32, "tokenizer.ggml.tokens" = [...]),
// one info record per tensor (name, dims, ggml type, offset) and a data section aligned to
// "general.alignment" (default 32). read_gguf() maps the file and validates every count, length, dims
// product and byte range against the file before allocating anything, so a hostile file costs at most
// its own size; any problem throws FormatError("<file>: <problem>").
//
//   auto g = vocablens::read_gguf("model.gguf");
//   std::string arch = g.metadata.at("general.architecture");       // nlohmann::json
//   for (auto& t : g.tensors) fmt::print("{} {} {}\n", t.name, ggml_type_name(t.type), t.ne[0]);
//   std::vector<float> row(t.ne[0]);
//   vocablens::dequantize_row(t.type, g.tensor_data(t), row.data(), t.ne[0]);   // first row, float32
//
// Shapes follow ggml: ne[0] is the innermost (contiguous) dimension, so a [rows, cols] row-major matrix
// has ne = {cols, rows}. Quantized types store ne[0] in blocks (32 or 256 values); rows are whole blocks.
// Dequantization reproduces libggml's dequantize_row_* bit for bit (tests/gguf_quants_test.cpp checks it
// against the prebuilt libggml-base on data quantized by ggml_quantize_chunk).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vocablens {

class MappedFile;

/// ggml tensor types, numbered as in ggml.h (the numbers are the on-disk values).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

/// "Q4_K", "BF16", ...; "type 31" for a number ggml.h does not define.
std::string ggml_type_name(uint32_t type);
/// Values per block and bytes per block of a type vocablens can dequantize; false otherwise.
bool ggml_block_layout(GgmlType type, int64_t& block_values, size_t& block_bytes);
/// Whether dequantize_row() supports `type` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, MXFP4).
bool ggml_can_dequantize(GgmlType type);

/// Converts `n` values of `type` at `src` (n a multiple of the block size) to float32 at `dst`, exactly
/// as libggml's dequantize_row_<type> / fp16 / bf16 conversion does. Throws UsageError for other types.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;  ///< ggml order: ne[0] innermost; 1 to 4 entries
  uint64_t offset = 0;      ///< absolute byte offset in the file
  uint64_t nbytes = 0;
  int64_t numel() const;
};

/// A parsed GGUF file. Metadata values become JSON: integers, floats, booleans, strings (raw bytes, not
/// checked as UTF-8), arrays; `metadata_types` keeps each key's GGUF type name ("u32", "f32", "str",
/// "arr[str]", ...). The mapping stays alive as long as the GgufFile (or a tensor made from it).
struct GgufFile {
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  ///< where the (aligned) data section starts
  nlohmann::json metadata = nlohmann::json::object();
  std::map<std::string, std::string> metadata_types;
  std::vector<GgufTensorInfo> tensors;
  std::shared_ptr<MappedFile> file;

  const GgufTensorInfo* find(const std::string& name) const;
  /// First byte of a tensor's data inside the mapping.
  const uint8_t* tensor_data(const GgufTensorInfo& t) const;
  /// Metadata helpers: the value or `fallback`; FormatError when present with the wrong kind.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
};

/// Reads and validates a GGUF file (little-endian, versions 2 and 3). Checks: magic and version; every
/// count, string and array length against the bytes left in the file (an array claiming 2^60 elements
/// fails before any allocation); value types known; arrays nested at most 4 deep; keys and tensor names
/// unique; general.alignment a power of two; n_dims 1..4; dims non-negative with a product that fits;
/// ne[0] a whole number of blocks; tensor types known to ggml (unknown numbers are named in the error);
/// every tensor's offset aligned and its bytes inside the data section without overlapping another's.
GgufFile read_gguf(const std::string& path);

struct VocabSpec;
/// The tokenizer description in a GGUF's `tokenizer.ggml.*` metadata (model, pre, tokens, scores, token
/// types, merges, special ids, add_bos/add_eos/add_space_prefix), for tokenizer_from_vocab()
/// (vocablens/vocab_spec.hpp). Throws FormatError when the keys are missing or of the wrong GGUF type.
VocabSpec gguf_vocab_spec(const GgufFile& g);

/// True when the file starts with the GGUF magic (cheap; for format detection).
bool is_gguf_file(const std::string& path);

}  // namespace vocablens
