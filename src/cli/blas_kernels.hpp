// What the CLI's process needs from its environment before LibTorch and OpenBLAS load: OpenBLAS's kernels and
// OpenMP's wait policy.
//
// Debian's OpenBLAS 0.3.21 does not recognise recent CPUs (e.g. Xeons of family 6 model 207) and falls back
// to its "Prescott" SSE3 kernels: every GEMM — the forward pass, the lens's unembedding, the streamed V×V
// heads — runs 2.5–5× slower than with the AVX-512 kernels the same library has built in. OpenBLAS reads
// OPENBLAS_CORETYPE, and libgomp OMP_WAIT_POLICY, only when they are loaded. `vocablens` sets the wait policy
// before it loads them (cli/early_env.hpp); which kernels OpenBLAS picks is known only once it has loaded, so
// the one fix for those from inside the program is to execute itself again with the variable set.
#pragma once

namespace vocablens::cli {

// Contract: returns normally when nothing needs to change; otherwise sets the variables below and execv()s
// /proc/self/exe with the same argv (if that exec fails it returns and the program continues as it is). Call
// it after argument parsing (so --help stays instant) and before any work. What it sets:
//  - OPENBLAS_CORETYPE (SkylakeX for AVX-512F, Haswell for AVX2) unless it or VOCABLENS_KEEP_BLAS is set, the
//    BLAS is not OpenBLAS, the CPU has neither, or OpenBLAS already runs that family (or, unless
//    `reproducible`, any family but Prescott). `reproducible` (commands that train from a seed: train, demo):
//    one kernel family per instruction set, so a seed gives the same model on every AVX-512 CPU. Kernel families
//    round differently and a training run follows another trajectory on each (docs/train.md: on an AMD EPYC
//    OpenBLAS picks Cooperlake, and the demo's best OV copying score came out 0.42 instead of SkylakeX's 0.63).
//  - OMP_WAIT_POLICY=PASSIVE unless it or GOMP_SPINCOUNT is set or the run uses one thread (VOCABLENS_THREADS
//    or OMP_NUM_THREADS 1, or one CPU). libgomp, which LibTorch and OpenBLAS share, reads it when it is loaded;
//    unset, its idle threads spin ~300 000 pauses after every parallel region, and on a busy 2-core machine the
//    spinning thread burns the time slices its descheduled partner needs: blocked attention over 512 tokens on
//    two threads took 5.4 s wall and 2.6 CPU-s spinning, 0.10 s and 0.05 CPU-s passive (docs/benchmarks.md,
//    "Threads"). `vocablens` has set it before LibTorch loaded (cli/early_env.hpp), so this applies to programs
//    that link the CLI's objects directly. One exec costs a process start (~0.65 CPU-s here: LibTorch and the
//    ~300 libraries Debian's build of it pulls in).
void reexec_with_runtime_settings(char** argv, bool reproducible = false);

// The kernel family OpenBLAS is using ("SkylakeX", "Prescott", ...), or "" when the BLAS is not OpenBLAS.
const char* blas_kernel_name();

}  // namespace vocablens::cli
