#!/bin/sh
# Crash consistency of a run directory: kill a checkpointing run at the
# write, fsync, rename and openat calls it makes on its model_dir (strace
# fault injection), resume it, and require the uninterrupted run's
# weights_sha256 and every step's loss_bits exactly once, in order, and no
# temporary file left. Where strace cannot trace (no ptrace), random kills
# (SIGKILL after a random delay) stand in.
#
#   scripts/durability.sh DISTREF [POINTS]              mirrored, 2 replicas (the conformance suite)
#   scripts/durability.sh --all DISTREF [POINTS]        every strategy and variant that checkpoints
#   scripts/durability.sh --only LIST DISTREF [POINTS]  some of them: LIST = one_device/ref,parameter_server/ref,...
#
# POINTS: kill points per system call, spread over the run (0, the default:
# every call that touches model_dir). Under MPI the kill lands on rank 0,
# the rank that writes model_dir (mpirun's MPMD form runs it under strace)
# and the resume is the same mpirun command. parameter_server/mpi-free runs
# in arrival order, so its expected outcome is the reference replaying the
# resumed run's own recording (ps_schedule.jsonl).
#
# Prints one line per kill point, "durability NAME (...): N of T bit-exact"
# per configuration, and with --all or --only a table of them; exits 1 when
# any resume differs. make conformance runs the first form (and against the
# DR_MUTANT_CKPT_FIRST build, which it must catch); make test runs a sample
# of every configuration (scripts/test_durability.sh).
set -u
ALL_CONFIGS="one_device/ref mirrored/ref mirrored/openmp central_storage/ref tpu/ref tpu/openmp
multi_worker_mirrored/threads multi_worker_mirrored/mpi parameter_server/ref parameter_server/mpi-seeded
parameter_server/mpi-free"
configs=legacy
case ${1:-} in
    --all) configs=$ALL_CONFIGS; shift ;;
    --only) configs=$(echo "${2:?--only needs a list}" | tr ',' ' '); shift 2 ;;
esac
BIN=${1:?usage: durability.sh [--all | --only LIST] DISTREF [POINTS]}
MAXPTS=${2:-0}
W=$(mktemp -d /tmp/distref_durability_XXXXXX)
trap 'rm -rf "$W"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
SMALL="--experiment=linear_ones --global_batch_size=16 --epochs=0 --train_steps=8 --checkpoint_every=2 --l2=0.001 --seed=5"
TF_MWM='{"cluster":{"worker":["w0:1","w1:1"]},"task":{"type":"worker","index":0}}'
TF_PS='{"cluster":{"chief":["c:1"],"worker":["w0:1","w1:1"],"ps":["p0:1"]},"task":{"type":"chief","index":0}}'

# config NAME: sets RUN (flags), NP (MPI ranks; 0 = one process), TF (TF_CONFIG), FREE
config() {
    NP=0 TF="" FREE=0 RUN="$SMALL"
    case $1 in
        legacy) RUN="--distribution_strategy=mirrored --num_gpus=2 --synthetic_examples=80 --global_batch_size=16 --epochs=0 --train_steps=9 --checkpoint_every=2 --l2=0.001" ;;
        one_device/ref) RUN="$RUN --variant=ref --distribution_strategy=one_device" ;;
        mirrored/ref) RUN="$RUN --variant=ref --distribution_strategy=mirrored --num_gpus=2" ;;
        mirrored/openmp) RUN="$RUN --variant=openmp --distribution_strategy=mirrored --num_gpus=2" ;;
        central_storage/ref) RUN="$RUN --variant=ref --distribution_strategy=central_storage --num_gpus=2" ;;
        tpu/ref) RUN="$RUN --variant=ref --distribution_strategy=tpu --tpu=v3-8" ;;
        tpu/openmp) RUN="$RUN --variant=openmp --distribution_strategy=tpu --tpu=v3-8" ;;
        multi_worker_mirrored/threads) RUN="$RUN --variant=openmp --distribution_strategy=multi_worker_mirrored" TF=$TF_MWM ;;
        multi_worker_mirrored/mpi) RUN="$RUN --variant=mpi --distribution_strategy=multi_worker_mirrored" NP=2 ;;
        parameter_server/ref) RUN="$RUN --variant=ref --distribution_strategy=parameter_server" TF=$TF_PS ;;
        parameter_server/mpi-seeded) RUN="$RUN --variant=mpi --distribution_strategy=parameter_server" NP=4 ;;
        parameter_server/mpi-free) RUN="$RUN --variant=mpi --distribution_strategy=parameter_server --schedule=free" NP=4 FREE=1 ;;
        *) echo "durability.sh: unknown configuration $1; expected one of: $ALL_CONFIGS" >&2; exit 2 ;;
    esac
}

# launch DIR [STRACE ARGS...]: the configuration's run on DIR, rank 0 (or the process) under strace if given.
# mpirun gets 120 s: under heavy load Open MPI 4.1.4's mpirun was once seen waiting 16 minutes on
# ranks that had already exited (zombies) after the traced rank 0 was killed.
launch() {
    _d=$1; shift
    if [ "$NP" -gt 0 ]; then
        # shellcheck disable=SC2086
        env -u TF_CONFIG timeout -s KILL 120 mpirun --oversubscribe -np 1 "$@" "$BIN" train --model_dir="$_d" $RUN \
            : -np $((NP - 1)) "$BIN" train --model_dir="$_d" $RUN
    elif [ -n "$TF" ]; then
        # shellcheck disable=SC2086
        TF_CONFIG=$TF "$@" "$BIN" train --model_dir="$_d" $RUN
    else
        # shellcheck disable=SC2086
        env -u TF_CONFIG "$@" "$BIN" train --model_dir="$_d" $RUN
    fi
}

# What a finished run left: every step's loss_bits in order, and the weights.
outcome() {
    sed -n 's/.*"step":\([0-9]*\).*"loss_bits":"\(0x[0-9a-f]*\)".*/\1 \2/p' "$1/metrics.jsonl" | tr '\n' ' '
    sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"
}

# expected DIR: the outcome DIR must have (a free run's: the reference replaying its recording)
expected() {
    if [ "$FREE" = 1 ]; then
        rm -rf "$W/replay"
        # shellcheck disable=SC2086
        TF_CONFIG=$TF_PS "$BIN" train --model_dir="$W/replay" $(echo "$RUN" | sed 's/--variant=mpi/--variant=ref/;
            s/--schedule=free//') --replay_schedule="$1/ps_schedule.jsonl" > /dev/null 2>&1 && outcome "$W/replay"
    else
        echo "$want"
    fi
}

check() {   # DIR LABEL: resume DIR to the end and compare
    if launch "$1" < /dev/null > /dev/null 2> "$W/err" && [ "$(outcome "$1")" = "$(expected "$1")" ] &&
       [ -z "$(find "$1" -name '*.tmp.*' 2>/dev/null)" ]; then
        exact=$((exact + 1)); echo "${pre}kill at $2: resume bit-exact"
    else
        echo "${pre}kill at $2: resume DIFFERS $(grep -v '^\[\|^---\|^$' "$W/err" | head -c 300)"
    fi
    total=$((total + 1))
}

# points SC: the indices (per tracee, as strace's when= counts) of rank 0's
# SC calls on model_dir in the count run's trace, all or POINTS spread out
# (the middles of POINTS equal slices)
points() {
    awk -v sc="$1" -v dir="$W/md" -v max="$MAXPTS" '
        NR == 1 { main = $1 }
        $1 == main && index($2, sc "(") == 1 { n++; if (index($0, dir "/") || index($0, dir ">") || index($0, dir "\"")) p[++k] = n }
        END { if (max == 0 || k <= max) for (j = 1; j <= k; j++) printf "%d of %d\n", p[j], n
              else for (j = 1; j <= max; j++) printf "%d of %d\n", p[int((j - 0.5) * k / max) + 1], n }' "$W/trace"
}

sweep() {   # one configuration
    name=$1 pre="$1: "
    [ "$1" = legacy ] && pre=""
    config "$1"
    rm -rf "$W/ref" "$W/md"
    launch "$W/ref" > /dev/null 2>&1 || { echo "$name: the uninterrupted run failed" >&2; return 1; }
    want=$(outcome "$W/ref")
    total=0 exact=0
    if strace -f -o /dev/null true 2>/dev/null; then
        mode=strace
        launch "$W/md" strace -f -y -qq -e trace=write,fsync,rename,openat -o "$W/trace" > /dev/null 2>&1
        rm -rf "$W/md"
        for sc in write fsync rename openat; do
            points "$sc" > "$W/points"
            while read -r i _ n; do
                launch "$W/md" strace -f -o /dev/null -e inject=$sc:signal=SIGKILL:when="$i" < /dev/null > /dev/null 2>&1
                check "$W/md" "$sc #$i of $n"
                rm -rf "$W/md"
            done < "$W/points"
        done
    else
        mode=random
        for i in $(seq 1 24); do
            launch "$W/md" > /dev/null 2>&1 &
            pid=$!
            sleep "0.$(awk -v s="$i" 'BEGIN { srand(s); printf "%02d", int(rand() * 90) }')"
            kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
            check "$W/md" "random point $i"
            rm -rf "$W/md"
        done
    fi
    if [ "$name" = legacy ]; then echo "durability ($mode kills): $exact of $total bit-exact"
    else echo "durability $name ($mode kills): $exact of $total bit-exact"; fi
    echo "$name $exact $total" >> "$W/table"
    [ "$exact" -eq "$total" ] && [ "$total" -gt 0 ]
}

rc=0
: > "$W/table"
for c in $configs; do sweep "$c" || rc=1; done
if [ "$configs" != legacy ]; then
    echo
    printf '%-32s %s\n' "strategy / variant" "kills resumed bit-exact"
    while read -r n e t; do printf '%-32s %s of %s\n' "$n" "$e" "$t"; done < "$W/table"
fi
exit $rc
