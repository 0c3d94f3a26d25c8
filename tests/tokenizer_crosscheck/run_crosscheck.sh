#!/usr/bin/env bash
# run_crosscheck.sh — CTest driver of the GPT-2 tokenizer cross-check against @dqbd/tiktoken (see README.md).
#
#   run_crosscheck.sh TOKENIZE_CORPUS_EXE SOURCE_DIR WORK_DIR
#
# Exit 0: 0 mismatching documents. Exit 1: mismatches or an error, including a missing reference (node, npm,
# or @dqbd/tiktoken not installable): the reference is part of the test, so its absence fails loudly
# (scripts/setup.sh installs node and npm). Exit 77 (CTest "skipped") only for fixtures missing with
# VOCABLENS_ALLOW_MISSING_FIXTURES=1, an explicit opt-in.
set -u
exe=$1 src=$2 work=$3
here="$src/tests/tokenizer_crosscheck"
skip() { echo "!!!!!!!! SKIPPED tokenizer_crosscheck: $* !!!!!!!!"; exit 77; }
fail() { echo "tokenizer_crosscheck: the reference is missing: $* (run scripts/setup.sh)"; exit 1; }

command -v node >/dev/null 2>&1 || fail "node not found"
command -v npm >/dev/null 2>&1 || fail "npm not found"

fixtures=${VOCABLENS_FIXTURES:-$src/../shared/fixtures}
tokenizer="$fixtures/gpt2-tiny"
if [ ! -f "$tokenizer/vocab.json" ]; then
  [ "${VOCABLENS_ALLOW_MISSING_FIXTURES:-0}" = 1 ] && skip "fixture missing: $tokenizer"
  echo "fixture missing: $tokenizer (set VOCABLENS_FIXTURES, or VOCABLENS_ALLOW_MISSING_FIXTURES=1 to skip)"; exit 1
fi

# npm packages: installed from the committed lock file into the build directory (the source tree stays clean);
# reinstalled only when the lock file changed. Offline, an existing install in the source folder is used.
mkdir -p "$work"
modules=""
if cmp -s "$here/package-lock.json" "$work/package-lock.json" && [ -d "$work/node_modules/@dqbd/tiktoken" ]; then
  modules="$work/node_modules"
else
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  if (cd "$work" && timeout 150 npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1); then
    modules="$work/node_modules"
  else
    rm -f "$work/package-lock.json"  # retry next time
    echo "npm ci failed (offline?); last lines of $work/npm-ci.log:"; tail -3 "$work/npm-ci.log"
    if [ -d "$here/node_modules/@dqbd/tiktoken" ]; then
      echo "using the packages already installed in $here/node_modules"
      modules="$here/node_modules"
    else
      fail "could not install @dqbd/tiktoken with npm ci"
    fi
  fi
fi
export NODE_PATH="$modules"

set -e
node "$here/make_corpus.js" "$work/corpus.json"
"$exe" "$tokenizer" "$work/corpus.json" "$work/ids.bin"
node "$here/crosscheck.js" "$work/corpus.json" "$work/ids.bin"
# and a random-Unicode stress corpus (every kind of space, controls, many scripts)
node "$here/make_synthetic_corpus.js" "$work/synthetic.json"
"$exe" "$tokenizer" "$work/synthetic.json" "$work/synthetic_ids.bin"
node "$here/crosscheck.js" "$work/synthetic.json" "$work/synthetic_ids.bin"
