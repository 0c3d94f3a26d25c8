// The int8 kernels of quant_dot.hpp for AVX-512 VNNI (Ice Lake, Zen 4 and later), vpdpbusd / vpdpwssd on 512-bit registers. Everything after the pragma is compiled for that
// instruction set; the headers come before it, so no inline function another file could share is built with it
// (the dispatch in quant_dot.cpp calls this file only on CPUs that have it).
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "model/quant_dot.hpp"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")
#define QDOT_VNNI 1

namespace vocablens {
namespace qdot {
namespace {

#include "model/quant_dot_avx.inc"
#include "model/quant_dot_algo.inc"

}  // namespace

void dot_rows_avx512(const DotArgs& a) { dot_rows_blocked(a); }

}  // namespace qdot
}  // namespace vocablens

#pragma GCC pop_options
