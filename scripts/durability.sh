#!/bin/sh
# Crash consistency of a run directory: kill a checkpointing run at every
# write, fsync, rename and openat it makes (strace fault injection), resume
# it, and require the uninterrupted run's weights_sha256 and every step's
# loss_bits exactly once, in order. Where strace cannot trace (no ptrace),
# random kills (SIGKILL after a random delay) stand in.
#
#   scripts/durability.sh DISTREF [POINTS_PER_SYSCALL]
#
# Prints one line per kill point and "durability: N of N bit-exact"; exits
# 1 when any resume differs. make conformance runs it as the durability
# suite, and against a distref built with the old order (checkpoint renamed
# before the metrics, DR_MUTANT_CKPT_FIRST), which it must catch.
set -u
BIN=${1:?usage: durability.sh DISTREF [POINTS_PER_SYSCALL]}
MAXPTS=${2:-0}
W=$(mktemp -d /tmp/distref_durability_XXXXXX)
trap 'rm -rf "$W"' EXIT
RUN="--distribution_strategy=mirrored --num_gpus=2 --synthetic_examples=80 --global_batch_size=16 --epochs=0 --train_steps=9 --checkpoint_every=2 --l2=0.001"

# What a finished run left: every step's loss_bits in order, and the weights.
outcome() {
    sed -n 's/.*"step":\([0-9]*\).*"loss_bits":"\(0x[0-9a-f]*\)".*/\1 \2/p' "$1/metrics.jsonl" | tr '\n' ' '
    sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p' "$1/summary.json"
}

# shellcheck disable=SC2086
"$BIN" train --model_dir="$W/ref" $RUN >/dev/null 2>&1 || { echo "durability: the uninterrupted run failed" >&2; exit 1; }
want=$(outcome "$W/ref")

total=0; exact=0
check() {   # DIR LABEL: resume DIR to the end and compare
    # shellcheck disable=SC2086
    if "$BIN" train --model_dir="$1" $RUN >/dev/null 2>"$W/err" && [ "$(outcome "$1")" = "$want" ] &&
       [ -z "$(find "$1" -name '*.tmp.*' 2>/dev/null)" ]; then
        exact=$((exact + 1)); echo "kill at $2: resume bit-exact"
    else
        echo "kill at $2: resume DIFFERS $(head -c 200 "$W/err")"
    fi
    total=$((total + 1))
}

if strace -f -o /dev/null true 2>/dev/null; then
    mode=strace
    for sc in write fsync rename openat; do
        # how often the run makes this call (every process and file)
        # shellcheck disable=SC2086
        n=$(strace -f -e trace=$sc -o "$W/trace" "$BIN" train --model_dir="$W/count_$sc" $RUN >/dev/null 2>&1;
            grep -c "$sc(" "$W/trace")
        [ "$MAXPTS" -gt 0 ] && [ "$n" -gt "$MAXPTS" ] && step=$(( (n + MAXPTS - 1) / MAXPTS )) || step=1
        i=1
        while [ "$i" -le "$n" ]; do
            d="$W/k_${sc}_$i"
            # shellcheck disable=SC2086
            strace -f -o /dev/null -e inject=$sc:signal=SIGKILL:when=$i "$BIN" train --model_dir="$d" $RUN \
                >/dev/null 2>&1
            check "$d" "$sc #$i of $n"
            rm -rf "$d"
            i=$((i + step))
        done
    done
else
    mode=random
    for i in $(seq 1 24); do
        d="$W/k_random_$i"
        # shellcheck disable=SC2086
        "$BIN" train --model_dir="$d" $RUN >/dev/null 2>&1 &
        pid=$!
        sleep "0.$(awk -v s="$i" 'BEGIN { srand(s); printf "%02d", int(rand() * 90) }')"
        kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
        check "$d" "random point $i"
        rm -rf "$d"
    done
fi
echo "durability ($mode kills): $exact of $total bit-exact"
[ "$exact" -eq "$total" ]
