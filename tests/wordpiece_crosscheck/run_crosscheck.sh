#!/usr/bin/env bash
# run_crosscheck.sh — CTest driver of the WordPiece (BERT) cross-check against transformers.js (see README.md).
#
#   run_crosscheck.sh TOKENIZE_CORPUS_EXE SOURCE_DIR WORK_DIR
#
# Exit 0: 0 mismatching documents on every corpus and every llama.cpp test vector. Exit 1 otherwise, and
# also when a reference is missing: node, the npm packages (scripts/setup.sh installs them into
# build/wordpiece_crosscheck/), or llama.cpp's BERT vocabulary (scripts/setup_llama_ref.sh unpacks llama.cpp from npm
# node-llama-cpp@3.22.1 into $VOCABLENS_LLAMA_REF or ~/.cache/vocablens/llama-cpp-3.22.1; or point VOCABLENS_LLAMA_CPP
# at a llama.cpp source tree). Nothing is skipped.
set -u
exe=$1 src=$2 work=$3
here="$src/tests/wordpiece_crosscheck"
fail() { echo "wordpiece_crosscheck: $*"; exit 1; }

command -v node >/dev/null 2>&1 || fail "node not found (scripts/setup.sh installs it)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# llama.cpp's BERT vocabulary (bert-base-uncased, as BAAI/bge-small-en-v1.5 ships it) and its gguf-py reader.
llama=""
for d in "${VOCABLENS_LLAMA_CPP:-}" "${VOCABLENS_LLAMA_REF:-$HOME/.cache/vocablens/llama-cpp-3.22.1}/llama.cpp"; do
  if [ -n "$d" ] && [ -f "$d/models/ggml-vocab-bert-bge.gguf" ] && [ -d "$d/gguf-py" ]; then llama=$d; break; fi
done
[ -n "$llama" ] || fail "llama.cpp source not found (models/ggml-vocab-bert-bge.gguf): run scripts/setup_llama_ref.sh (setup.sh does) or set VOCABLENS_LLAMA_REF / VOCABLENS_LLAMA_CPP"

# npm packages: from the committed lock file into the build directory; reinstalled when the lock file changed.
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/@huggingface/transformers" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  if ! (cd "$work" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1); then
    rm -f "$work/package-lock.json"
    tail -3 "$work/npm-ci.log"
    fail "could not install @huggingface/transformers with npm ci (scripts/setup.sh installs it; offline?)"
  fi
fi
export NODE_PATH="$work/node_modules"

set -e
bert="$work/bert-base-uncased"
PYTHONPATH="$llama/gguf-py" "$py" "$here/bert_vocab_from_gguf.py" "$llama/models/ggml-vocab-bert-bge.gguf" "$bert"
# vocablens reads vocab.txt + tokenizer_config.json (the BERT layout); transformers.js reads tokenizer.json.
mkdir -p "$work/vocab_txt_only"
cp "$bert/vocab.txt" "$bert/tokenizer_config.json" "$work/vocab_txt_only/"

node "$src/tests/tokenizer_crosscheck/make_corpus.js" "$work/corpus.json"
node "$src/tests/tokenizer_crosscheck/make_synthetic_corpus.js" "$work/synthetic.json"
node "$here/make_vectors_corpus.js" "$llama/models/ggml-vocab-bert-bge.gguf.inp" "$work/llama_vectors.json"
for c in corpus synthetic llama_vectors; do
  "$exe" "$work/vocab_txt_only" "$work/$c.json" "$work/$c.ids.bin"
  node "$here/crosscheck.mjs" "$bert" "$work/$c.json" "$work/$c.ids.bin"
done
# the tokenizer.json reader too, on the real-text corpus
"$exe" "$bert/tokenizer.json" "$work/corpus.json" "$work/corpus.tj.ids.bin"
node "$here/crosscheck.mjs" "$bert" "$work/corpus.json" "$work/corpus.tj.ids.bin"
# and llama.cpp's own expected ids for its BERT test vectors (.inp/.out, written with Hugging Face tokenizers)
node "$here/check_llama_vectors.js" "$work/llama_vectors.json" "$work/llama_vectors.ids.bin" "$llama/models/ggml-vocab-bert-bge.gguf.out"
