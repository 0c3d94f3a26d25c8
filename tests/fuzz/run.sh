#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -fsanitize=fuzzer,address,undefined) and runs each one in turn.
#   [LANES=N] [NICE=N] [MAX_LEN=BYTES] tests/fuzz/run.sh [SECONDS_PER_HARNESS=60] [HARNESS...]
# Stops each harness after SECONDS or 10 million executions, whichever comes first. The corpus grows in
# build-fuzz/corpus/<harness>/ (kept between runs; seeds from tests/fuzz/make_seeds.py and the
# regression inputs in tests/fuzz/regressions/<harness>/). Crashes, leaks and timeouts land in
# build-fuzz/artifacts/<harness>/ — minimise one with
#   build-fuzz/tests/<harness> -minimize_crash=1 -runs=100000 build-fuzz/artifacts/<harness>/crash-...
# and add it to tests/fuzz/regressions/<harness>/ (replayed by tests/fuzz_regression_test.cpp).
# One line per harness is appended to build-fuzz/fuzz-summary.tsv: date, harness, seconds asked,
# executions, wall seconds, exec/s, crashes (artifact files), peak RSS MB, exit status.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}; shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_config fuzz_safetensors fuzz_torch_zip fuzz_gguf fuzz_gguf_reader fuzz_llama2c fuzz_bpe_encode fuzz_bpe_files fuzz_llama2c_tokenizer fuzz_results fuzz_results_multi fuzz_spm_model fuzz_prompts_corpus fuzz_sae fuzz_transcoders)
fixtures=${VOCABLENS_FIXTURES:-$PWD/../shared/fixtures}
jobs=${VOCABLENS_FUZZ_BUILD_JOBS:-2}

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DVOCABLENS_FUZZ=ON >/dev/null
ninja -C build-fuzz -j "$jobs" "${harnesses[@]}"
rm -rf build-fuzz/seeds && /usr/bin/python3 tests/fuzz/make_seeds.py "$fixtures" build-fuzz/seeds >/dev/null
export VOCABLENS_FUZZ_GPT2_DIR="$fixtures/gpt2-tiny"
# Leaks are errors (detect_leaks); a huge malloc is reported by -malloc_limit_mb rather than returned null.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# LANES harnesses run at once (default 1); NICE sets their scheduling priority (default 0; 19 lets the
# fuzzers use only CPU that nothing else wants).
lanes=${LANES:-1}
nice_level=${NICE:-0}
run_one() {
  local h=$1 rc=0 start wall execs rate rss crashes
  mkdir -p "build-fuzz/corpus/$h" "build-fuzz/artifacts/$h"
  local dirs=("build-fuzz/corpus/$h" "build-fuzz/seeds/$h")
  [ -d "tests/fuzz/regressions/$h" ] && dirs+=("tests/fuzz/regressions/$h")
  echo "== $h (${secs}s or 10M runs)"
  start=$(date +%s)
  # The harnesses are built in the tests/ subdirectory (tests/CMakeLists.txt); older trees put them at the top.
  local exe=./build-fuzz/tests/$h
  [ -x "$exe" ] || exe=./build-fuzz/$h
  nice -n "$nice_level" "$exe" "${dirs[@]}" -max_total_time="$secs" -runs=10000000 -timeout=60 \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len="${MAX_LEN:-65536}" -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$h/" > "build-fuzz/$h.log" 2>&1 || rc=$?
  wall=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/$h.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "build-fuzz/$h.log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "build-fuzz/$h.log" | tail -1)
  # crash-, leak-, timeout-, oom- files are failures; slow-unit- files are libFuzzer's note of the slowest
  # input so far (it keeps running): listed, not counted. A process that was stopped or starved of CPU
  # (SIGSTOP, a busy machine) leaves one — replay it (build-fuzz/tests/<harness> FILE) to see whether it is slow.
  crashes=$(find "build-fuzz/artifacts/$h" -type f ! -name 'slow-unit-*' | wc -l)
  slow=$(find "build-fuzz/artifacts/$h" -type f -name 'slow-unit-*' | wc -l)
  [ "$slow" = 0 ] || echo "   $h: $slow slow-unit file(s) in build-fuzz/artifacts/$h/ (not failures; replay to check)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$h" "$secs" "${execs:-?}" "$wall" "${rate:-?}" \
      "$crashes" "${rss:-?}" "$rc" >> build-fuzz/fuzz-summary.tsv
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|ERROR|SUMMARY" "build-fuzz/$h.log" | sed "s/^/   $h: /" || true
  if [ "$rc" != 0 ] || [ "$crashes" != 0 ]; then
    echo "   $h FAILED (exit $rc): see build-fuzz/$h.log and build-fuzz/artifacts/$h/"
    return 1
  fi
}
status=0
pids=()
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$lanes" ]; do wait -n || status=1; done
  run_one "$h" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || status=1; done
exit $status
