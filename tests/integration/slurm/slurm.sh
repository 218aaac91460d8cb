# spank_tessera.so on a real Slurm: munged, slurmctld and slurmd started
# here on a private configuration (own ports, spool, state, pid files; one
# node with a fake GPU GRES: gpu:2 on two device files $S/dev/nvidia0 and
# $S/dev/nvidia1, 4 shards each), tesserad on a private socket with two
# declared devices whose minors are crossed (device 0 is /dev/nvidia1),
# jobs of two real non-root users through srun, sbatch and salloc.
# Checks: the task sees TESSERA_LEASE (a lease a GPU), TESSERA_REGION_DIR
# and LD_PRELOAD; each lease is on the tesserad device whose minor is the
# number of the device file of the GPU Slurm gave the job (by gres.conf's
# order, not Slurm's index, nor CUDA_VISIBLE_DEVICES, also when Slurm puts
# the job on the second GPU, when gres.conf lists the files out of order,
# and under ConstrainDevices); the lease is the job's user's, labelled with
# the job id, for the job's time limit (a job without one: plugstack's
# max_lease, under tesserad's), and is gone when the job ends, fails, is
# cancelled or runs out of time; a later step reuses it; bad options, bad
# plugstack arguments, --gpu-mem/--gpu-sm on a job without a GPU and
# --gpu-sm alone on one without shards are refused at submission (srun,
# sbatch, salloc) and make no lease; a step without a GPU of its own is
# refused in slurmstepd whatever its environment says; --gres=shard:N gets
# N/4 of the GPU, and --gpu-mem no more than that; a step refused on its
# second GPU keeps no lease it made on the first, and leaves an earlier
# step's alone; neither user can release the other's lease; slurmctld not
# answering at step start makes no lease; a refused step makes srun exit
# non-zero with the reason on its stderr; the lease follows the job's end
# when an admin moves it (scontrol update TimeLimit=, later and earlier:
# the running step's follower, every follow=1s here), a step starting
# renews a reused lease that is off the job's end, follow=0 turns the
# follower off, and a bad follow= is refused. Needs root (CI runs as root).
#
# slurm.sh [main|constrain]: main (the default) runs all that but
# ConstrainDevices; constrain runs the ConstrainDevices part alone
# (task/cgroup, proctrack/cgroup) as its own ctest, and exits 77 when
# slurmd or task/cgroup cannot start a step here: a sandbox without usable
# cgroups shows as a skipped test, never as a silent pass.
PART=${1:-main}
case "$PART" in main | constrain) ;; *) echo "usage: slurm.sh [main|constrain]"; exit 2 ;; esac
source "$TESSERA_SOURCE_DIR/tests/integration/lease/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to run Slurm's daemons and create users"
for p in munged slurmctld slurmd srun sbatch salloc scancel squeue sinfo scontrol useradd runuser mknod python3; do
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
mkdir -p "$S/munge" "$S/spool" "$S/state" "$S/log" "$S/jobs" "$S/dev"
chmod 755 "$S" "$S/munge"  # the users' srun reaches munged's socket in there
chmod 777 "$S/jobs"
dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$S/munge/munge.key"
# The fake GPUs' device files, numbered as NVIDIA's are (/dev/nvidiaN: major
# 195, minor N). Slurm numbers a GPU's file by the digits of its name, and
# stats it (under ConstrainDevices it also allows it in the job's devices
# cgroup and denies the other); nothing opens them. Two of /dev/null's 1:3
# would not do under ConstrainDevices: denying one would deny both.
mknod "$S/dev/nvidia0" c 195 0
mknod "$S/dev/nvidia1" c 195 1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
NODE=$(hostname -s)
# slurm_conf TASKPLUGIN PROCTRACK
slurm_conf() {
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
ProctrackType=$2
TaskPlugin=$1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
KillWait=2
OverTimeLimit=0
InactiveLimit=0
MessageTimeout=5
Prolog=$S/prolog.sh
PlugStackConfig=$S/plugstack.conf
GresTypes=gpu,shard
NodeName=$NODE CPUs=$(nproc) Gres=gpu:2,shard:8 State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
}
# gres_conf N M: Slurm's GPU 0 is $S/dev/nvidiaN, its GPU 1 $S/dev/nvidiaM
gres_conf() {
  printf 'AutoDetect=off\nName=gpu File=%s\nName=gpu File=%s\nName=shard Count=4 File=%s\nName=shard Count=4 File=%s\n' \
    "$S/dev/nvidia$1" "$S/dev/nvidia$2" "$S/dev/nvidia$1" "$S/dev/nvidia$2" >"$S/gres.conf"
  ORDER=("$1" "$2")
}
if [ "$PART" = constrain ]; then
  # gres.conf out of order: Slurm's GPU 1 is /dev/nvidia0
  printf 'ConstrainDevices=yes\n' >"$S/cgroup.conf"
  slurm_conf task/cgroup proctrack/cgroup
  gres_conf 1 0
else
  slurm_conf task/none proctrack/linuxproc
  gres_conf 0 1
fi
# slurmd runs this (as root) before a job's first step on the node: one
# job, marked by the test, finds slurmctld stopped when its step starts
cat >"$S/prolog.sh" <<PROLOG
#!/bin/sh
if [ -e "$S/stop-ctld" ]; then rm -f "$S/stop-ctld"; kill -STOP "\$(cat "$S/slurmctld.pid")"; fi
exit 0
PROLOG
chmod 755 "$S/prolog.sh"
# tesserad's max_lease is 1h here (daemon_conf), under the plugin's 30-day
# default: the plugin is told so. A running step asks slurmctld for its
# job's end every second (follow=1s), not every 30 s, so that a moved end
# shows within the test's patience.
PLUG="socket=$T_SOCK max_lease=1h follow=1s"
echo "required $SPANK $PLUG" >"$S/plugstack.conf"  # the shim: the one beside the plugin
export SLURM_CONF=$S/slurm.conf

stop_slurm() {
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/pid"; do
    [ -f "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 0.5
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/pid"; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
  return 0
}
trap 'stop_slurm; cleanup' EXIT

wait_idle() {
  local i
  for i in $(seq 1 150); do
    sinfo -h -o %t 2>/dev/null | grep -qE '^idle' && return 0
    sleep 0.2
  done
  echo "the node did not come up"; tail "$S/log/slurmd.log"; exit 1
}
# restart_slurm [ctld]: slurmd (and slurmctld) again, on the files as they are now
restart_slurm() {
  local pid d
  for d in slurmd ${1:+slurmctld}; do
    pid=$(cat "$S/$d.pid")
    kill "$pid"
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  [ -n "${1:-}" ] && { slurmctld -f "$S/slurm.conf" || { tail "$S/log/slurmctld.log"; exit 1; }; }
  slurmd -f "$S/slurm.conf" || { tail "$S/log/slurmd.log"; exit 1; }
  wait_idle
}
wait_no_jobs() {
  for i in $(seq 1 150); do [ -z "$(squeue -h 2>/dev/null)" ] && return 0; sleep 0.2; done
  fail "jobs still there: $(squeue -h)"
}

munged -f --socket="$S/munge/sock" --key-file="$S/munge/munge.key" --log-file="$S/munge/log" \
  --pid-file="$S/munge/pid" --seed-file="$S/munge/seed" || skip "munged does not start here"
slurmctld -f "$S/slurm.conf" || { cat "$S/log/slurmctld.log"; exit 1; }
if ! slurmd -f "$S/slurm.conf"; then
  [ "$PART" = constrain ] &&
    skip "ConstrainDevices: slurmd with task/cgroup does not start here: $(tail -3 "$S/log/slurmd.log" | tr '\n' ' ' | cut -c1-300)"
  cat "$S/log/slurmd.log"; exit 1
fi
wait_idle

# The daemon: two 80 GiB devices. Their minors are crossed, so that a lease
# on the device of the number of Slurm's file is not the device of Slurm's
# index: tesserad's device 0 is /dev/nvidia1, its device 1 /dev/nvidia0.
daemon_conf() { # daemon_conf MINOR_OF_DEVICE_0 MINOR_OF_DEVICE_1
  printf '[daemon]\ndevices = config\nsync = none\nmax_lease = 1h\n' >"$T_CONF"
  printf '\n[device.%s]\nname = Test GPU %s\nmemory = 80GiB\nsms = 132\nminor = %s\n' 0 A "$1" 1 B "$2" >>"$T_CONF"
  MINOR=("$1" "$2")
}
daemon_conf 1 0
start_daemon

as() { local u=$1; shift; (cd "$S/jobs" && runuser -u "$u" -- env SLURM_CONF="$SLURM_CONF" "$@"); }
leases() { "$TESSERA" --socket "$T_SOCK" lease list --all --json "$@"; }
creates() { grep -c '"event":"create"' "$T_STATE/audit.log" 2>/dev/null || true; }
# lease_of JOB: "owner fraction_ppm sm_ppm id remaining_ns device" of the job's lease, or nothing
lease_of() {
  leases --job "$1" | python3 -c 'import json,sys
l=json.load(sys.stdin)
print(" ".join(str(x) for x in (l[0]["owner"], l[0]["fraction_ppm"], l[0]["sm_ppm"], l[0]["id"], l[0]["remaining_ns"], l[0]["device"])) if l else "")'
}
# devices_of JOB: the devices of the job's leases, sorted ("0 1")
devices_of() {
  leases --job "$1" | python3 -c 'import json,sys; print(" ".join(str(d) for d in sorted(x["device"] for x in json.load(sys.stdin))))'
}
# tdev I: the tesserad device of Slurm's GPU I (its gres.conf file's number, then the minor)
tdev() {
  local d
  for d in 0 1; do [ "${MINOR[$d]}" = "${ORDER[$1]}" ] && { echo "$d"; return; }; done
  echo none
}
wait_gone() { # wait_gone JOB WHAT
  local i
  for i in $(seq 1 150); do
    [ -z "$(lease_of "$1")" ] && { pass; return 0; }
    sleep 0.2
  done
  fail "$2: job $1's lease is still there: $(lease_of "$1")"
}
wait_lease() { # wait_lease JOB: until the job has a lease (30 s at most)
  local i
  for i in $(seq 1 150); do [ -n "$(lease_of "$1")" ] && return 0; sleep 0.2; done
  return 1
}
# A task's report: its lease(s), their devices (from tesserad, as the
# job's user sees them), Slurm's GPUs and CUDA's numbering.
REPORT='echo "lease=$TESSERA_LEASE region=$TESSERA_REGION_DIR preload=$LD_PRELOAD job=$SLURM_JOB_ID"
echo "slurm=$SLURM_STEP_GPUS cuda=$CUDA_VISIBLE_DEVICES"
devs=
for l in $(echo "$TESSERA_LEASE" | tr , " "); do
  devs="$devs,$('"$TESSERA"' --socket '"$T_SOCK"' lease show "$l" --json | tr -d " \n" | sed -n "s/.*\"device\":\([0-9]*\).*/\1/p")"
done
echo "devices=${devs#,}"'
field() { sed -n "s/^.*$1=\([^ ]*\).*$/\1/p" <<<"$2" | head -1; }

# ---- ConstrainDevices (slurm.sh constrain): CUDA_VISIBLE_DEVICES counts from 0 in each job ----
# gres.conf lists /dev/nvidia1 first and tesserad's minors are crossed:
# Slurm's GPU 1 (/dev/nvidia0) is tesserad's device 1, the job's CUDA
# device 0. A sandbox where task/cgroup cannot start a step skips (77).
if [ "$PART" = constrain ]; then
  probe=$(srun -t 1 --gres=gpu:1 true 2>&1) ||
    skip "ConstrainDevices: task/cgroup cannot start a step here: $(tr '\n' ' ' <<<"$probe" | cut -c1-300)"
  hold=$(as tsr-bob sbatch --parsable -t 5 --gres=gpu:1 -o /dev/null --wrap 'sleep 60')
  for i in $(seq 1 100); do squeue -h -j "$hold" -o %t | grep -q R && break; sleep 0.2; done
  out=$(as tsr-alice srun -t 5 --gres=gpu:1 --gpu-mem=10% sh -c "$REPORT" 2>&1 || true)
  [ "$(field slurm "$out")" = 1 ] && [ "$(field cuda "$out")" = 0 ] && [ "$(field devices "$out")" = "$(tdev 1)" ] \
    && [ "$(tdev 1)" = 1 ] && pass \
    || fail "under ConstrainDevices a job on Slurm's GPU 1 is leased on tesserad device '$(field devices "$out")', want 1: $out"
  job=$(sed -n 's/.* job=\([0-9]*\)$/\1/p' <<<"$out")
  [ -n "$job" ] && wait_gone "$job" "the constrained job"
  scancel "$hold"
  wait_no_jobs
  finish
  exit
fi

# ---- tesserad tells each device's minor ---------------------------------------------
minors=$("$TESSERA" --socket "$T_SOCK" devices --json | python3 -c 'import json,sys; print(" ".join(str(d["minor"]) for d in json.load(sys.stdin)))')
[ "$minors" = "1 0" ] && pass || fail "devices --json: minors '$minors', want '1 0'"

# ---- srun: the task's environment, the lease while it runs, gone after ---------
out=$(as tsr-alice srun -t 10 --gres=gpu:1 --gpu-mem=25% --gpu-sm=30% sh -c "$REPORT" 2>&1 || true)
grep -q "^lease=[0-9][0-9]* region=$T_STATE/regions preload=$SHIM job=[0-9]" <<<"$out" && pass \
  || fail "srun's task environment: $out"
# Slurm's GPU 0 is /dev/nvidia0, which is tesserad's device 1
slurm=$(field slurm "$out"); devs=$(field devices "$out")
[ "$slurm" = 0 ] && [ "$(field cuda "$out")" = 0 ] && [ "$devs" = "$(tdev 0)" ] && [ "$devs" = 1 ] && pass \
  || fail "a job on Slurm's GPU 0 (/dev/nvidia0) is leased on tesserad device '$devs', want 1: $out"
job=$(sed -n 's/.* job=\([0-9]*\)$/\1/p' <<<"$out")
wait_gone "$job" "srun ended"

# ---- two GPUs: a lease on each, both in TESSERA_LEASE ----------------------------------
out=$(as tsr-alice srun -t 5 --gres=gpu:2 --gpu-mem=10% sh -c "$REPORT" 2>&1 || true)
j2=$(sed -n 's/.* job=\([0-9]*\)$/\1/p' <<<"$out")
grep -q "^lease=[0-9][0-9]*,[0-9][0-9]* region=" <<<"$out" && grep -q "^slurm=0,1 cuda=0,1$" <<<"$out" && pass \
  || fail "a two-GPU job: '$out'"
[ "$(field devices "$out" | tr , '\n' | sort | tr '\n' ' ')" = "0 1 " ] && pass || fail "a two-GPU job's devices: $out"
[ -n "$j2" ] && wait_gone "$j2" "a two-GPU job"

# ---- sbatch: the job's lease while it runs, reused by a second step ---------------
# the shards are asked for in the script (#SBATCH), --gpu-mem on the command line
cat >"$S/jobs/two-steps.sh" <<'JOB'
#!/bin/sh
#SBATCH --gres=shard:2
srun sh -c 'echo "step0 $TESSERA_LEASE gpus=$SLURM_STEP_GPUS"'
srun sh -c 'echo "step1 $TESSERA_LEASE"'
sleep 30
JOB
chmod 755 "$S/jobs/two-steps.sh"
# shards, so that bob's shard job below fits beside it; --gpu-mem sizes the
# lease, within them (40GiB of 80GiB: the 2 of 4 shards exactly)
jid=$(as tsr-alice sbatch --parsable -t 5 --gpu-mem=40GiB -o "$S/jobs/%j.out" two-steps.sh)
for i in $(seq 1 100); do [ -n "$(lease_of "$jid")" ] && grep -q step1 "$S/jobs/$jid.out" 2>/dev/null && break; sleep 0.2; done
read -r owner ppm sm id left dev <<<"$(lease_of "$jid")"
[ "$owner" = tsr-alice ] && [ "$ppm" = 500000 ] && pass || fail "sbatch's lease: '$(lease_of "$jid")' (want tsr-alice, 40GiB = 500000 ppm)"
[ -n "$left" ] && [ "$left" -le 300000000000 ] && [ "$left" -ge 240000000000 ] && pass \
  || fail "the lease is not for the job's 5 minutes: $left ns left"
s0=$(sed -n 's/^step0 \([^ ]*\) .*/\1/p' "$S/jobs/$jid.out"); s1=$(sed -n 's/^step1 //p' "$S/jobs/$jid.out")
[ -n "$s0" ] && [ "$s0" = "$id" ] && [ "$s1" = "$id" ] && pass || fail "the steps' leases: '$s0' '$s1', the job's $id"
g=$(sed -n 's/^step0 .* gpus=//p' "$S/jobs/$jid.out")
[ -n "$g" ] && [ "$dev" = "$(tdev "$g")" ] && pass || fail "sbatch's lease is on device $dev, its shards on Slurm's GPU '$g'"

# ---- two users: separate leases, neither releases the other's -----------------------
jb=$(as tsr-bob sbatch --parsable -t 5 --gres=shard:1 -o "$S/jobs/%j.out" --wrap 'srun sh -c "echo gpus=\$SLURM_STEP_GPUS; sleep 30"')
wait_lease "$jb" || squeue
read -r bowner bppm bsm bid bleft bdev <<<"$(lease_of "$jb")"
[ "$bowner" = tsr-bob ] && [ "$bppm" = 250000 ] && pass || fail "bob's shard:1 lease: '$(lease_of "$jb")' (want 1/4)"
for i in $(seq 1 50); do grep -q gpus= "$S/jobs/$jb.out" 2>/dev/null && break; sleep 0.2; done
g=$(sed -n 's/^gpus=//p' "$S/jobs/$jb.out")
[ -n "$g" ] && [ "$bdev" = "$(tdev "$g")" ] && pass || fail "bob's lease is on device $bdev, his shard on Slurm's GPU '$g'"
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
wait_no_jobs

# ---- a job without a time limit: the lease lasts max_lease (plugstack), not 30 days ---------
# tesserad refuses a lease past its max_lease (1h here); the plugin asks for
# max_lease=1h, so the job is governed, not refused
ju=$(as tsr-alice sbatch --parsable -t UNLIMITED --gres=gpu:1 --gpu-mem=10% -o "$S/jobs/%j.out" --wrap 'sleep 60')
wait_lease "$ju" || true
read -r owner ppm sm id left dev <<<"$(lease_of "$ju")"
[ -n "$left" ] && [ "$left" -le 3600000000000 ] && [ "$left" -ge 3500000000000 ] && pass \
  || fail "a job without a time limit: lease '$(lease_of "$ju")' (want about 1h left), output: $(cat "$S/jobs/$ju.out" 2>/dev/null)"
scancel "$ju"
wait_gone "$ju" "scancel of the unlimited job"
wait_no_jobs
# a bad max_lease= (or any bad argument) fails the plugin, naming it, rather
# than run on a setting it did not read
for bad in soon 0s; do
  echo "required $SPANK $PLUG max_lease=$bad" >"$S/plugstack.conf"
  rc=0; out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo RAN' 2>&1) || rc=$?
  [ "$rc" -ne 0 ] && ! grep -q RAN <<<"$out" && grep -q "spank_tessera: plugstack.conf: max_lease=$bad: " <<<"$out" && pass \
    || fail "plugstack max_lease=$bad: srun exited $rc: '$out'"
done
echo "required $SPANK $PLUG shards_per_gpu=4x" >"$S/plugstack.conf"
rc=0; out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q "spank_tessera: plugstack.conf: shards_per_gpu=4x: " <<<"$out" && pass \
  || fail "plugstack shards_per_gpu=4x: srun exited $rc: '$out'"
# follow= is a duration of 1s or more, or 0 (off): a unit is required
for bad in soon 500ms 30; do
  echo "required $SPANK $PLUG follow=$bad" >"$S/plugstack.conf"
  rc=0; out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo RAN' 2>&1) || rc=$?
  [ "$rc" -ne 0 ] && ! grep -q RAN <<<"$out" && grep -q "spank_tessera: plugstack.conf: follow=$bad: " <<<"$out" && pass \
    || fail "plugstack follow=$bad: srun exited $rc: '$out'"
done
echo "required $SPANK $PLUG" >"$S/plugstack.conf"
wait_no_jobs

# ---- --gpu-mem on a shard job: no more than its shards ------------------------------------
# Slurm counts the GPU's other shards free: a lease past the job's would
# take what Slurm gives other jobs
before=$(creates)
rc=0; out=$(as tsr-alice srun -t 5 --gres=shard:1 --gpu-mem=100% sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && ! grep -q RAN <<<"$out" \
  && grep -q -- "tessera: --gpu-mem with --gres=shard: --gpu-mem=100% is more than the step's shards give: 1 of the 4 shards" <<<"$out" \
  && pass || fail "--gres=shard:1 --gpu-mem=100% (exit $rc): '$out'"
rc=0; out=$(as tsr-alice srun -t 5 --gres=shard:1 --gpu-mem=21GiB sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--gpu-mem=21GiB is more than the step's shards give" <<<"$out" && pass \
  || fail "--gres=shard:1 --gpu-mem=21GiB (80GiB GPU, 4 shards; exit $rc): '$out'"
wait_no_jobs
[ "$(creates)" = "$before" ] && pass || fail "a shard job asking past its shards made a lease"
# up to its shards is its to ask: 20GiB of 80GiB is its one shard exactly
out=$(as tsr-alice srun -t 5 --gres=shard:1 --gpu-mem=20GiB sh -c '"'"$TESSERA"'" --socket '"$T_SOCK"' lease show "$TESSERA_LEASE" --json | tr -d " \n"' 2>&1 || true)
grep -q '"fraction_ppm":250000' <<<"$out" && pass || fail "--gres=shard:1 --gpu-mem=20GiB: '$out'"
wait_no_jobs

# ---- bad options are refused where the job is submitted ---------------------------------
out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=lots true 2>&1) && fail "srun --gpu-mem=lots ran"
grep -q -- "--gpu-mem=lots" <<<"$out" && pass || fail "srun's refusal does not name --gpu-mem: $out"
out=$(as tsr-alice sbatch -t 1 --gres=gpu:1 --gpu-sm=0 --wrap true 2>&1) && fail "sbatch --gpu-sm=0 was queued"
grep -q -- "--gpu-sm=0" <<<"$out" && pass || fail "sbatch's refusal does not name --gpu-sm: $out"

# ---- --gpu-mem or --gpu-sm with no GPU asked for: refused at submission, no lease --------
before=$(creates)
rc=0; out=$(as tsr-alice srun -t 5 --gpu-mem=100% sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && ! grep -q RAN <<<"$out" && grep -q -- "--gpu-mem asks for no GPU" <<<"$out" && pass \
  || fail "srun --gpu-mem=100% without a GPU (exit $rc): '$out'"
rc=0; out=$(as tsr-alice sbatch -t 5 --gpu-mem=10% --gpu-sm=30% --wrap 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--gpu-mem with --gpu-sm asks for no GPU" <<<"$out" && pass \
  || fail "sbatch --gpu-mem without a GPU (exit $rc): '$out'"
rc=0; out=$(as tsr-alice salloc -t 5 --gpu-sm=30% true 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--gpu-sm asks for no GPU" <<<"$out" && pass \
  || fail "salloc --gpu-sm without a GPU (exit $rc): '$out'"
# a GPU in a script that asks for none on its first line is not one
printf '#!/bin/sh\necho hello\n#SBATCH --gres=gpu:1\n' >"$S/jobs/late.sh"
rc=0; out=$(as tsr-alice sbatch -t 5 --gpu-mem=10% late.sh 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "tessera: --gpu-mem asks for no GPU" <<<"$out" && pass \
  || fail "sbatch took an #SBATCH line after the first command (exit $rc): '$out'"
# --gpu-sm alone asks for an SM share of a lease of nothing: on whole GPUs
# it needs --gpu-mem (slurmstepd would make no lease), with shards it goes
# with theirs
rc=0; out=$(as tsr-alice srun -t 5 --gres=gpu:1 --gpu-sm=30% sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && ! grep -q RAN <<<"$out" && grep -q -- "tessera: --gpu-sm without --gpu-mem on a job without shards" <<<"$out" \
  && pass || fail "srun --gres=gpu:1 --gpu-sm=30% (exit $rc): '$out'"
rc=0; out=$(as tsr-alice sbatch -t 5 -G 1 --gpu-sm=30% --wrap 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--gpu-sm without --gpu-mem on a job without shards" <<<"$out" && pass \
  || fail "sbatch -G 1 --gpu-sm=30% (exit $rc): '$out'"
sleep 1
[ "$(creates)" = "$before" ] && [ -z "$(squeue -h)" ] && pass || fail "a refused submission made a lease or a job"
# a GPU asked for through an input variable is one: SLURM_GPUS for srun
out=$(as tsr-alice env SLURM_GPUS=1 srun -t 5 --gpu-mem=10% sh -c "$REPORT" 2>&1 || true)
grep -q "^lease=[0-9][0-9]* " <<<"$out" && [ "$(field devices "$out")" = "$(tdev "$(field slurm "$out")")" ] && pass \
  || fail "SLURM_GPUS=1 srun --gpu-mem=10%: '$out'"
# srun in salloc's allocation asks for nothing itself: the allocation's GPU is its
out=$(as tsr-alice salloc -t 5 --gres=gpu:1 --gpu-mem=10% srun sh -c "$REPORT" 2>&1 || true)
grep -q "^lease=[0-9][0-9]* " <<<"$out" && [ "$(field devices "$out")" = "$(tdev "$(field slurm "$out")")" ] && pass \
  || fail "salloc --gres=gpu:1 --gpu-mem=10% srun: '$out'"
wait_no_jobs
# --gpu-sm alone with shards: a lease of the shards with that SM share
# (made by the batch step, used by its srun); srun --gpu-sm alone in a job
# on whole GPUs is refused
LEASE_JSON='"'"$TESSERA"'" --socket '"$T_SOCK"' lease show "$TESSERA_LEASE" --json | tr -d " \n"; echo'
jsm=$(as tsr-alice sbatch --parsable -t 5 --gres=shard:1 --gpu-sm=30% -o "$S/jobs/%j.out" --wrap "srun sh -c '$LEASE_JSON'; echo \"step exit=\$?\"")
for i in $(seq 1 150); do grep -q "step exit=" "$S/jobs/$jsm.out" 2>/dev/null && break; sleep 0.2; done
out=$(cat "$S/jobs/$jsm.out" 2>/dev/null || true)
grep -q '"fraction_ppm":250000' <<<"$out" && grep -q '"sm_ppm":300000' <<<"$out" && grep -q "step exit=0" <<<"$out" && pass \
  || fail "srun --gpu-sm=30% in a --gres=shard:1 job: '$out'"
jsg=$(as tsr-alice sbatch --parsable -t 5 --gres=gpu:1 -o "$S/jobs/%j.out" --wrap "srun --gpu-sm=30% sh -c 'echo RAN'; echo \"step exit=\$?\"")
for i in $(seq 1 150); do grep -q "step exit=" "$S/jobs/$jsg.out" 2>/dev/null && break; sleep 0.2; done
out=$(cat "$S/jobs/$jsg.out" 2>/dev/null || true)
! grep -q "^RAN" <<<"$out" && grep -q -- "--gpu-sm without --gpu-mem on a job without shards" <<<"$out" && ! grep -q "step exit=0" <<<"$out" \
  && pass || fail "srun --gpu-sm=30% in a --gres=gpu:1 job: '$out'"
# a step of a shard job that has no shards itself is not run ungoverned
# quietly (the submission check passes it: the allocation has shards)
rc=0; out=$(as tsr-alice salloc -t 5 --gres=shard:1 --gpu-sm=30% srun --gres=none sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && ! grep -q "^RAN" <<<"$out" && grep -q "tessera: --gpu-sm: this step has no --gpu-mem and no shards" <<<"$out" \
  && pass || fail "salloc --gres=shard:1 --gpu-sm=30% srun --gres=none (exit $rc): '$out'"
wait_no_jobs

# ---- slurmstepd: a step without a GPU of its own is refused, whatever it claims ---------
# the batch step has the job's GPU (Slurm's GPU 1: bob holds GPU 0); the
# step of --gres=none has none, and its SLURM_STEP_GPUS and SLURM_JOB_GPUS
# are the user's invention
hold=$(as tsr-bob sbatch --parsable -t 5 --gres=gpu:1 -o /dev/null --wrap 'sleep 60')  # ungoverned: no --gpu-mem
for i in $(seq 1 100); do squeue -h -j "$hold" -o %t | grep -q R && break; sleep 0.2; done
before=$(creates)
jn=$(as tsr-alice sbatch --parsable -t 5 --gres=gpu:1 --gpu-mem=10% -o "$S/jobs/%j.out" --wrap \
  'SLURM_STEP_GPUS=1 SLURM_JOB_GPUS=1 srun --gres=none sh -c "echo STEP RAN"; echo "step exit=$?"; echo "batch gpus=$SLURM_JOB_GPUS"')
for i in $(seq 1 150); do grep -q "step exit=" "$S/jobs/$jn.out" 2>/dev/null && break; sleep 0.2; done
out=$(cat "$S/jobs/$jn.out" 2>/dev/null || true)
! grep -q "STEP RAN" <<<"$out" && grep -q "step exit=1" <<<"$out" && grep -q "tessera: this step: Slurm gave it no GPU" <<<"$out" \
  && pass || fail "a --gres=none step with a forged SLURM_STEP_GPUS: '$out'"
wait_gone "$jn" "the fenced job"
[ "$(creates)" = "$(( before + 1 ))" ] && pass \
  || fail "the forged step made a lease: $(( $(creates) - before - 1 )) beyond the batch step's"
scancel "$hold"
wait_no_jobs

# ---- Slurm's second GPU: its lease is on its device, not on Slurm's index ---------------
hold=$(as tsr-bob sbatch --parsable -t 5 --gres=gpu:1 -o /dev/null --wrap 'sleep 60')  # ungoverned: no --gpu-mem
for i in $(seq 1 100); do squeue -h -j "$hold" -o %t | grep -q R && break; sleep 0.2; done
out=$(as tsr-alice srun -t 5 --gres=gpu:1 --gpu-mem=10% sh -c "$REPORT" 2>&1 || true)
[ "$(field slurm "$out")" = 1 ] && [ "$(field devices "$out")" = "$(tdev 1)" ] && [ "$(tdev 1)" = 0 ] && pass \
  || fail "a job on Slurm's GPU 1 (/dev/nvidia1) is leased on tesserad device '$(field devices "$out")', want 0: $out"
scancel "$hold"
wait_no_jobs

# ---- the time limit: the job is killed and its lease goes -------------------------------
# the GPU asked for through sbatch's input variable
jt=$(as tsr-alice env SBATCH_GRES=gpu:1 sbatch --parsable -t 1 --gpu-mem=5% -o /dev/null --wrap 'srun sleep 600')
wait_lease "$jt" && pass || fail "the timed job has no lease"
for i in $(seq 1 600); do
  [ -z "$(lease_of "$jt")" ] && break
  sleep 0.25
done
[ -z "$(lease_of "$jt")" ] && pass || fail "a job past its time limit kept its lease"
wait_no_jobs

# ---- the job's end moves (scontrol update TimeLimit=): its lease follows ----------------
# deadline_of JOB: the job's lease's deadline (s since the epoch), or nothing
deadline_of() {
  leases --job "$1" | python3 -c 'import json,sys
l=json.load(sys.stdin)
print(l[0]["deadline_ns"] // 10**9 if l else "")'
}
# start_of JOB: the job's start (s since the epoch) as slurmctld has it;
# its end is this plus its time limit
start_of() { date -d "$(squeue -h -j "$1" -o %S)" +%s; }
# wait_deadline JOB WANT: until the job's lease ends within 5 s of WANT
# (15 s at most: the follower asks every second); prints where it ends
wait_deadline() {
  local i d=
  for i in $(seq 1 75); do
    d=$(deadline_of "$1")
    [ -n "$d" ] && [ "$(( d > $2 ? d - $2 : $2 - d ))" -le 5 ] && { echo "$d"; return 0; }
    sleep 0.2
  done
  echo "${d:-none}"
  return 1
}
# a job of 10 minutes; its batch step makes the lease and follows the job.
# A second step waits for $go: it starts after the admin has moved the
# lease off the job's end, and must move it back.
go=$S/jobs/follow-$$
jm=$(as tsr-alice sbatch --parsable -t 10 --gres=gpu:1 --gpu-mem=5% -o "$S/jobs/%j.out" --wrap \
  "while [ ! -e $go ]; do sleep 0.2; done; srun sh -c 'echo step \$TESSERA_LEASE'; sleep 600")
wait_lease "$jm" || fail "the followed job has no lease: $(cat "$S/jobs/$jm.out" 2>/dev/null)"
start=$(start_of "$jm")
mid=$(lease_of "$jm" | cut -d' ' -f4)
d=$(wait_deadline "$jm" $((start + 600))) && pass \
  || fail "a job of 10 minutes started at $start: its lease ends at $d, not at $((start + 600))"
scontrol update JobId="$jm" TimeLimit=20
d=$(wait_deadline "$jm" $((start + 1200))) && pass \
  || fail "TimeLimit=20: the lease ends at $d, not at the job's new end $((start + 1200))"
scontrol update JobId="$jm" TimeLimit=5
d=$(wait_deadline "$jm" $((start + 300))) && pass \
  || fail "TimeLimit=5: the lease ends at $d, not at the job's new end $((start + 300))"
[ "$(lease_of "$jm" | cut -d' ' -f4)" = "$mid" ] && pass || fail "the followed lease is not $mid: '$(lease_of "$jm")'"
grep -q "tessera: job $jm: end moved to .*; lease $mid renewed to " "$S/log/slurmd.log" && pass \
  || fail "slurmd's log does not say the lease moved: $(grep "tessera: job $jm" "$S/log/slurmd.log" | tail -3)"
# the lease off the job's end (an admin's renewal: the end did not move,
# so the follower leaves it); the step starting reuses it and renews it
"$TESSERA" --socket "$T_SOCK" lease renew "$mid" --for 2m >/dev/null
d=$(deadline_of "$jm"); want=$(( $(date +%s) + 120 ))
[ -n "$d" ] && [ "$(( d > want ? d - want : want - d ))" -le 5 ] && pass || fail "the admin's renewal: the lease ends at $d"
sleep 2
[ "$(deadline_of "$jm")" = "$d" ] && pass || fail "the follower renewed a lease whose job's end did not move: $(deadline_of "$jm")"
touch "$go"
for i in $(seq 1 150); do grep -q "^step " "$S/jobs/$jm.out" 2>/dev/null && break; sleep 0.2; done
[ "$(sed -n 's/^step //p' "$S/jobs/$jm.out")" = "$mid" ] && pass || fail "the second step's lease: $(cat "$S/jobs/$jm.out")"
d=$(wait_deadline "$jm" $((start + 300))) && pass \
  || fail "a step reusing a lease that ends at $d left it off the job's end $((start + 300))"
scancel "$jm"
wait_gone "$jm" "scancel of the followed job"
wait_no_jobs
# follow=0: no follower; a moved end leaves the lease where it was
echo "required $SPANK $PLUG follow=0" >"$S/plugstack.conf"
jm=$(as tsr-alice sbatch --parsable -t 10 --gres=gpu:1 --gpu-mem=5% -o "$S/jobs/%j.out" --wrap 'sleep 600')
wait_lease "$jm" || fail "a job under follow=0 has no lease: $(cat "$S/jobs/$jm.out" 2>/dev/null)"
start=$(start_of "$jm")
d=$(wait_deadline "$jm" $((start + 600))) || fail "a job of 10 minutes under follow=0: its lease ends at $d"
scontrol update JobId="$jm" TimeLimit=20
sleep 4
[ "$(deadline_of "$jm")" = "$d" ] && pass || fail "follow=0: the lease moved to $(deadline_of "$jm") (was $d)"
scancel "$jm"
wait_gone "$jm" "scancel of the job under follow=0"
echo "required $SPANK $PLUG" >"$S/plugstack.conf"
wait_no_jobs

# ---- a refused step: srun exits non-zero and says why --------------------------------------
# tesserad has no room: an admin's leases take 90% of each device
"$TESSERA" --socket "$T_SOCK" lease create --device 0 --mem 90% --for 10m --user tsr-alice >/dev/null
"$TESSERA" --socket "$T_SOCK" lease create --device 1 --mem 90% --for 10m --user tsr-alice >/dev/null
rc=0; out=$(as tsr-bob srun -t 5 --gres=shard:2 sh -c 'echo RAN' 2>&1) || rc=$?
[ "$rc" -ne 0 ] && ! grep -q RAN <<<"$out" && grep -q "tessera: lease not created" <<<"$out" && pass \
  || fail "a shard job tesserad has no room for: srun exited $rc: '$out'"
for l in $(leases | python3 -c 'import json,sys; print(" ".join(str(x["id"]) for x in json.load(sys.stdin)))'); do
  "$TESSERA" --socket "$T_SOCK" lease release "$l" >/dev/null
done
wait_no_jobs

# ---- refused on its second GPU: the step keeps no lease it made, and an earlier step's stays ----
# lease_on DEVICE JOB: the id of the job's lease on tesserad device DEVICE
lease_on() {
  leases --job "$2" | python3 -c 'import json,sys; print(" ".join(str(x["id"]) for x in json.load(sys.stdin) if x["device"] == '"$1"'))'
}
go=$S/jobs/go-$$
# step 0 leases both GPUs; then Slurm's GPU 1 loses its lease and its room,
# and step 1 finds GPU 0's lease (step 0's: it stays) and is refused on GPU 1
jr=$(as tsr-alice sbatch --parsable -t 5 --gres=gpu:2 -o "$S/jobs/%j.out" --wrap \
  "srun --gpu-mem=10% sh -c 'echo step0 \$TESSERA_LEASE'; while [ ! -e $go ]; do sleep 0.2; done; srun --gpu-mem=10% sh -c 'echo STEP1 RAN'; echo \"step1 exit=\$?\"; sleep 60")
for i in $(seq 1 150); do grep -q "^step0 " "$S/jobs/$jr.out" 2>/dev/null && break; sleep 0.2; done
[ "$(devices_of "$jr")" = "0 1" ] && pass || fail "step 0 of a two-GPU job: leases on devices '$(devices_of "$jr")'"
keep=$(lease_on "$(tdev 0)" "$jr")
"$TESSERA" --socket "$T_SOCK" lease release "$(lease_on "$(tdev 1)" "$jr")" >/dev/null
fill=$("$TESSERA" --socket "$T_SOCK" lease create --device "$(tdev 1)" --mem 95% --for 10m --user tsr-bob --json \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
before=$(creates)
touch "$go"
for i in $(seq 1 150); do grep -q "step1 exit=" "$S/jobs/$jr.out" 2>/dev/null && break; sleep 0.2; done
out=$(cat "$S/jobs/$jr.out" 2>/dev/null || true)
! grep -q "STEP1 RAN" <<<"$out" && grep -q "tessera: lease not created" <<<"$out" && ! grep -q "step1 exit=0" <<<"$out" \
  && pass || fail "step 1, refused on GPU 1: '$out'"
[ -n "$keep" ] && [ "$(lease_on "$(tdev 0)" "$jr")" = "$keep" ] && [ "$(creates)" = "$before" ] && pass \
  || fail "step 1's refusal took step 0's lease $keep on device $(tdev 0): the job's leases now '$(lease_on "$(tdev 0)" "$jr")'"
scancel "$jr"
wait_gone "$jr" "scancel of the two-step job"
# a step that makes a lease on GPU 0 and is refused on GPU 1 releases the
# first at once (the job runs on, its batch step ungoverned)
jr=$(as tsr-alice sbatch --parsable -t 5 --gres=gpu:2 -o "$S/jobs/%j.out" --wrap \
  "srun --gpu-mem=10% sh -c 'echo STEP RAN'; echo \"step exit=\$?\"; sleep 60")
for i in $(seq 1 150); do grep -q "step exit=" "$S/jobs/$jr.out" 2>/dev/null && break; sleep 0.2; done
out=$(cat "$S/jobs/$jr.out" 2>/dev/null || true)
! grep -q "STEP RAN" <<<"$out" && grep -q "tessera: lease not created" <<<"$out" && pass \
  || fail "a step with no room on its second GPU: '$out'"
[ "$(creates)" = "$(( before + 1 ))" ] && pass || fail "the step did not make its first GPU's lease before the refusal"
[ -z "$(lease_of "$jr")" ] && pass || fail "the lease made on GPU 0 outlived the step's refusal: '$(lease_of "$jr")'"
scancel "$jr"
"$TESSERA" --socket "$T_SOCK" lease release "$fill" >/dev/null
wait_no_jobs

# restart_daemon MINOR_OF_DEVICE_0 MINOR_OF_DEVICE_1: tesserad again, its devices' minors changed
restart_daemon() {
  stop_daemon
  daemon_conf "$1" "$2"
  start_daemon
}

# ---- gres.conf out of order: Slurm's GPU 0 is /dev/nvidia1 ----------------------------------
# and tesserad's devices are in order now: Slurm's GPU 0 is tesserad's
# device 1, neither its index (0) nor the device whose minor is its index
gres_conf 1 0
restart_slurm
restart_daemon 0 1
out=$(as tsr-alice srun -t 5 --gres=gpu:1 --gpu-mem=10% sh -c "$REPORT" 2>&1 || true)
[ "$(field slurm "$out")" = 0 ] && [ "$(field devices "$out")" = "$(tdev 0)" ] && [ "$(tdev 0)" = 1 ] && pass \
  || fail "Slurm's GPU 0 as /dev/nvidia1 is leased on tesserad device '$(field devices "$out")', want 1: $out"
wait_no_jobs

# ---- slurmctld does not answer when the step starts: no lease --------------------------------
# prolog.sh stops slurmctld just before the job's batch step starts; the
# plugin's question for the job's end time then goes unanswered
# (MessageTimeout=5); slurmctld goes on once the step has been decided.
ctld_silent() { # ctld_silent: submits a marked job, CONTs slurmctld after; sets JOB and OUT
  before=$(creates)
  touch "$S/stop-ctld"
  JOB=$(as tsr-alice sbatch --parsable -t 5 --gres=gpu:1 --gpu-mem=10% -o "$S/jobs/%j.out" --wrap 'echo "ran lease=$TESSERA_LEASE"')
  local i
  for i in $(seq 1 100); do [ -e "$S/stop-ctld" ] || break; sleep 0.2; done
  grep -q '^State:.*T' "/proc/$(cat "$S/slurmctld.pid")/status" && pass || fail "the prolog did not stop slurmctld"
  # the step's own refusal, not a follower's poll of an earlier job
  for i in $(seq 1 200); do grep -q "tessera: no lease: slurmctld did not answer" "$S/log/slurmd.log" && break; sleep 0.2; done
  kill -CONT "$(cat "$S/slurmctld.pid")"
  for i in $(seq 1 150); do [ -s "$S/jobs/$JOB.out" ] && [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ] && break; sleep 0.2; done
  OUT=$(cat "$S/jobs/$JOB.out" 2>/dev/null || true)
}
ctld_silent
grep -q "tessera: no lease: slurmctld did not answer" <<<"$OUT" && ! grep -q "^ran" <<<"$OUT" && pass \
  || fail "policy=required, slurmctld silent: the job's output: '$OUT'"
[ "$(creates)" = "$before" ] && pass || fail "a lease was made with slurmctld silent: $(tail -1 "$T_STATE/audit.log")"
echo "optional $SPANK $PLUG policy=optional" >"$S/plugstack.conf"
: >"$S/log/slurmd.log"
ctld_silent
grep -q "^ran lease=$" <<<"$OUT" && grep -q "slurmctld did not answer.*runs without a GPU fence (policy=optional)" "$S/log/slurmd.log" \
  && pass || fail "policy=optional, slurmctld silent: '$OUT', $(grep tessera "$S/log/slurmd.log" | tail -2)"
[ "$(creates)" = "$before" ] && pass || fail "a lease was made with slurmctld silent (optional)"
echo "required $SPANK $PLUG" >"$S/plugstack.conf"
wait_no_jobs

# ---- no daemon: policy=required fails the step with a clear message ----------------------
stop_daemon
rc=0; out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo RAN' 2>&1) || rc=$?
grep -q RAN <<<"$out" && fail "a governed job ran with no tesserad"
grep -q "tessera: no tesserad" "$S/log/slurmd.log" && pass || fail "no tesserad: '$out'"
[ "$rc" -ne 0 ] && grep -q "tessera: no tesserad" <<<"$out" && pass \
  || fail "no tesserad, policy=required: srun exited $rc, its stderr: '$out'"
echo "optional $SPANK $PLUG policy=optional" >"$S/plugstack.conf"
out=$(as tsr-alice srun -t 1 --gres=gpu:1 --gpu-mem=10% sh -c 'echo ran lease=$TESSERA_LEASE' 2>&1 || true)
grep -q "^ran lease=$" <<<"$out" && pass || fail "policy=optional with no tesserad: '$out'"

finish
