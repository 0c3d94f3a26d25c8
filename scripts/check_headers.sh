#!/usr/bin/env bash
# Every header compiles on its own: include/vocablens/**.hpp (the public ones) and src/**.hpp (internal), each
# as the only #include of a translation unit, syntax only. The library and test programs are unity builds, so a
# header that uses a name without including it compiles as long as an earlier file of its batch did — until a
# new file shifts the batches. This finds those before that happens.
#   scripts/check_headers.sh [BUILD_DIR=build]     # needs a configured build (its compile_commands.json)
# Prints one line per failing header with its first error, exits 1 if any failed. About 5 minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
[ -f "$build/compile_commands.json" ] || { echo "check_headers: $build/compile_commands.json not found (configure the build first)" >&2; exit 2; }
# The flags of a library file that sees LibTorch (defines, include paths, standard), without its output,
# precompiled header and optimisation options.
flags="$(/usr/bin/python3 - "$build/compile_commands.json" <<'EOF'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    args = shlex.split(e["command"]) if "command" in e else e["arguments"]
    if not any("torch" in a for a in args):
        continue
    keep, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("-isystem", "-I"):
            keep += [a, args[i + 1]]; i += 2; continue
        if a.startswith(("-I", "-D", "-std=", "-isystem")):
            keep.append(a)
        i += 1
    print(" ".join(shlex.quote(a) for a in keep))
    break
else:
    sys.exit("check_headers: no LibTorch file in compile_commands.json")
EOF
)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export flags work
check() {
  local h="$1" n
  n="$(echo "$h" | tr '/' '_')"
  printf '#include "%s"\n' "$h" > "$work/$n.cpp"
  if ! eval "g++ $flags -fsyntax-only -Wall -Wextra -Wno-unused-parameter '$work/$n.cpp'" > "$work/$n.log" 2>&1; then
    echo "FAIL $h: $(grep -m1 'error' "$work/$n.log")"
  fi
}
export -f check
{ cd "$here/include" && find vocablens -name '*.hpp'; cd "$here/src" && find . -name '*.hpp' | sed 's|^\./||'; } |
  sort | xargs -P 2 -I{} bash -c 'check {}' | tee "$work/failed"
count=$({ find "$here/include/vocablens" "$here/src" -name '*.hpp'; } | wc -l)
if [ -s "$work/failed" ]; then
  echo "check_headers: $(wc -l < "$work/failed") of $count headers do not compile on their own"
  exit 1
fi
echo "check_headers: all $count headers compile on their own"
