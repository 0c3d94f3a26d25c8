#!/bin/sh
# Regenerates the run.c references of this folder. Builds llama2.c's run.c OUTSIDE the source
# tree from a llama2.c checkout you provide (karpathy/llama2.c @ 350e04fe35433e6d2941dce5a1f53308f87058eb).
#   tests/data/generate_context_end/make_reference.sh /path/to/llama2.c ../shared/fixtures/stories260K
set -eu
L2C=$1
FIX=$2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
gcc -O2 -o "$WORK/run" "$L2C/run.c" -lm
for n in 600 500; do
  "$WORK/run" "$FIX/stories260K.bin" -z "$FIX/tok512.bin" -t 0.0 -n $n -i "$(cat "$HERE/prompt.txt")" \
    > "$HERE/runc_t0_n$n.txt" 2>/dev/null
done
rm -rf "$WORK"
