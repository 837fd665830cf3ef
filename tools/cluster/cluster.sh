#!/usr/bin/env bash
# A cluster on one machine: N "hosts", each a network namespace behind its own shaped link to a
# bridge (a switch) in the root namespace, and a command run under mpiexec with one rank per host
# over Open MPI's TCP transport on those links. What a collective's bytes cost between real
# hosts (a link's bandwidth, cores free to compute while the bytes move) can then be seen here,
# where loopback and shared memory move them with the same cores at memory speed.
# docs/cluster.md says how to use it and what it measured.
#
#   tools/cluster/cluster.sh [-n HOSTS] [--rate RATE] [--delay DELAY] [--mca KEY VALUE]...
#                            [--timeout SECONDS] [--] COMMAND [ARGS...]
#
#   -n HOSTS         hosts, one rank on each (default 2)
#   --rate RATE      each link's bandwidth, each direction, in tc's units (default 1gbit;
#                    100mbit, 10gbit, ...)
#   --delay DELAY    each link's one-way delay (default 100us; 0 for none). A message between two
#                    hosts crosses two links (up to the bridge, down to the other host), so its
#                    one-way latency is twice this, as between two hosts on one switch. Needs the
#                    kernel's netem qdisc: where it is missing this says so and shapes rate only.
#   --mca KEY VALUE  passed to mpiexec as --mca KEY VALUE (repeatable)
#   --timeout S      end the command (and everything here) after S seconds, exit status 124
#
# Each rank runs in its host's namespace with KILN_CLUSTER_HOST (the namespace's name),
# KILN_CLUSTER_ADDR (its address), KILN_CLUSTER_LINK (the root namespace's end of its link, the
# one to cut: `ip link set "$KILN_CLUSTER_LINK" down` from the root namespace), KILN_CLUSTER_RATE
# and KILN_CLUSTER_DELAY set; KILN_CLUSTER_LINKS lists every host's link in rank order.
#
# Exit status: the command's (mpiexec's); 77 when this machine cannot make the hosts (not root,
# no `ip netns`, no bridge, veth or tbf in the kernel): tests treat 77 as skipped; 2 for a usage
# error; 124 after --timeout; 130/143 after SIGINT/SIGTERM. Everything made here (namespaces,
# links, the bridge, a temporary folder) is removed on every exit, including after a failure,
# Ctrl-C or SIGTERM; processes still in the namespaces are ended first.
set -euo pipefail

usage() {
  sed -n '9,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
cannot() {
  echo "cluster.sh: cannot make hosts on this machine: $*" >&2
  exit 77
}

hosts=2 rate=1gbit delay=100us timeout=0
mca=()
while [ $# -gt 0 ]; do
  case $1 in
    -n | --hosts) hosts=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --delay) delay=${2:?}; shift 2 ;;
    --mca) mca+=(--mca "${2:?}" "${3:?}"); shift 3 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) echo "cluster.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || usage
if ! [[ $hosts =~ ^[0-9]+$ ]] || [ "$hosts" -lt 1 ] || [ "$hosts" -gt 200 ]; then
  echo "cluster.sh: -n wants 1..200 hosts, not '$hosts'" >&2
  exit 2
fi
[[ $timeout =~ ^[0-9]+$ ]] || { echo "cluster.sh: --timeout wants whole seconds" >&2; exit 2; }

# tc's rate units, in bits per second: only to size the token bucket below.
rate_bits() {
  local v=${1,,} n unit
  [[ $v =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)(bit|bps)$ ]] || return 1
  n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
  awk -v n="$n" -v u="$unit" -v b="${BASH_REMATCH[4]}" 'BEGIN {
    m = (u == "k") ? 1e3 : (u == "m") ? 1e6 : (u == "g") ? 1e9 : (u == "t") ? 1e12 : 1
    if (b == "bps") m *= 8   # tc: "bps" is bytes per second
    printf "%.0f\n", n * m }'
}
bits=$(rate_bits "$rate") || { echo "cluster.sh: --rate '$rate' is not a tc rate (1gbit, 100mbit, ...)" >&2; exit 2; }

# What the machine must allow; each missing piece is a skip, with the reason.
[ "$(id -u)" = 0 ] || cannot "making network namespaces needs root (this is uid $(id -u))"
for c in ip tc mpiexec awk flock; do
  command -v "$c" > /dev/null || cannot "the command '$c' is missing (iproute2, openmpi-bin)"
done
ip netns list > /dev/null 2>&1 || cannot "'ip netns' does not work here"

prefix=kiln-$$  # unique while this script lives: every name below starts with it
short=k$$       # interface names in the root namespace must fit 15 characters
bridge=${short}br
made_ns=() made_links=() made_bridge="" tmp="" mpi_pid=""

# Ends what we started (mpiexec, then whatever is still inside our namespaces, by pid), then
# removes what we made. Runs on every exit; safe to run twice.
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local status=$? ns p left
  trap - EXIT INT TERM
  if [ -n "$mpi_pid" ] && kill -0 "$mpi_pid" 2> /dev/null; then
    kill -TERM "$mpi_pid" 2> /dev/null || true
    for _ in $(seq 50); do kill -0 "$mpi_pid" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$mpi_pid" 2> /dev/null || true
  fi
  # A namespace with processes in it outlives `ip netns del` (and keeps its link): end them.
  for sig in TERM KILL; do
    left=0
    for ns in "${made_ns[@]}"; do
      for p in $(ip netns pids "$ns" 2> /dev/null); do kill -"$sig" "$p" 2> /dev/null && left=1; done
    done
    [ "$left" = 0 ] && break
    for _ in $(seq 30); do
      left=0
      for ns in "${made_ns[@]}"; do [ -n "$(ip netns pids "$ns" 2> /dev/null)" ] && left=1; done
      [ "$left" = 0 ] && break
      sleep 0.1
    done
  done
  # Deleting a namespace deletes the veth end inside it and so its peer; a link made but not
  # yet moved into its namespace is deleted by name.
  for ns in "${made_ns[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
  for l in "${made_links[@]}"; do ip link del "$l" 2> /dev/null || true; done
  [ -n "$made_bridge" ] && { ip link del "$made_bridge" 2> /dev/null || true; }
  [ -n "$tmp" ] && rm -rf "$tmp"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")

# A /24 of 10.0.0.0/8 that no route of the root namespace touches, chosen and taken (the bridge
# gets its address) under a lock, so two clusters started at once never share one: two bridges
# with one subnet would make the root namespace's route to it ambiguous.
exec 9> /run/kiln-cluster.lock
flock 9
subnet=""
for i in $(seq 0 199); do
  n=$((($$ + i * 7919) % 40000))
  cand=10.$((200 + n / 256 % 50)).$((n % 256))
  ip route show | grep -q "^$cand\.0/" || { subnet=$cand; break; }
done
[ -n "$subnet" ] || cannot "no free 10.x.y.0/24 subnet for the hosts"
ip link add "$bridge" type bridge 2> "$tmp/err" || cannot "no bridge: $(cat "$tmp/err")"
made_bridge=$bridge
# The root namespace's own address on the bridge: mpiexec runs here, and Open MPI's
# out-of-band channel (oob_tcp_if_include, below) must find an interface in the subnet in
# every process that uses it, mpiexec included; the ranks reach it over their links.
ip addr add "$subnet.254/24" dev "$bridge"
ip link set "$bridge" up
flock -u 9

# The token bucket: rate-sized bursts of 1 ms, at least 128 KiB (a 64 KiB GSO segment must fit
# whole, or tbf splits or drops it); the queue holds 20 ms at the rate before dropping.
burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 / 1000; if (x < 131072) x = 131072; printf "%d\n", x }')
have_netem=1
shape() {  # shape NETNS_OR_EMPTY DEV
  local n=() dev=$2
  [ -n "$1" ] && n=(-n "$1")
  tc "${n[@]}" qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency 20ms \
    2> "$tmp/err" || cannot "tbf (the kernel's token bucket qdisc) refused: $(cat "$tmp/err")"
  if [ "$delay" != 0 ] && [ "$have_netem" = 1 ]; then
    if ! tc "${n[@]}" qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$delay" limit 100000 \
      2> "$tmp/err"; then
      have_netem=0
      echo "cluster.sh: note: no netem qdisc in this kernel ($(head -1 "$tmp/err")): links are" \
        "shaped to $rate without the $delay delay" >&2
    fi
  fi
}

links=()
for ((h = 0; h < hosts; h++)); do
  ns=$prefix-h$h link=${short}h$h
  ip netns add "$ns" 2> "$tmp/err" || cannot "'ip netns add' failed: $(cat "$tmp/err")"
  made_ns+=("$ns")
  ip link add "$link" type veth peer name kiln0 netns "$ns" 2> "$tmp/err" \
    || cannot "no veth pair: $(cat "$tmp/err")"
  made_links+=("$link")
  ip link set "$link" master "$bridge"
  ip link set "$link" up
  ip -n "$ns" addr add "$subnet.$((h + 1))/24" dev kiln0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set kiln0 up
  # Both directions of the link: the host's end shapes what it sends, the bridge's end what it
  # receives (full duplex, as a NIC's cable).
  shape "$ns" kiln0
  shape "" "$link"
  links+=("$link")
done

# How the ranks get into their hosts, and how they reach mpiexec. Each host is a "remote node"
# to mpiexec: --host names the namespaces, and the launch agent (plm_rsh_agent, ssh's place)
# starts that node's daemon (orted) inside its namespace with `ip netns exec` instead of ssh;
# the daemon starts the host's rank there. As between real hosts, each daemon runs the PMIx
# server its rank connects to over the namespace's own loopback, and reaches mpiexec over the
# out-of-band channel (oob_tcp_if_include: the subnet, so mpiexec listens on the bridge's
# address and every daemon can reach it through its link). Simpler ways do not work: ranks
# forked by mpiexec itself and moved into a namespace by a wrapper fail in MPI_Init
# ("OPAL ERROR: Unreachable", ext3x_client.c), because mpiexec's PMIx server listens on the
# root namespace's 127.0.0.1 only. No tree spawn: every daemon is started from here. The
# daemons stay attached (orte_leave_session_attached) instead of daemonizing: the agent lives as
# long as its daemon, so a daemon that fails to start ends mpiexec with an error, where a
# daemonized one that failed left mpiexec waiting for it forever.
cat > "$tmp/agent.sh" << EOF
#!/usr/bin/env bash
# mpiexec's launch agent: AGENT HOST COMMAND..., COMMAND being a shell command line (as ssh takes).
set -euo pipefail
links=($(printf '%q ' "${links[@]}"))
host=\$1
shift
r=\${host##*-h}
export KILN_CLUSTER_HOST=\$host KILN_CLUSTER_ADDR=$subnet.\$((r + 1))
export KILN_CLUSTER_LINK=\${links[\$r]} KILN_CLUSTER_LINKS="\${links[*]}"
export KILN_CLUSTER_RATE=$rate KILN_CLUSTER_DELAY=$([ "$have_netem" = 1 ] && echo "$delay" || echo 0)
# The host's own session folder, as on a host of its own: in one shared /tmp the daemons,
# all on a machine named alike, race to make the same folders (mkdir: File exists) and one
# fails to start.
export OMPI_MCA_orte_tmpdir_base=$tmp/h\$r
mkdir -p "\$OMPI_MCA_orte_tmpdir_base"
exec ip netns exec "\$host" /bin/sh -c "\$*"
EOF
chmod +x "$tmp/agent.sh"
host_list=$(printf -- "$prefix-h%d:1," $(seq 0 $((hosts - 1))))

# Open MPI over TCP only (self,tcp: no shared memory, which would bypass the links), on the
# hosts' subnet: the TCP btl finds the namespace's kiln0, the only interface of the subnet there.
# --bind-to none: with <= 2 ranks Open MPI pins each rank to one core and oneTBB gets no
# workers. As root Open MPI wants --allow-run-as-root. Ranks above cores: --oversubscribe.
# shellcheck disable=SC2054  # self,tcp is one argument
cmd=(mpiexec --allow-run-as-root --oversubscribe --bind-to none -n "$hosts"
  --host "${host_list%,}" --mca plm_rsh_agent "$tmp/agent.sh" --mca plm_rsh_no_tree_spawn 1
  --mca orte_leave_session_attached 1
  --mca pml ob1 --mca btl self,tcp
  --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24"
  "${mca[@]}" "$@")
echo "cluster.sh: $hosts hosts $prefix-h0..h$((hosts - 1)) on $subnet.0/24 (bridge $bridge)," \
  "links $rate each way, delay $([ "$have_netem" = 1 ] && echo "$delay" || echo "none (no netem)")" >&2

# mpiexec runs in the background so that a signal reaches our trap at once (bash runs traps
# only between commands; `wait` returns on a signal). --timeout: coreutils' timeout sends
# mpiexec SIGTERM (which it passes to the ranks), then SIGKILL 10 s later: mpiexec waits for
# every daemon to confirm, and a daemon behind a cut link never does. Either way the status is
# 124; cleanup ends what is left in the namespaces.
[ "$timeout" -gt 0 ] && cmd=(timeout -k 10 "$timeout" "${cmd[@]}")
started=$SECONDS
"${cmd[@]}" &
mpi_pid=$!
status=0
wait "$mpi_pid" || status=$?
mpi_pid=""
if [ "$timeout" -gt 0 ] && [ $((SECONDS - started)) -ge "$timeout" ] \
  && { [ "$status" = 124 ] || [ "$status" = 137 ]; }; then
  echo "cluster.sh: the command ran past --timeout $timeout s and was ended" >&2
  status=124
fi
exit "$status"
