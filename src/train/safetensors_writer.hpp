// src/train/safetensors_writer.hpp — writes .safetensors files (internal to the trainer).
//
// Spec-conformant output: an 8-byte little-endian header length, a JSON header whose keys are the
// tensor names in sorted order (plus "__metadata__", string values only), padded with spaces so that
// the data section starts at a multiple of 8, then the tensors' bytes back to back in the same order
// (no holes: the reader in src/checkpoint/safetensors.cpp refuses them). Float tensors are written as
// F32 (converted if needed), integer tensors as I64. Written atomically (vocablens::write_file_atomic).
//
//   std::map<std::string, at::Tensor> t{{"wte.weight", E}};
//   vocablens::train_detail::write_safetensors("out/model.safetensors", t, {{"format", "pt"}});
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <string>

namespace vocablens::train_detail {

/// The file's bytes.
std::string safetensors_bytes(const std::map<std::string, at::Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

/// Writes the file atomically. Throws FormatError(path, ...) when it cannot be written.
void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace vocablens::train_detail
