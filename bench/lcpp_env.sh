# Sourced by bench/run_gguf_bench.sh and bench/run_gguf_speed.sh (with $here, $build, $work and $threads set):
# finds llama.cpp's headers and prebuilt libraries (scripts/setup_llama_ref.sh; LLAMA_CPP / LLAMA_BINS
# override), builds the named vocablens targets ("$@") and bench/lcpp_bench.cpp into $work/lcpp_bench, and
# pins both programs to $threads threads. Sets nice_level (NICE, default 10) for the runs.
ref="${VOCABLENS_LLAMA_REF:-$HOME/.cache/vocablens/llama-cpp-3.22.1}"
lcpp="${LLAMA_CPP:-$ref/llama.cpp}"
bins="${LLAMA_BINS:-$ref/bins/linux-x64}"
nice_level="${NICE:-10}"
mkdir -p "$work"
cmake --build "$build" --target "$@" -j 2 >/dev/null
g++ -O2 -std=c++17 "$here/bench/lcpp_bench.cpp" -I"$lcpp/include" -I"$lcpp/ggml/include" -L"$bins" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$bins" -o "$work/lcpp_bench"
export LLAMA_BINS="$bins" VOCABLENS_THREADS="$threads" OMP_NUM_THREADS="$threads"
