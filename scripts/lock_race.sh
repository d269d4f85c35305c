#!/bin/sh
# Issue 27 #5's race: two runs on one model_dir started at once, TRIALS
# times each for the same command twice and for --learning_rate=0.01 vs
# 0.05. A trial is right when exactly one run exits 0 and the other exits 2
# saying "is in use by another distref run". Prints one line per pair kind:
#   same: 9 of 9 right (0 both succeeded, ...)
# Usage: sh scripts/lock_race.sh [BIN] [TRIALS]; exit 1 if any trial is wrong.
set -u
BIN=${1:-bin/distref}
TRIALS=${2:-9}
tmp=$(mktemp -d /tmp/distref_lock_race.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
RUN="train --experiment=mlp_synthetic --synthetic_examples=1000 --epochs=1 --distribution_strategy=one_device"
export OMP_NUM_THREADS=1
bad=0
for kind in same lr; do
    right=0; both=0; other=0
    for t in $(seq 1 "$TRIALS"); do
        m="$tmp/$kind.$t"
        if [ "$kind" = same ]; then a=""; b=""; else a="--learning_rate=0.01"; b="--learning_rate=0.05"; fi
        $BIN $RUN --model_dir="$m" $a > "$m.a" 2>&1 & pa=$!
        $BIN $RUN --model_dir="$m" $b > "$m.b" 2>&1 & pb=$!
        wait $pa; ra=$?
        wait $pb; rb=$?
        if { [ $ra -eq 0 ] && [ $rb -eq 2 ] && grep -q 'is in use by another distref run' "$m.b"; } ||
           { [ $rb -eq 0 ] && [ $ra -eq 2 ] && grep -q 'is in use by another distref run' "$m.a"; }; then
            right=$((right + 1))
        elif [ $ra -eq 0 ] && [ $rb -eq 0 ]; then both=$((both + 1))
        else other=$((other + 1)); echo "$kind trial $t: exit $ra and $rb" >&2; tail -2 "$m.a" "$m.b" >&2
        fi
        events=$(ls "$m" | grep -c '^events.out.tfevents')
        [ "$events" -le 1 ] || echo "$kind trial $t: $events event files" >&2
    done
    echo "$kind: $right of $TRIALS right (exactly one exit 0, the other exit 2 naming the holder); both exit 0: $both; other: $other"
    [ $right -eq "$TRIALS" ] || bad=1
done
exit $bad
