#!/usr/bin/env bash
# ctest Cluster.ShapedLinksAndCleanup (make test-long): tools/cluster/cluster.sh makes two hosts
# (network namespaces) behind 100 Mbit/s links and runs tests/dist/cluster_probe.cpp on them.
#   - each rank sees its own host's address (one per host, in the cluster's subnet, none of the
#     root namespace's), the one the script says it has (KILN_CLUSTER_ADDR);
#   - the link is shaped: 16 MiB from rank 0 to rank 1 take at least 0.9x the link's bound
#     (bytes x 8 / rate; unshaped, a veth moves them ~100x faster) and at most 3x;
#   - nothing is left behind (namespace, link, bridge, temporary folder, process): after a
#     clean run, a command that fails, --timeout, a link cut mid-transfer, and SIGTERM mid-run.
#   - without root it exits 77 with its reason.
#   - with CLUSTER_CUT (tests/dist/cluster_cut.cpp, Kiln's all_sum in a loop) on 3 hosts, host 2's
#     link cut mid-loop: ranks 0 and 1 raise kiln::Error naming rank 2 within
#     KILN_DIST_PEER_TIMEOUT (3 s here) and a few seconds more, and leave with a non-zero status.
# Exit 77 (skipped) where the machine cannot make namespaces; each run is bounded by --timeout.
#
#   tests/dist/cluster_test.sh CLUSTER_PROBE [CLUSTER_SH [CLUSTER_CUT]]
set -euo pipefail
probe=${1:?usage: cluster_test.sh CLUSTER_PROBE [CLUSTER_SH [CLUSTER_CUT]]}
cluster=${2:-$(cd "$(dirname "$0")/../.." && pwd)/tools/cluster/cluster.sh}
cut=${3:-}
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-cluster-test.XXXXXX")
trap 'rm -rf "$out"' EXIT

fail() {
  echo "cluster_test: FAILED: $*"
  for f in "$out"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}

# Runs cluster.sh in the background (its pid names everything it makes), waits, and leaves
# its status in $status and its pid in $pid. Output goes to $out/NAME.log.
run() {
  local name=$1
  shift
  bash "$cluster" "$@" > "$out/$name.log" 2>&1 &
  pid=$!
  status=0
  wait "$pid" || status=$?
}

# Nothing of cluster.sh's run `pid` is left: its names all start with kiln-PID or kPID.
check_clean() {
  local what=$1
  ! ip netns list | grep -q "^kiln-$pid-" || fail "$what: namespaces left: $(ip netns list | grep "^kiln-$pid-")"
  ! ip -o link show | grep -q ": k${pid}[bh]" || fail "$what: links left: $(ip -o link show | grep ": k${pid}[bh]")"
  ! compgen -G "${TMPDIR:-/tmp}/kiln-$pid.*" > /dev/null || fail "$what: temporary folder left"
}

# Skipped where namespaces cannot be made (not root, no ip netns, no bridge or tbf).
run probe1 -n 1 --timeout 30 -- true
if [ "$status" = 77 ]; then
  echo "cluster_test: SKIPPED: $(grep 'cannot make hosts' "$out/probe1.log")"
  exit 77
fi
[ "$status" = 0 ] || fail "one host running 'true' exited $status"
check_clean "one host"

# Two hosts, 100 Mbit/s: addresses and the link's rate.
bytes=$((16 << 20))
run shaped -n 2 --rate 100mbit --timeout 120 -- \
  sh -c 'echo "env $OMPI_COMM_WORLD_RANK $KILN_CLUSTER_ADDR $KILN_CLUSTER_HOST"; exec "$0" "$1"' \
  "$probe" "$bytes"
[ "$status" = 0 ] || fail "two hosts: exited $status"
check_clean "two hosts"
declare -A seen
for r in 0 1; do
  want=$(awk -v r="$r" '$1 == "env" && $2 == r { print $3 }' "$out/shaped.log")
  got=$(sed -n "s/^rank $r of 2: //p" "$out/shaped.log")
  [ -n "$want" ] || fail "rank $r: no KILN_CLUSTER_ADDR"
  [ "$got" = "$want" ] || fail "rank $r sees addresses '$got', not just its host's $want"
  [[ $want =~ ^10\.([0-9]+)\.([0-9]+)\.$((r + 1))$ ]] || fail "rank $r: $want is not host $r's address"
  ip -4 -o addr show | grep -q " $want/" && fail "rank $r's address $want is one of the root namespace's"
  seen[${want%.*}]=1
done
[ "${#seen[@]}" = 1 ] || fail "the two hosts are not on one subnet"
secs=$(sed -n 's/^transfer [0-9]* bytes rank 0 -> 1: \([0-9.]*\) s$/\1/p' "$out/shaped.log")
[ -n "$secs" ] || fail "no transfer time printed"
bound=$(awk -v b="$bytes" 'BEGIN { printf "%.4f", b * 8 / 100e6 }')
ratio=$(awk -v s="$secs" -v b="$bound" 'BEGIN { printf "%.2f", s / b }')
echo "cluster_test: 16 MiB over a 100 Mbit/s link: $secs s, the link's bound $bound s: ${ratio}x"
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9 && r <= 3) }' \
  || fail "the transfer took ${ratio}x the link's bound (want 0.9x..3x: is the link shaped?)"

# A command that fails: its status comes back, and everything is removed.
run failing -n 2 --timeout 60 -- sh -c 'exit 3'
[ "$status" != 0 ] || fail "a failing command exited 0"
check_clean "a failing command"

# --timeout ends a command that would hang: 124.
run timeout -n 2 --timeout 3 -- sleep 60
[ "$status" = 124 ] || fail "--timeout 3 on sleep 60 exited $status, not 124"
check_clean "--timeout"

# A link cut mid-transfer: MPI over TCP would wait for minutes, and mpiexec cannot reach the
# cut host's daemon to end it; --timeout still ends the run (124) and everything is removed.
bash "$cluster" -n 2 --rate 100mbit --timeout 8 -- "$probe" $((64 << 20)) > "$out/cut.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  grep -q "^rank 1 of 2" "$out/cut.log" && break
  sleep 0.1
done
sleep 1
ip link set "k${pid}h1" down || fail "could not cut k${pid}h1"
status=0
wait "$pid" || status=$?
[ "$status" = 124 ] || fail "a cut link with --timeout 8: exited $status, not 124"
check_clean "a cut link"

# Kiln across a link cut mid-collective: the ranks that can still talk raise naming the one
# they cannot hear, within the peer timeout, and end. (mpiexec itself cannot reach the cut
# host's daemon to end its rank, so the run ends by --timeout: 124 or the ranks' status.)
if [ -n "$cut" ]; then
  KILN_DIST_PEER_TIMEOUT=3 bash "$cluster" -n 3 --rate 1gbit --timeout 30 -- "$cut" 60 \
    > "$out/kiln-cut.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    grep -q "^all_sum 10$" "$out/kiln-cut.log" && break
    sleep 0.1
  done
  grep -q "^all_sum 10$" "$out/kiln-cut.log" || fail "Kiln's all_sums on 3 hosts never got going"
  ip link set "k${pid}h2" down || fail "could not cut k${pid}h2"
  status=0
  wait "$pid" || status=$?
  [ "$status" != 0 ] || fail "a cut link: the job exited 0"
  check_clean "Kiln across a cut link"
  for r in 0 1; do
    line=$(grep "^rank $r: all_sum [0-9]* raised after" "$out/kiln-cut.log") \
      || fail "rank $r did not raise after host 2's link was cut"
    [[ $line == *"rank 2 is unreachable from rank $r"* ]] || fail "rank $r raised, not naming rank 2: $line"
    secs=$(sed 's/.* raised after \([0-9.]*\) s.*/\1/' <<< "$line")
    awk -v s="$secs" 'BEGIN { exit !(s <= 10) }' || fail "rank $r raised only after $secs s"
    echo "cluster_test: link cut: rank $r raised after $secs s: ${line#*: distributed: }"
  done
fi

# SIGTERM while the ranks run (as a ctest timeout or Ctrl-C would): 143, nothing left.
bash "$cluster" -n 2 --timeout 60 -- sleep 60 > "$out/term.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  [ -n "$(ip netns pids "kiln-$pid-h1" 2> /dev/null)" ] && break
  sleep 0.1
done
inside=$(ip netns pids "kiln-$pid-h0" 2> /dev/null; ip netns pids "kiln-$pid-h1" 2> /dev/null)
[ -n "$inside" ] || fail "SIGTERM: the ranks never started"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" = 143 ] || fail "SIGTERM: exited $status, not 143"
check_clean "SIGTERM"
# The hosts' daemons and ranks are ended (the daemons' parent is init, which may not have
# reaped them yet: a zombie counts as ended).
for p in $inside; do
  state=$(awk '{ print $3 }' "/proc/$p/stat" 2> /dev/null || true)
  [ -z "$state" ] || [ "$state" = Z ] || fail "SIGTERM: process $p ($(cat "/proc/$p/comm")) of a host is still running"
done

# Not root: a clear reason and 77.
if command -v setpriv > /dev/null; then
  status=0
  setpriv --reuid=65534 --regid=65534 --clear-groups bash "$cluster" -n 2 -- true \
    > "$out/user.log" 2>&1 || status=$?
  [ "$status" = 77 ] || fail "as uid 65534: exited $status, not 77"
  grep -q "needs root" "$out/user.log" || fail "as uid 65534: no reason given"
fi
echo "cluster_test: passed"
