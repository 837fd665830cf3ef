#!/usr/bin/env bash
# The Slurm check (make slurm-check, run by .ci/run): starts a single-node Slurm on this machine
# with its configuration, state and logs in BUILD/slurm-check (munged as the munge user on its own
# socket, then slurmctld and slurmd as root), submits `kiln run` of an artifact as a job array
# over shards (tools/slurm/kiln-array.sbatch) with an afterok step that checks every output's
# checksum against `kiln run` outside Slurm, waits with `sbatch --wait`, and stops the daemons.
# Where Slurm cannot start (not root, packages missing, a daemon that does not come up) it prints
# why and exits 0 as skipped; a wrong or missing output fails it.
#
#   tools/slurm/check.sh BUILD_DIR [TASKS]
set -uo pipefail
build=$(cd "${1:?usage: check.sh BUILD_DIR [TASKS]}" && pwd)
tasks=${2:-4}
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=$build/slurm-check
kiln=$build/tools/kiln
maker=$build/tests/test_distributed

skip() { echo "slurm-check: SKIPPED: $*"; exit 0; }
fail() { echo "slurm-check: FAILED: $*"; [ -f "$dir/log/slurmctld.log" ] && tail -n 20 "$dir/log/"*.log; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root to start slurmctld, slurmd and munged"
for c in munged slurmctld slurmd sbatch scontrol runuser; do
  command -v "$c" > /dev/null || skip "$c is missing (tools/install-deps.sh --slurm installs slurm-wlm and munge)"
done
[ -x "$kiln" ] && [ -x "$maker" ] || skip "build $kiln and $maker first (make test builds both)"
[ -r /etc/munge/munge.key ] || skip "no munge key (/etc/munge/munge.key; the munge package makes one)"

pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
}
trap stop EXIT

rm -rf "$dir"
mkdir -p "$dir"/{munge,state,spool,log,work}
chown munge:munge "$dir/munge"
chmod 0700 "$dir/munge"
sock=$dir/munge/munge.socket
runuser -u munge -- munged --force --socket="$sock" --pid-file="$dir/munge/munged.pid" \
  --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" \
  || skip "munged did not start ($(tail -2 "$dir/munge/munged.log" 2> /dev/null))"
for _ in $(seq 50); do [ -f "$dir/munge/munged.pid" ] && break; sleep 0.1; done
pids+=("$(cat "$dir/munge/munged.pid" 2> /dev/null)")

host=$(hostname -s)
cpus=$(nproc)
conf=$dir/slurm.conf
cat > "$conf" <<CONF
ClusterName=kilncheck
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
DependencyParameters=kill_invalid_depend
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=check Nodes=ALL Default=YES MaxTime=10 State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$conf
slurmctld -f "$conf" || skip "slurmctld did not start ($(tail -3 "$dir/log/slurmctld.log" 2> /dev/null))"
slurmd -f "$conf" || skip "slurmd did not start ($(tail -3 "$dir/log/slurmd.log" 2> /dev/null))"
for f in slurmctld slurmd; do
  for _ in $(seq 50); do [ -f "$dir/$f.pid" ] && break; sleep 0.1; done
  pids+=("$(cat "$dir/$f.pid" 2> /dev/null)")
done
up=0
for _ in $(seq 100); do
  if scontrol show node "$host" 2> /dev/null | grep -qE "State=(IDLE|MIXED)"; then up=1; break; fi
  sleep 0.2
done
[ $up = 1 ] || skip "the node did not come up: $(scontrol show node "$host" 2>&1 | grep -o 'State=[^ ]*')"

# The artifact (2 x + 1 in one process: test_distributed's DistributedArtifact.Save) and one
# shard per task, made by the artifact itself from the first input (shard i: i + 1 passes).
work=$dir/work
KILN_TEST_ARTIFACT_DIR=$work KILN_DEVICE=reference "$maker" --gtest_filter=DistributedArtifact.* \
  > "$dir/log/maker.log" 2>&1 || fail "making the artifact: $(tail -5 "$dir/log/maker.log")"
cp "$work/x.0.npy" "$work/shard.0.npy"
for ((i = 1; i < tasks; i++)); do
  "$kiln" run "$work/all_sum.kiln" -i "$work/shard.$((i - 1)).npy" -o "$work/shard.$i.npy" \
    || fail "making shard $i"
done
# What every task must write, computed outside Slurm.
(cd "$work" && for ((i = 0; i < tasks; i++)); do
  # kiln run says what it wrote on stdout: keep that out of the checksum list.
  "$kiln" run all_sum.kiln -i "shard.$i.npy" -o "want.$i.npy" >&2 && sha256sum "want.$i.npy" \
    | sed "s/want\.$i/out.$i/"
done > expected.sha256) || fail "kiln run outside Slurm"

export KILN="$kiln" KILN_ARTIFACT=$work/all_sum.kiln KILN_INPUT="$work/shard.{task}.npy" \
  KILN_OUTPUT="$work/out.{task}.npy" KILN_CACHE_DIR=$build/tests/kernel-cache KILN_DEVICE=reference
array=$(sbatch --parsable --array=0-$((tasks - 1)) --output="$dir/log/task-%a.log" \
  "$src/tools/slurm/kiln-array.sbatch") || fail "sbatch of the array"
echo "slurm-check: job array $array ($tasks tasks of kiln run)"
# A failed task makes the dependency impossible: kill_invalid_depend cancels the step then, and
# the timeout bounds the wait whatever happens.
timeout 300 sbatch --wait --dependency=afterok:"$array" --output="$dir/log/check.log" \
  --chdir="$work" --wrap="sha256sum -c expected.sha256" > /dev/null \
  || fail "the afterok step: $(cat "$dir/log/check.log" "$dir"/log/task-*.log 2> /dev/null)"
grep -c ": OK" "$dir/log/check.log" 2> /dev/null | grep -qx "$tasks" || fail "not every output checked: $(cat "$dir/log/check.log")"
echo "slurm-check: $tasks array tasks ran kiln run; the afterok step matched every checksum"
