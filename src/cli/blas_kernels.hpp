// OpenBLAS kernel selection for the CLI.
//
// Debian's OpenBLAS 0.3.21 does not recognise recent CPUs (e.g. Xeons of family 6 model 207) and falls back
// to its "Prescott" SSE3 kernels: every GEMM — the forward pass, the lens's unembedding, the streamed V×V
// heads — runs 2.5–5× slower than with the AVX-512 kernels the same library has built in. OpenBLAS reads
// OPENBLAS_CORETYPE only when it is loaded, before main(), so the one fix from inside the program is to
// execute itself again with the variable set.
#pragma once

namespace vocablens::cli {

// Contract: returns normally when nothing needs to change — OPENBLAS_CORETYPE or VOCABLENS_KEEP_BLAS is set,
// the BLAS is not OpenBLAS, the CPU has neither AVX-512F nor AVX2, or OpenBLAS already runs the family below
// (or, unless `reproducible`, any family but Prescott). Otherwise sets OPENBLAS_CORETYPE (SkylakeX for
// AVX-512F, Haswell for AVX2) and execv()s /proc/self/exe with the same argv; if that exec fails it returns
// and the program continues with the kernels it has. Call it after argument parsing (so --help stays
// instant) and before any work.
// `reproducible` (commands that train from a seed: train, demo): one kernel family per instruction set, so a
// seed gives the same model on every AVX-512 CPU. Kernel families round differently and a training run
// follows another trajectory on each (docs/train.md: on an AMD EPYC OpenBLAS picks Cooperlake, and the demo's
// best OV copying score came out 0.42 instead of SkylakeX's 0.63).
void reexec_with_fast_blas_kernels(char** argv, bool reproducible = false);

// The kernel family OpenBLAS is using ("SkylakeX", "Prescott", ...), or "" when the BLAS is not OpenBLAS.
const char* blas_kernel_name();

}  // namespace vocablens::cli
