#!/usr/bin/env bash
# vocablens set-up: installs every Debian package the project needs, then builds it (Release) in build/.
# Idempotent: re-running only installs what is missing and rebuilds what changed.
#   ./scripts/setup.sh            # install + build
#   ./scripts/setup.sh --no-build # install only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git  # git: scripts/setup_llama_ref.sh clones llama.cpp's source bundle
  libtorch-dev libopenblas0-openmp
  libdnnl-dev  # oneDNN headers: the exact int8 GEMM that screens SAE feature logit weights (LibTorch loads its library)
  libeigen3-dev libspectra-dev libfmt-dev catch2 nlohmann-json3-dev libcli11-dev libpcre2-dev
  # corpus work across processes (vocablens/dist.hpp, docs/lens.md): mpirun -np N vocablens ...
  libopenmpi-dev openmpi-bin
  libicu-dev
  # tokenizers: SentencePiece tokenizer.model, Unicode normal forms; spm_train + python3-sentencepiece for fixtures
  libsentencepiece-dev libutf8proc-dev sentencepiece python3-sentencepiece python3-protobuf
  # transcoder folders as circuit-tracer writes them (config.yaml; vocablens/transcoders.hpp)
  libyaml-dev
  python3-numpy python3-torch
  # report and notebook tests: headless Chromium screenshots, nbformat validation, notebook execution
  chromium fonts-dejavu-core python3-pil python3-jsonschema python3-nbformat jupyter-nbconvert
  python3-nbclient python3-ipykernel python3-pandas python3-matplotlib
  jupyter-notebook  # README's command that opens docs/notebooks/ (Debian's Jupyter Notebook 6)
  # the Python module (python/, docs/python.md): pybind11 headers, Python.h, progress bars
  pybind11-dev python3-dev python3-tqdm
  # `pip install .` of the Python package into a venv (pyproject.toml, tests/python/test_install.py)
  python3-venv python3-pip
  # `vocablens serve` (src/serve/, docs/serve.md): the HTTP server library
  libcpp-httplib-dev iproute2  # iproute2: ss, which serve_api reads the listen backlog with
  clang-format-14  # the C++ layout (.clang-format; scripts/format.sh, the suite's format_check)
)
# node + npm run the tokenizer cross-check against tiktoken; any node >= 18 will do (keep an existing one).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then PACKAGES+=(nodejs npm); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch's BLAS: the OpenMP OpenBLAS build (the pthread one, or the reference BLAS, is far slower here).
for lib in libblas.so.3 liblapack.so.3; do
  alt="/usr/lib/$(uname -m)-linux-gnu/openblas-openmp/$lib"
  if [ -e "$alt" ]; then
    $SUDO update-alternatives --set "$lib-$(uname -m)-linux-gnu" "$alt" >/dev/null 2>&1 || true
  fi
done

# Reference data and npm packages the tests compare against (the tests fail, not skip, without them).
# llama.cpp (npm node-llama-cpp@3.22.1 source + @node-llama-cpp/linux-x64 prebuilt libraries, and the small
# lcpp_logits program) into ~/.cache/vocablens/llama-cpp-3.22.1 or $VOCABLENS_LLAMA_REF: the forward, tokenizer,
# dequantization and BERT-vocabulary reference of the tests (scripts/setup_llama_ref.sh).
./scripts/setup_llama_ref.sh
mkdir -p build/wordpiece_crosscheck       # transformers.js for the WordPiece cross-check
if ! cmp -s tests/wordpiece_crosscheck/package-lock.json build/wordpiece_crosscheck/package-lock.json; then
  cp tests/wordpiece_crosscheck/package.json tests/wordpiece_crosscheck/package-lock.json build/wordpiece_crosscheck/
  (cd build/wordpiece_crosscheck && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
mkdir -p build/serve                      # puppeteer-core drives Debian's chromium through the explorer's page
if ! cmp -s tests/serve/package-lock.json build/serve/package-lock.json; then
  cp tests/serve/package.json tests/serve/package-lock.json build/serve/
  (cd build/serve && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

if [ "${1:-}" != "--no-build" ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j "$(nproc)"
  echo "setup: built build/vocablens"
fi
