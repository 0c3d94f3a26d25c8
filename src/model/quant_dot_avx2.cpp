// The int8 kernels of quant_dot.hpp for AVX2 + FMA (Haswell and later, Zen). Everything after the pragma is compiled for that
// instruction set; the headers come before it, so no inline function another file could share is built with it
// (the dispatch in quant_dot.cpp calls this file only on CPUs that have it).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "model/quant_dot.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")


namespace vocablens {
namespace qdot {
namespace {

#include "model/quant_dot_avx.inc"
#include "model/quant_dot_algo.inc"

}  // namespace

void dot_rows_avx2(const DotArgs& a) { dot_rows_blocked(a); }

}  // namespace qdot
}  // namespace vocablens

#pragma GCC pop_options
