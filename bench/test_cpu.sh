#!/usr/bin/env bash
# CPU seconds of each test of the suite, with the fork servers' workers counted (docs/testing.md: a test that runs
# the CLI through the fork client has its work done in a worker of the server, which `/usr/bin/time ctest` misses).
#   bench/test_cpu.sh BUILD_DIR OUT [TEST...]      # default: every test of `-LE refs`, one at a time
# Each test runs alone (`ctest -R "^T$"`, the servers' fixtures excluded) in one cgroup, the servers — started once
# before — in another; a line per test: name, CPU seconds of both cgroups over its run, wall seconds, exit status,
# load. Needs cgroup v1's cpuacct controller writable (/sys/fs/cgroup/cpuacct; root). Sum the second column for
# the suite's CPU; over two cores, that is about the wall time of README's test command.
set -euo pipefail
B=${1:?usage: bench/test_cpu.sh BUILD_DIR OUT [TEST...]}; OUT=${2:?usage: bench/test_cpu.sh BUILD_DIR OUT [TEST...]}; shift 2
CG=/sys/fs/cgroup/cpuacct
[ -w "$CG" ] || { echo "test_cpu: $CG is not writable (cgroup v1 cpuacct, as root)" >&2; exit 2; }
mkdir -p "$CG/vl_servers" "$CG/vl_test"
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  mapfile -t tests < <(ctest --test-dir "$B" -N -LE refs | sed -nE 's/ *Test +#[0-9]+: ([^ ]+)$/\1/p' |
                       grep -vE "_server_(start|stop)$")
fi
(echo $BASHPID > "$CG/vl_servers/cgroup.procs"; ctest --test-dir "$B" -R "_server_start$" > /dev/null)
trap 'ctest --test-dir "$B" -R "_server_stop$" > /dev/null' EXIT
: > "$OUT"
for t in "${tests[@]}"; do
  s0=$(cat "$CG/vl_servers/cpuacct.usage"); t0=$(cat "$CG/vl_test/cpuacct.usage"); w0=$(date +%s.%N)
  rc=0
  (echo $BASHPID > "$CG/vl_test/cgroup.procs"
   ctest --test-dir "$B" --output-on-failure -R "^$t\$" -FA "vl_fork_servers|readme_run" > "$OUT.$t.log" 2>&1) || rc=$?
  s1=$(cat "$CG/vl_servers/cpuacct.usage"); t1=$(cat "$CG/vl_test/cpuacct.usage"); w1=$(date +%s.%N)
  printf '%s %.2f %.2f rc=%d load=%s\n' "$t" "$(echo "($s1-$s0+$t1-$t0)/1000000000" | bc -l)" \
    "$(echo "$w1-$w0" | bc -l)" "$rc" "$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT"
  [ "$rc" -ne 0 ] || rm -f "$OUT.$t.log"
done
awk '{c += $2} END {printf "total %.1f CPU-s over %d tests\n", c, NR}' "$OUT"
