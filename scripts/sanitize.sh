#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer), one command:
#   scripts/sanitize.sh [extra ctest arguments, e.g. -R robustness]
# Configures build-asan/ (-DVOCABLENS_SANITIZE=ON, RelWithDebInfo), builds everything, runs ctest with
# every sanitizer report fatal, and then counts reports: each process (tests and the `vocablens` CLI they
# start) logs reports to build-asan/sanitizer-reports/, so a report in a subprocess whose exit code a
# test does not look at is still counted. Exit 0 only with all tests passed and 0 reports.
# Environment: VOCABLENS_SANITIZE_JOBS (build jobs, default nproc), VOCABLENS_SANITIZE_TEST_JOBS (ctest -j,
# default 2), CXX (compiler, default the system c++; clang++ works too), VOCABLENS_SANITIZE_BUILD_DIR (default
# build-asan), VOCABLENS_SANITIZE_TARGETS (build only these targets, e.g. the tests named in ctest's -R; CI
# uses this for the hostile-input tests).
# Suppressions (third-party frames only, each documented): tests/sanitizer/lsan.supp, ubsan.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=${VOCABLENS_SANITIZE_JOBS:-$(nproc)}
test_jobs=${VOCABLENS_SANITIZE_TEST_JOBS:-2}

build=${VOCABLENS_SANITIZE_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -G Ninja -DVOCABLENS_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
if [ -n "${VOCABLENS_SANITIZE_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target ${VOCABLENS_SANITIZE_TARGETS}
else
  cmake --build "$build" -j "$jobs"
fi

case "$build" in /*) reports=$build/sanitizer-reports ;; *) reports=$root/$build/sanitizer-reports ;; esac
rm -rf "$reports" && mkdir -p "$reports"
# exitcode=86: a sanitizer exit is never mistaken for an ordinary error exit (1, 2) that a CLI test expects.
common="halt_on_error=1:exitcode=86:log_path=$reports/report:print_summary=1"
export ASAN_OPTIONS="$common:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:detect_invalid_pointer_pairs=0"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizer/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$common:print_stacktrace=1:suppressions=$root/tests/sanitizer/ubsan.supp"

start=$(date +%s)
rc=0
ctest --test-dir "$build" --output-on-failure -j "$test_jobs" --timeout 3600 "$@" || rc=$?
secs=$(( $(date +%s) - start ))

# Count reports (LSan's "suppressed" summaries are not reports).
n=0
for f in "$reports"/report.*; do
  [ -e "$f" ] || continue
  if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error:" "$f"; then
    n=$((n + 1))
    echo "---- sanitizer report: $f"
    head -60 "$f"
  fi
done
echo "sanitize: ctest exit $rc in ${secs}s; $n sanitizer report(s) (logs in $reports)"
[ "$rc" = 0 ] && [ "$n" = 0 ]
