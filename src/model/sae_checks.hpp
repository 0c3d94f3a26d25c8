// src/model/sae_checks.hpp — the finiteness check the SAE and transcoder readers share (sae_load.cpp,
// transcoders.cpp): an internal building block, not a public interface.
#pragma once
#include <ATen/ATen.h>

namespace vocablens {
namespace detail {

/// True when every value of t is finite. Reads t in slices of at most 16 M values along its first dimension (no
/// float copy or mask of a large matrix) and gives the pages of a large mapped tensor back once read
/// (MADV_PAGEOUT), so that checking a matrix of gigabytes does not keep it resident.
bool all_finite_in_slices(const at::Tensor& t);

}  // namespace detail
}  // namespace vocablens
