// checkpoint/npz.hpp — NumPy .npz archives (numpy.savez: a zip of .npy members) as named tensors.
//
// Only what weight files need: members stored uncompressed (numpy.savez; savez_compressed is refused with
// a message saying so), little-endian float32/float64/float16 and int32/int64, C order (Fortran order is
// read through strides). Tensors are zero-copy views of the mapped file where aligned.
//
//   vocablens::TensorStore s = vocablens::read_npz("layer_3/width_16k/average_l0_71/params.npz");
//   at::Tensor W = s.get("W_enc");      // member "W_enc.npy"
#pragma once
#include <string>

#include "vocablens/tensor_store.hpp"

namespace vocablens {

/// Reads every "<name>.npy" member as tensor "<name>"; stored_dtype as safetensors spells it ("F32", ...).
/// Throws FormatError(path, ...) on a malformed archive, a compressed member, or a bad .npy header.
TensorStore read_npz(const std::string& path);

}  // namespace vocablens
