# spank_tessera.so on a real Slurm: munged, slurmctld and slurmd started
# here on a private configuration (own ports, spool, state, pid files; one
# node with a fake GPU GRES: gpu:2 on /dev/null and /dev/zero, 4 shards each),
# tesserad on a private socket, jobs of two real non-root users through srun
# and sbatch.
# Checks: the task sees TESSERA_LEASE (a lease a GPU), TESSERA_REGION_DIR
# and LD_PRELOAD;
# the lease is the job's user's, labelled with the job id, for the job's
# time limit, and is gone when the job ends, fails, is cancelled or runs
# out of time; a later step reuses it; bad options are refused at
# submission; --gres=shard:N gets N/4 of the GPU; neither user can release
# the other's lease. Needs root (CI runs as root).
source "$TESSERA_SOURCE_DIR/tests/integration/lease/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to run Slurm's daemons and create users"
for p in munged slurmctld slurmd srun sbatch scancel squeue useradd runuser; do
  command -v "$p" >/dev/null || skip "$p is missing (Debian: slurm-wlm, munge)"
done
: "${TESSERA_SPANK:?}" "${TESSERA_SHIM_SO:?}"

for u in tsr-alice tsr-bob; do
  id "$u" >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "$u"
done
# the users run the binaries and the plugin from a folder they can read
mkdir -p "$T_DIR/bin"
cp "$TESSERA" "$TESSERAD" "$TESSERA_SPANK" "$TESSERA_SHIM_SO" "$T_DIR/bin/"
chmod 755 "$T_DIR/bin" "$T_DIR/bin/"*
TESSERA=$T_DIR/bin/tessera
TESSERAD=$T_DIR/bin/tesserad
SPANK=$T_DIR/bin/$(basename "$TESSERA_SPANK")
SHIM=$T_DIR/bin/$(basename "$TESSERA_SHIM_SO")

S=$T_DIR/slurm
mkdir -p "$S/munge" "$S/spool" "$S/state" "$S/log" "$S/jobs"
chmod 755 "$S" "$S/munge"  # the users' srun reaches munged's socket in there
chmod 777 "$S/jobs"
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$S/munge/munge.key"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
NODE=$(hostname -s)
cat >"$S/slurm.conf" <<CONF
ClusterName=tsrtest
SlurmctldHost=$NODE
SlurmUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$S/munge/sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
KillWait=2
OverTimeLimit=0
InactiveLimit=0
PlugStackConfig=$S/plugstack.conf
GresTypes=gpu,shard
NodeName=$NODE CPUs=$(nproc) Gres=gpu:2,shard:8 State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
printf 'AutoDetect=off\nName=gpu File=/dev/null\nName=gpu File=/dev/zero\nName=shard Count=4 File=/dev/null\nName=shard Count=4 File=/dev/zero\n' >"$S/gres.conf"
echo "required $SPANK socket=$T_SOCK" >"$S/plugstack.conf"  # the shim: the one beside the plugin
export SLURM_CONF=$S/slurm.conf

stop_slurm() {
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/pid"; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  return 0
}
trap 'stop_slurm; cleanup' EXIT

munged -f --socket="$S/munge/sock" --key-file="$S/munge/munge.key" --log-file="$S/munge/log" \
  --pid-file="$S/munge/pid" --seed-file="$S/munge/seed" || skip "munged does not start here"
slurmctld -f "$S/slurm.conf" || { cat "$S/log/slurmctld.log"; exit 1; }
slurmd -f "$S/slurm.conf" || { cat "$S/log/slurmd.log"; exit 1; }
for i in $(seq 1 100); do
  sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break
  sleep 0.1
done
sinfo -h -o %t | grep -qE '^idle' || { echo "the node did not come up"; tail "$S/log/slurmd.log"; exit 1; }

# the daemon: one 80 GiB GPU, as the fake GRES has one
write_config
start_daemon

as() { local u=$1; shift; (cd "$S/jobs" && runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" "$@"); }
leases() { "$TESSERA" --socket "$T_SOCK" lease list --all --json "$@"; }
# lease_of JOB: "owner fraction_ppm sm_ppm id" of the job's lease, or nothing
lease_of() {
  leases --job "$1" | python3 -c 'import json,sys
l=json.load(sys.stdin)
print(" ".join(str(x) for x in (l[0]["owner"], l[0]["fraction_ppm"], l[0]["sm_ppm"], l[0]["id"], l[0]["remaining_ns"])) if l else "")'
}
wait_gone() { # wait_gone JOB WHAT
  local i
  for i in $(seq 1 150); do
    [ -z "$(lease_of "$1")" ] && { pass; return 0; }
    sleep 0.2
  done
  fail "$2: job $1's lease is still there: $(lease_of "$1")"
}

# ---- srun: the task's environment, the lease while it runs, gone after ---------
out=$(as tsr-alice srun -t 10 --gres=gpu:1 --gpu-mem=25% --gpu-sm=30% sh -c \
  'echo "lease=$TESSERA_LEASE region=$TESSERA_REGION_DIR preload=$LD_PRELOAD job=$SLURM_JOB_ID"' 2>&1 || true)
grep -q "^lease=[0-9][0-9]* region=$T_STATE/regions preload=$SHIM job=[0-9]" <<<"$out" && pass \
  || fail "srun's task environment: $out"
job=$(sed -n 's/.* job=\([0-9]*\)$/\1/p' <<<"$out")
wait_gone "$job" "srun ended"

# ---- two GPUs: a lease on each, both in TESSERA_LEASE ----------------------------------
out=$(as tsr-alice srun -t 5 --gres=gpu:2 --gpu-mem=10% sh -c \
  'echo "lease=$TESSERA_LEASE gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID"; sleep 2' 2>&1 || true)
j2=$(sed -n 's/.* job=\([0-9]*\)$/\1/p' <<<"$out")
grep -q "^lease=[0-9][0-9]*,[0-9][0-9]* gpus=0,1 job=" <<<"$out" && pass || fail "a two-GPU job: '$out'"
[ -n "$j2" ] && wait_gone "$j2" "a two-GPU job"

# ---- sbatch: the job's lease while it runs, reused by a second step ---------------
cat >"$S/jobs/two-steps.sh" <<'JOB'
#!/bin/sh
srun sh -c 'echo "step0 $TESSERA_LEASE"'
srun sh -c 'echo "step1 $TESSERA_LEASE"'
sleep 30
JOB
chmod 755 "$S/jobs/two-steps.sh"
# shards, so that bob's shard job below fits beside it; --gpu-mem wins over them
jid=$(as tsr-alice sbatch --parsable -t 5 --gres=shard:2 --gpu-mem=40GiB -o "$S/jobs/%j.out" two-steps.sh)
for i in $(seq 1 100); do [ -n "$(lease_of "$jid")" ] && grep -q step1 "$S/jobs/$jid.out" 2>/dev/null && break; sleep 0.2; done
read -r owner ppm sm id left <<<"$(lease_of "$jid")"
[ "$owner" = tsr-alice ] && [ "$ppm" = 500000 ] && pass || fail "sbatch's lease: '$(lease_of "$jid")' (want tsr-alice, 40GiB = 500000 ppm)"
[ -n "$left" ] && [ "$left" -le 300000000000 ] && [ "$left" -ge 240000000000 ] && pass \
  || fail "the lease is not for the job's 5 minutes: $left ns left"
s0=$(sed -n 's/^step0 //p' "$S/jobs/$jid.out"); s1=$(sed -n 's/^step1 //p' "$S/jobs/$jid.out")
[ -n "$s0" ] && [ "$s0" = "$id" ] && [ "$s1" = "$id" ] && pass || fail "the steps' leases: '$s0' '$s1', the job's $id"

# ---- two users: separate leases, neither releases the other's -----------------------
jb=$(as tsr-bob sbatch --parsable -t 5 --gres=shard:1 -o /dev/null --wrap 'srun sleep 30')
for i in $(seq 1 150); do [ -n "$(lease_of "$jb")" ] && break; sleep 0.2; done
[ -n "$(lease_of "$jb")" ] || squeue
read -r bowner bppm bsm bid bleft <<<"$(lease_of "$jb")"
[ "$bowner" = tsr-bob ] && [ "$bppm" = 250000 ] && pass || fail "bob's shard:1 lease: '$(lease_of "$jb")' (want 1/4)"
as tsr-bob "$TESSERA" --socket "$T_SOCK" lease release "$id" >/dev/null 2>&1 && fail "bob released alice's job lease" || pass
as tsr-alice "$TESSERA" --socket "$T_SOCK" lease release "$bid" >/dev/null 2>&1 && fail "alice released bob's job lease" || pass

# ---- scancel: the lease goes ----------------------------------------------------------
scancel "$jid"
wait_gone "$jid" "scancel"
scancel "$jb"
wait_gone "$jb" "scancel of bob's"

# ---- a failing job: the lease goes ------------------------------------------------------
as tsr-alice srun -t 5 --gres=gpu:1 --gpu-mem=10% sh -c 'echo job=$SLURM_JOB_ID; exit 3' >"$T_DIR/fail.out" 2>&1 && fail "the failing job succeeded"
jf=$(sed -n 's/^job=//p' "$T_DIR/fail.out")
[ -n "$jf" ] && wait_gone "$jf" "a failed job"

# ---- bad options are refused where the job is submitted ---------------------------------
out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=lots true 2>&1) && fail "srun --gpu-mem=lots ran"
grep -q -- "--gpu-mem=lots" <<<"$out" && pass || fail "srun's refusal does not name --gpu-mem: $out"
out=$(as tsr-alice sbatch -t 1 --gres=gpu:1 --gpu-sm=0 --wrap true 2>&1) && fail "sbatch --gpu-sm=0 was queued"
grep -q -- "--gpu-sm=0" <<<"$out" && pass || fail "sbatch's refusal does not name --gpu-sm: $out"
# --gpu-mem with no GPU asked for (srun --gpu-mem=25% python train.py): GPU 0,
# and the tasks see only it
out=$(as tsr-alice srun -t 5 --gpu-mem=25% sh -c 'echo "lease=$TESSERA_LEASE gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID"' 2>&1 || true)
grep -q "^lease=[0-9][0-9]* gpus=0 job=" <<<"$out" && pass || fail "--gpu-mem without --gres: '$out'"
jn=$(sed -n 's/.* job=\([0-9]*\)$/\1/p' <<<"$out")
[ -n "$jn" ] && wait_gone "$jn" "a job without --gres"

# ---- the time limit: the job is killed and its lease goes -------------------------------
jt=$(as tsr-alice sbatch --parsable -t 1 --gres=gpu:1 --gpu-mem=5% -o /dev/null --wrap 'srun sleep 600')
for i in $(seq 1 100); do [ -n "$(lease_of "$jt")" ] && break; sleep 0.2; done
[ -n "$(lease_of "$jt")" ] && pass || fail "the timed job has no lease"
for i in $(seq 1 600); do
  [ -z "$(lease_of "$jt")" ] && break
  sleep 0.25
done
[ -z "$(lease_of "$jt")" ] && pass || fail "a job past its time limit kept its lease"
state=$(sacct -n -X -j "$jt" -o State 2>/dev/null | head -1 || true)

# ---- no daemon: policy=required fails the step with a clear message ----------------------
stop_daemon
out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo RAN' 2>&1 || true)
grep -q RAN <<<"$out" && fail "a governed job ran with no tesserad"
grep -q "tessera: no tesserad" "$S/log/slurmd.log" && pass || fail "no tesserad: '$out'"
echo "optional $SPANK socket=$T_SOCK policy=optional" >"$S/plugstack.conf"
out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo ran lease=$TESSERA_LEASE' 2>&1 || true)
grep -q "^ran lease=$" <<<"$out" && pass || fail "policy=optional with no tesserad: '$out'"

finish
