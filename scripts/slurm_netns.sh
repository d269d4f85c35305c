#!/bin/sh
# docs/MPI.md's sbatch script, run under a real Slurm on namespace hosts
# (issue 32 item 4): 3 Slurm nodes dr-h0..dr-h2 (scripts/netns_cluster.sh,
# each slurmd in its host's network namespace, with its own host name, /tmp
# and cgroup mounts), slurmctld on dr-h0, the job submitted with sbatch from
# dr-h0: `srun --mpi=pmix bin/distref train --variant=mpi
# --cluster_resolver=slurm --distribution_strategy=multi_worker_mirrored`
# on 3 nodes x 1 task, Open MPI's BTL forced to tcp,self. Passes when the
# job's weights_sha256 is the reference one_device run's. Not part of make
# test (Slurm is not a dependency: apt-get install slurm-wlm munge);
# without Slurm, root or namespaces it says "slurm_netns: not supported:
# WHY" and exits 0. The Slurm configuration lives in a temporary folder
# (SLURM_CONF), not /etc/slurm; everything is taken down on exit.
#   [FLAGS="--all_reduce_alg=ring"] sh scripts/slurm_netns.sh [BIN]
# FLAGS: more flags for the job's distref (the reference run ignores them:
# they must not change the bits).
set -u
bin=$(cd "$(dirname "${1:-bin/distref}")" && pwd)/$(basename "${1:-bin/distref}")
here=$(cd "$(dirname "$0")" && pwd)
ns() { echo "slurm_netns: not supported: $*"; exit 0; }
[ "$(id -u)" = 0 ] && command -v ip > /dev/null 2>&1 || ns "needs root and iproute2 (network namespaces)"
for c in slurmctld slurmd sbatch munge munged; do command -v $c > /dev/null 2>&1 || ns "no $c (apt-get install slurm-wlm munge)"; done
. "$here/netns_lock.sh"
netns_lock "slurm_netns.sh" || exit 2
if ip netns list 2>/dev/null | grep -q '^dr-h'; then
    echo "slurm_netns: dr-h* namespaces exist already (another cluster): not touching them" >&2; exit 2
fi
pgrep -x slurmctld > /dev/null || pgrep -x slurmd > /dev/null && { echo "slurm_netns: Slurm daemons already run here: not touching them" >&2; exit 2; }
dir=$(mktemp -d /var/tmp/distref_slurm.XXXXXX)
cleanup() {
    pkill -x slurmd; pkill -x slurmctld
    n=0; while pgrep -x slurmd > /dev/null || pgrep -x slurmctld > /dev/null; do
        sleep 0.2; n=$((n + 1)); [ "$n" -lt 50 ] || break
    done
    sh "$here/netns_cluster.sh" down > /dev/null 2>&1; rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
sh "$here/netns_cluster.sh" up 3 > /dev/null || ns "netns_cluster.sh up 3 failed"
if ! munge -n > /dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null
    su -s /bin/sh munge -c /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force 2>/dev/null
    sleep 1; munge -n > /dev/null 2>&1 || ns "munged does not start"
fi
export SLURM_CONF="$dir/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=distref
SlurmctldHost=dr-h0(10.77.0.10)
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
ReturnToService=2
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmdSpoolDir=$dir/spool/%n
StateSaveLocation=$dir/state
SlurmUser=root
SwitchType=switch/none
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
NodeName=dr-h0 NodeAddr=10.77.0.10 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
NodeName=dr-h1 NodeAddr=10.77.0.11 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
NodeName=dr-h2 NodeAddr=10.77.0.12 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=dr-h[0-2] Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$dir/state" "$dir/spool/dr-h0" "$dir/spool/dr-h1" "$dir/spool/dr-h2"
# a "node": its namespace, host name, a private /tmp (PMIx's per-node
# directories) and the cgroup v1 mounts slurmd reads (ip netns exec gives a
# fresh /sys without them)
cg='mount -t tmpfs tmpfs /sys/fs/cgroup
for c in cpu cpuacct cpuset memory devices freezer blkio pids; do mkdir -p /sys/fs/cgroup/$c; mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || exit 1; done
mkdir -p /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd; mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified'
ip netns exec dr-h0 unshare --uts sh -c "hostname dr-h0; slurmctld" || ns "slurmctld does not start ($dir/slurmctld.log)"
for k in 0 1 2; do
    ip netns exec dr-h$k unshare --uts sh -c "hostname dr-h$k; $cg; mount -t tmpfs tmpfs /tmp; slurmd -N dr-h$k" ||
        ns "slurmd does not start on dr-h$k (cgroup v1 mounts or slurmd: $dir/slurmd-dr-h$k.log)"
done
t=0
until ip netns exec dr-h0 sinfo -h -o '%T %D' 2>/dev/null | grep -q '^idle 3$'; do
    sleep 1; t=$((t + 1)); [ "$t" -lt 30 ] || ns "the 3 nodes are not idle after 30 s: $(ip netns exec dr-h0 sinfo -h 2>&1)"
done
# The job: docs/MPI.md's script for 3 nodes x 1 task, on this machine's paths.
cat > "$dir/job.sh" <<JOB
#!/bin/bash
#SBATCH --job-name=distref
#SBATCH --nodes=3
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:05:00
#SBATCH --output=$dir/job-%j.txt
export OMP_NUM_THREADS=\$SLURM_CPUS_PER_TASK OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=eth0
srun --mpi=pmix $bin train --variant=mpi \\
    --cluster_resolver=slurm --distribution_strategy=multi_worker_mirrored \\
    --num_gpus=1 --global_batch_size=256 --experiment=mlp_synthetic --train_steps=20 ${FLAGS:-} \\
    --model_dir=$dir/runs/\$SLURM_JOB_ID
JOB
ip netns exec dr-h0 sbatch --wait "$dir/job.sh" > "$dir/sbatch.txt" 2>&1; rc=$?
got=$(grep -o 'weights_sha256=[0-9a-f]*' "$dir"/job-*.txt 2>/dev/null | head -1)
"$bin" train --variant=ref --distribution_strategy=one_device --experiment=mlp_synthetic --global_batch_size=256 \
    --train_steps=20 --model_dir="$dir/ref" > "$dir/ref.txt" 2>&1
want=$(grep -o 'weights_sha256=[0-9a-f]*' "$dir/ref.txt")
sed 's/^/    /' "$dir"/job-*.txt 2>/dev/null
if [ "$rc" = 0 ] && [ -n "$got" ] && [ "$got" = "$want" ]; then
    echo "slurm_netns: ok: sbatch on 3 Slurm nodes (srun --mpi=pmix, btl tcp,self): $got = the reference one_device's"
    exit 0
fi
echo "slurm_netns: FAILED: sbatch exit $rc, job's ${got:-no weights}, reference's ${want:-none}"
exit 1
