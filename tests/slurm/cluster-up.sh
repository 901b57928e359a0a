#!/bin/bash
# The test harness of the Slurm executor (tests/slurm_executor.rs), from ../shared/slurm/:
# batch_sched_delay=0 (start latency p50 ≈ 0.5 s instead of 0.7 s).
# A Slurm "cluster" of NODES simulated nodes (one slurmd per node, all on this machine,
# distinguished by `slurmd -N NAME` and a port per node), each with GPUS fake GPUs.
# Each GPU is its own GRES *type* (g0, g1, ...) so that a job can be pinned to exact
# GPU indices with --gres=gpu:g1:1,gpu:g3:1 (the shareq executor needs that).
# Slurm makes no decisions of its own: one partition, no Slurm preemption.
# Usage: NODES=2 GPUS=4 BASE=<scratch dir> bash cluster-up.sh ; then `source $BASE/env`
# Needs root and: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge
set -euo pipefail
BASE=${BASE:?set BASE to a scratch directory for the cluster}
NODES=${NODES:-2}
GPUS=${GPUS:-4}
TYPED=${TYPED:-1}            # 1: per-index GRES types (pinnable); 0: plain gpu:N
CTLD_PORT=${CTLD_PORT:-16817}
NODE_PORT0=${NODE_PORT0:-17000}   # node k listens on NODE_PORT0+k
EXTRA_CONF=${EXTRA_CONF:-}
HOST=$(hostname -s)
rm -rf "$BASE"; mkdir -p "$BASE"/{etc,state,spool,log,run,dev,munge,out}
T0=$(date +%s.%N)

# munge with a private key and socket (the system munged is not touched)
chown munge:munge "$BASE/munge"; chmod 0755 "$BASE/munge"
dd if=/dev/urandom of="$BASE/munge/munge.key" bs=1 count=1024 status=none
chown munge:munge "$BASE/munge/munge.key"; chmod 0400 "$BASE/munge/munge.key"
runuser -u munge -- /usr/sbin/munged --key-file="$BASE/munge/munge.key" \
  --socket="$BASE/munge/munge.sock" --pid-file="$BASE/munge/munged.pid" \
  --log-file="$BASE/munge/munged.log" --seed-file="$BASE/munge/munged.seed"

NODELINES=""; GRESLINES=""
for n in $(seq 1 "$NODES"); do
  name=n$n; mkdir -p "$BASE/dev/$name" "$BASE/spool/$name"
  gres=""
  for i in $(seq 0 $((GPUS-1))); do
    ln -s /dev/null "$BASE/dev/$name/nvidia$i"
    if [ "$TYPED" = 1 ]; then
      gres="$gres${gres:+,}gpu:g$i:1"
      GRESLINES+="NodeName=$name Name=gpu Type=g$i File=$BASE/dev/$name/nvidia$i"$'\n'
    fi
  done
  if [ "$TYPED" != 1 ]; then
    gres="gpu:$GPUS"
    GRESLINES+="NodeName=$name Name=gpu File=$BASE/dev/$name/nvidia[0-$((GPUS-1))]"$'\n'
  fi
  NODELINES+="NodeName=$name NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((NODE_PORT0+n)) CPUs=8 RealMemory=1000 Gres=$gres State=UNKNOWN"$'\n'
done

cat > "$BASE/etc/slurm.conf" <<EOF
ClusterName=scaleout
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$BASE/munge/munge.sock
SlurmUser=root
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$BASE/log/jobcomp.txt
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1,batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
PreemptType=preempt/none
MinJobAge=300
$EXTRA_CONF
${NODELINES}PartitionName=shareq Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
printf '%s' "$GRESLINES" > "$BASE/etc/gres.conf"
cat > "$BASE/env" <<EOF
export SLURM_CONF=$BASE/etc/slurm.conf
export BASE=$BASE
EOF
export SLURM_CONF=$BASE/etc/slurm.conf
slurmctld -i -f "$SLURM_CONF"
for n in $(seq 1 "$NODES"); do slurmd -N n$n -f "$SLURM_CONF"; done
for i in $(seq 1 150); do
  [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cx idle)" = "$NODES" ] && break; sleep 0.2; done
echo "cluster up"
sinfo -N -o '%N %P %T %G %c'
