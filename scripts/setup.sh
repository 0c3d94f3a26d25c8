#!/usr/bin/env bash
# vocablens set-up: installs every Debian package the project needs, then builds it (Release) in build/.
# Idempotent: re-running only installs what is missing and rebuilds what changed.
#   ./scripts/setup.sh            # install + build
#   ./scripts/setup.sh --no-build # install only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp
  libeigen3-dev libspectra-dev libfmt-dev catch2 nlohmann-json3-dev libcli11-dev libpcre2-dev
  libicu-dev
  python3-numpy python3-torch
  # llama.cpp reference (scripts/setup_llama_ref.sh): git clones the source bundle of npm node-llama-cpp
  git
  # report and notebook tests: headless Chromium screenshots, nbformat validation, notebook execution
  chromium fonts-dejavu-core python3-pil python3-jsonschema python3-nbformat jupyter-nbconvert
  python3-nbclient python3-ipykernel python3-pandas python3-matplotlib
  # the Python module (python/, docs/python.md): pybind11 headers, Python.h, progress bars
  pybind11-dev python3-dev python3-tqdm
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
./scripts/setup_llama_src.sh                # llama.cpp source from npm node-llama-cpp@3.22.1 (BERT vocabulary)
mkdir -p build/wordpiece_crosscheck       # transformers.js for the WordPiece cross-check
if ! cmp -s tests/wordpiece_crosscheck/package-lock.json build/wordpiece_crosscheck/package-lock.json; then
  cp tests/wordpiece_crosscheck/package.json tests/wordpiece_crosscheck/package-lock.json build/wordpiece_crosscheck/
  (cd build/wordpiece_crosscheck && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# llama.cpp as the independent reference of tests/families_test.cpp: npm node-llama-cpp@3.22.1 +
# @node-llama-cpp/linux-x64@3.22.1 into ~/.cache/vocablens/llama-cpp-3.22.1, and the small lcpp_logits program.
"$(dirname "$0")/setup_llama_ref.sh"

if [ "${1:-}" != "--no-build" ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build build -j "$(nproc)"
  echo "setup: built build/vocablens"
fi
