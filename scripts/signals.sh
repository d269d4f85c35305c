#!/bin/sh
# Clean signals: interrupt a training run with SIGINT or SIGTERM at a random
# moment, require exit status 130 or 143 and a checkpoint, resume it with
# the same command, and require the uninterrupted run's every-step
# loss_bits, weights_sha256 and train_accuracy_last_epoch. Every fourth
# trial sends the signal twice in quick succession: the second must end the
# process at once (the default action) without damaging the last
# checkpoint, so the resume is still bit-exact.
#
#   scripts/signals.sh DISTREF [TRIALS] [STRATEGY_FLAGS...]
#
# Prints one line per trial and "signals: N of N bit-exact"; exits 1 when
# any trial differs. tests/test_durable.c runs two trials in make test.
set -u
BIN=${1:?usage: signals.sh DISTREF [TRIALS] [FLAGS...]}
TRIALS=${2:-20}
shift; [ $# -gt 0 ] && shift
W=$(mktemp -d /tmp/distref_signals_XXXXXX)
trap 'rm -rf "$W"' EXIT
RUN=${*:-"--distribution_strategy=mirrored --num_gpus=2 --synthetic_examples=200 --global_batch_size=16 --epochs=12"}

outcome() {
    sed -n 's/.*"step":\([0-9]*\).*"loss_bits":"\(0x[0-9a-f]*\)".*/\1 \2/p' "$1/metrics.jsonl" | tr '\n' ' '
    sed -n 's/.*"\(weights_sha256\|train_accuracy_last_epoch\|final_loss_bits\)": *"*\([0-9a-fx.e-]*\)"*.*/\1=\2/p' "$1/summary.json" | tr '\n' ' '
}

start=$(date +%s%N)
# shellcheck disable=SC2086
"$BIN" train --model_dir="$W/ref" $RUN >/dev/null 2>&1 || { echo "signals: the uninterrupted run failed" >&2; exit 1; }
full=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
want=$(outcome "$W/ref")

exact=0
t=1
while [ "$t" -le "$TRIALS" ]; do
    sig=INT; code=130
    [ $((t % 2)) = 0 ] && { sig=TERM; code=143; }
    twice=no; [ $((t % 4)) = 0 ] && twice=yes
    # a random moment in the first 80% of the uninterrupted run's time
    delay=$(awk -v f="$full" -v s="$t$$" 'BEGIN { srand(s); printf "%.2f", 0.05 + rand() * 0.8 * f }')
    d="$W/t$t"
    # shellcheck disable=SC2086
    "$BIN" train --model_dir="$d" $RUN >/dev/null 2>"$W/err" &
    pid=$!
    sleep "$delay"
    kill -"$sig" "$pid" 2>/dev/null
    [ "$twice" = yes ] && { sleep 0.01; kill -"$sig" "$pid" 2>/dev/null; }
    wait "$pid"; st=$?
    note="exit $st"
    if [ "$st" = 0 ]; then
        note="finished before the signal"
    elif [ "$twice" = no ] && { [ "$st" != "$code" ] || [ ! -f "$d/ckpt.bin" ]; }; then
        echo "trial $t: SIG$sig after ${delay}s: exit $st (want $code and a checkpoint): $(head -c 200 "$W/err")"
        t=$((t + 1)); continue
    fi
    # shellcheck disable=SC2086
    if "$BIN" train --model_dir="$d" $RUN >/dev/null 2>"$W/err" && [ "$(outcome "$d")" = "$want" ]; then
        exact=$((exact + 1)); echo "trial $t: SIG$sig$([ "$twice" = yes ] && echo ' twice') after ${delay}s ($note): resume bit-exact"
    else
        echo "trial $t: SIG$sig after ${delay}s ($note): resume DIFFERS $(head -c 200 "$W/err")"
    fi
    t=$((t + 1))
done
echo "signals: $exact of $TRIALS bit-exact"
[ "$exact" = "$TRIALS" ]
