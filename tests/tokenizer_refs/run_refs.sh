#!/usr/bin/env bash
# run_refs.sh — CTest driver of the tokenizer reference check (see README.md): vocablens' tokenizers against
# llama.cpp's llama_tokenize and transformers.js on every line of the cross-check corpora.
#
#   run_refs.sh TOKENIZE_IDS_EXE SOURCE_DIR WORK_DIR [FAMILY ...]
#
# Needs (installed by scripts/setup.sh; a missing one FAILS the test, it is never skipped):
#   llama.cpp reference in $VOCABLENS_LLAMA_REF (default ~/.cache/vocablens/llama-cpp-3.22.1; scripts/setup_llama_ref.sh),
#   node + npm (transformers.js is installed from this folder's package-lock.json into WORK_DIR), a C++ compiler,
#   python3 with numpy (Debian python3-numpy) and python3-sentencepiece.
# Writes WORK_DIR/results.json (every count) and prints a table. Exit 0 only when every required agreement holds.
set -u
exe=$1 src=$2 work=$3
shift 3
families=("$@")
[ ${#families[@]} -eq 0 ] && families=(llama-bpe qwen2 gpt-neox gpt-2 llama-spm phi-3 gemma-4)
here="$src/tests/tokenizer_refs"
fail() { echo "!!!!!!!! tokenizer_refs FAILED: $* !!!!!!!!"; exit 1; }

ref=${VOCABLENS_LLAMA_REF:-$HOME/.cache/vocablens/llama-cpp-3.22.1}
lsrc="$ref/llama.cpp" bins="$ref/bins/linux-x64"
[ -f "$lsrc/include/llama.h" ] && [ -f "$bins/libllama.so" ] ||
  fail "llama.cpp reference missing in $ref (run scripts/setup_llama_ref.sh, or scripts/setup.sh; or set VOCABLENS_LLAMA_REF)"
command -v node >/dev/null && command -v npm >/dev/null || fail "node/npm not found (scripts/setup.sh installs them)"
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3
$py -c "import numpy, sentencepiece" 2>/dev/null || fail "$py lacks numpy or sentencepiece (Debian python3-numpy python3-sentencepiece)"
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null || fail "no C++ compiler ($cxx)"

mkdir -p "$work"
# transformers.js, pinned by the lock file; reinstalled only when the lock file changed
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/@huggingface/transformers" ]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1) ||
    { rm -f "$work/package-lock.json"; tail -3 "$work/npm-ci.log"; fail "npm ci of @huggingface/transformers failed (see $work/npm-ci.log)"; }
fi
export NODE_PATH="$work/node_modules"

# llama.cpp's tokenizer, built against the headers of the same release
ltok="$work/llama_tokenize_corpus"
if [ ! -x "$ltok" ] || [ "$here/llama_tokenize_corpus.cpp" -nt "$ltok" ]; then
  "$cxx" -O2 -std=c++17 "$here/llama_tokenize_corpus.cpp" -I"$lsrc/include" -I"$lsrc/ggml/include" -L"$bins" \
    -lllama -lggml -lggml-base -Wl,-rpath,"$bins" -o "$ltok" || fail "could not build llama_tokenize_corpus"
fi

# tokenizer files rebuilt from llama.cpp's vocabulary GGUFs (regenerated when the script changes)
tok="$work/tok"
stamp=$(cat "$here/make_tokenizers.py" | sha256sum | cut -c1-16)-$(echo "${families[*]}" | sha256sum | cut -c1-8)
if [ "$(cat "$tok/.stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$tok"
  PYTHONPATH="$lsrc/gguf-py" $py "$here/make_tokenizers.py" "$lsrc/models" "$tok" "${families[@]}" || fail "make_tokenizers.py failed"
  echo "$stamp" > "$tok/.stamp"
fi

# the corpora: every distinct line of the tiktoken cross-check's real and synthetic corpora
node "$src/tests/tokenizer_crosscheck/make_corpus.js" "$work/corpus.json" >/dev/null || fail "make_corpus.js"
node "$src/tests/tokenizer_crosscheck/make_synthetic_corpus.js" "$work/synthetic.json" >/dev/null || fail "make_synthetic_corpus.js"
node "$here/make_lines.js" "$work/lines_real.json" "$work/corpus.json" || fail "make_lines.js"
node "$here/make_lines.js" "$work/lines_synthetic.json" "$work/synthetic.json" || fail "make_lines.js"

# The references' outputs are pure functions of the pinned reference code and of its input files, so they are kept
# in a cache keyed by the sha256 of all of them (never by path or date): a second run on the same machine reads
# them back instead of running transformers.js (~15 CPU-s per vocabulary) and llama.cpp again, while vocablens'
# side is always computed afresh and compared. VOCABLENS_REF_CACHE=off recomputes everything (and refills nothing).
cache=${VOCABLENS_REF_CACHE:-$HOME/.cache/vocablens/tokenizer-ref-outputs}
: > "$work/ref_cache.log"  # one line per reference run: "cache" or "computed" (the tjs runs are in the background)
ref_key() {  # ref_key TOOL_FILES... : sha256 over the files' contents and the key's own version
  { echo "ref-key-v1"; for f in "$@"; do echo "$(basename "$f")"; cat "$f"; done; } | sha256sum | cut -c1-32
}
# cached_ref KEY CMD...: runs CMD (which writes the four files of P) unless the cache has them for KEY.
cached_ref() {
  local key=$1; shift
  local outs=("${P[1]}" "${P[3]}")
  if [ "$cache" != off ] && [ -f "$cache/$key.real.bin" ] && [ -f "$cache/$key.synthetic.bin" ]; then
    cp "$cache/$key.real.bin" "${outs[0]}" && cp "$cache/$key.synthetic.bin" "${outs[1]}" && { echo cache >> "$work/ref_cache.log"; return 0; }
  fi
  "$@" || return 1
  echo computed >> "$work/ref_cache.log"
  if [ "$cache" != off ] && mkdir -p "$cache" 2>/dev/null; then
    cp "${outs[0]}" "$cache/$key.real.bin.tmp$$" && mv "$cache/$key.real.bin.tmp$$" "$cache/$key.real.bin"
    cp "${outs[1]}" "$cache/$key.synthetic.bin.tmp$$" && mv "$cache/$key.synthetic.bin.tmp$$" "$cache/$key.synthetic.bin"
  fi
  return 0
}
lines_files=("$work/lines_real.json" "$work/lines_synthetic.json")
llama_files=("$here/llama_tokenize_corpus.cpp" "$bins/libllama.so" "$bins/libggml-base.so" "${lines_files[@]}")
tjs_files=("$here/tjs_tokenize.js" "$here/package-lock.json" "${lines_files[@]}")

plan="$work/plan.jsonl"
: > "$plan"
# check FAMILY CORPUS A B LABEL_A LABEL_B REQUIRED [EXPLAIN]: one comparison for compare.js, which runs them all
# at the end in one process (a table line each; the test fails when a required agreement does not hold).
check() {
  printf '{"family": "%s", "corpus": "%s", "lines": "%s", "a": "%s", "b": "%s", "la": "%s", "lb": "%s", "required": "%s", "explain": "%s"}\n' \
    "$1" "$2" "$work/lines_$2.json" "$3" "$4" "$5" "$6" "$7" "${8:-}" >> "$plan"
}

echo "tokenizer_refs: llama.cpp $(git -C "$lsrc" rev-parse --short HEAD 2>/dev/null) ($bins), transformers.js $(node -e 'const p=require("path"),f=require("fs");let d=p.dirname(require.resolve("@huggingface/transformers"));while(!f.existsSync(p.join(d,"package.json")))d=p.dirname(d);console.log(JSON.parse(f.readFileSync(p.join(d,"package.json"))).version)')"
# Each tool reads each tokenizer once and encodes both corpora (real, synthetic) in that one process.
both() {  # both FAMILY SUFFIX: sets P to (lines_real.json FAMILY.real.SUFFIX.bin lines_synthetic.json FAMILY.synthetic.SUFFIX.bin)
  P=("$work/lines_real.json" "$work/$1.real.$2.bin" "$work/lines_synthetic.json" "$work/$1.synthetic.$2.bin")
}
run_llama() { "$ltok" "$bins" "$1" "${P[@]}" --special >/dev/null 2>"$work/$fam.llama.log"; }
run_tjs() { node "$here/tjs_tokenize.js" "$1" "${P[@]}" >"$work/$fam.tjs.log" 2>&1; }
for fam in "${families[@]}"; do
  d="$tok/$fam"
  gguf=$(cat "$d/gguf_path.txt")
  both "$fam" spec; "$exe" "spec:$d/vocab_spec.json" "${P[@]}" --special >/dev/null || fail "vocablens on $d/vocab_spec.json"
  if [ ! -f "$d/tokenizer.json" ]; then  # GGUF-only vocabulary (gemma-4): llama.cpp is the reference
    both "$fam" llama
    cached_ref "$(ref_key "${llama_files[@]}" "$gguf")" run_llama "$gguf" || { cat "$work/$fam.llama.log"; fail "llama.cpp on $gguf"; }
    for corpus in real synthetic; do
      o="$work/$fam.$corpus"
      check "$fam" "$corpus" "$o.spec.bin" "$o.llama.bin" gguf-spec llama.cpp all
    done
    continue
  fi
  both "$fam" json; "$exe" "$d/tokenizer.json" "${P[@]}" --special >/dev/null || fail "vocablens on $d/tokenizer.json"
  both "$fam" tjs; cached_ref "$(ref_key "${tjs_files[@]}" "$d"/tokenizer*.json)" run_tjs "$d" &  # the slowest: beside the others
  tjs_pid=$!
  both "$fam" llama
  cached_ref "$(ref_key "${llama_files[@]}" "$gguf")" run_llama "$gguf" || { cat "$work/$fam.llama.log"; fail "llama.cpp on $gguf"; }
  if [ -f "$d/tokenizer.model" ]; then
    both "$fam" model; "$exe" "$d/tokenizer.model" "${P[@]}" --special >/dev/null || fail "vocablens on $d/tokenizer.model"
  fi
  wait $tjs_pid || { cat "$work/$fam.tjs.log"; fail "transformers.js on $d"; }
  for corpus in real synthetic; do
    o="$work/$fam.$corpus"
    # Required: tokenizer.json = transformers.js, except (GPT-2's expression under ByteLevel) where JavaScript's \s
    # differs from Unicode White_Space (U+FEFF, U+0085); spec = llama.cpp everywhere; tokenizer.json = llama.cpp
    # except where the file's NFC normalizer changes the text (llama.cpp does not normalize).
    case $fam in
      gpt-2|gpt-neox) check "$fam" "$corpus" "$o.json.bin" "$o.tjs.bin" tokenizer.json transformers.js explained FEFF,0085 ;;
      *) check "$fam" "$corpus" "$o.json.bin" "$o.tjs.bin" tokenizer.json transformers.js all ;;
    esac
    case $fam in
      qwen2|gpt-neox) check "$fam" "$corpus" "$o.json.bin" "$o.llama.bin" tokenizer.json llama.cpp explained NFC ;;
      *) check "$fam" "$corpus" "$o.json.bin" "$o.llama.bin" tokenizer.json llama.cpp all ;;
    esac
    check "$fam" "$corpus" "$o.spec.bin" "$o.llama.bin" gguf-spec llama.cpp all
    if [ -f "$d/tokenizer.model" ]; then
      check "$fam" "$corpus" "$o.model.bin" "$o.llama.bin" tokenizer.model llama.cpp all
      check "$fam" "$corpus" "$o.model.bin" "$o.tjs.bin" tokenizer.model transformers.js all
    fi
    check "$fam" "$corpus" "$o.tjs.bin" "$o.llama.bin" transformers.js llama.cpp info
  done
done
# llama.cpp's test vectors: ids written by Hugging Face's Python tokenizers (a third reference), no BOS
for fam in "${families[@]}"; do
  d="$tok/$fam" inp="$lsrc/models/ggml-vocab-$fam.gguf.inp"
  [ -f "$inp" ] || continue
  node "$here/make_vectors.js" "$inp" "$lsrc/models/ggml-vocab-$fam.gguf.out" "$work/lines_vectors-$fam.json" "$work/$fam.vectors.hf.bin" >/dev/null ||
    fail "make_vectors.js $inp"
  for kind in json spec model; do
    case $kind in json) t="$d/tokenizer.json" ;; spec) t="spec:$d/vocab_spec.json" ;; model) t="$d/tokenizer.model" ;; esac
    [ "$kind" = spec ] || [ -f "$t" ] || continue
    "$exe" "$t" "$work/lines_vectors-$fam.json" "$work/$fam.vectors.$kind.bin" --special --no-bos >/dev/null || fail "vocablens on $t"
    label=$kind; [ $kind = json ] && label=tokenizer.json; [ $kind = spec ] && label=gguf-spec; [ $kind = model ] && label=tokenizer.model
    check "$fam" "vectors-$fam" "$work/$fam.vectors.$kind.bin" "$work/$fam.vectors.hf.bin" "$label" hf-tokenizers all
  done
done
echo "tokenizer_refs: reference outputs (llama.cpp, transformers.js): $(grep -c computed "$work/ref_cache.log") computed, $(grep -c cache "$work/ref_cache.log") read from $cache"
bad=0
node "$here/compare.js" "$plan" "$work/results.json" 3 || bad=1
echo "results: $work/results.json"
[ $bad -eq 0 ] || fail "some required agreement does not hold (see above)"
echo "tokenizer_refs: all required agreements hold"
