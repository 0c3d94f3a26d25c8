#!/usr/bin/env bash
# Formats the project's C++ with clang-format 14 and .clang-format, or checks that it is formatted.
#   scripts/format.sh           # rewrite every tracked .cpp / .hpp / .h in place
#   scripts/format.sh --check   # list the files that differ, exit 1 if any (the test suite's format_check)
#   scripts/format.sh FILE...   # format these files only
# Generated files and third-party code are not tracked C++ of ours: tests/fixtures/ holds none.
set -euo pipefail
cd "$(dirname "$0")/.."
cf="$(command -v clang-format-14 || true)"
[ -n "$cf" ] || { echo "format: clang-format-14 not found (scripts/setup.sh installs it)" >&2; exit 2; }
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
if [ $# -gt 0 ]; then files=("$@"); else
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp' '*.h' | grep -v '^tests/fixtures/')
  else  # a source tree without git (an unpacked archive)
    mapfile -t files < <(find src analyses include tests bench python \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) \
                           -not -path 'tests/fixtures/*' | sort)
  fi
fi
if [ "$check" -eq 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 64 -P 2 "$cf" -i --style=file
  exit 0
fi
# One clang-format per 64 files, two at a time; --dry-run --Werror names each file that would change.
out="$(printf '%s\0' "${files[@]}" | xargs -0 -n 64 -P 2 "$cf" --style=file --dry-run --Werror 2>&1 || true)"
bad="$(printf '%s\n' "$out" | grep -oE '^[^:]+:[0-9]+:[0-9]+: error' | cut -d: -f1 | sort -u || true)"
[ -z "$bad" ] && exit 0
printf 'format: %s differs from .clang-format (scripts/format.sh %s)\n' $(for f in $bad; do echo "$f $f"; done) >&2
exit 1
