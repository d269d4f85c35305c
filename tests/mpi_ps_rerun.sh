#!/bin/sh
# A worker rank killed (SIGKILL) in the middle of parameter_server training
# over MPI ranks, under `mpirun --enable-recovery` and --schedule=free: its
# closure must re-run on the other worker and training must finish
# (docs/MPI.md, "parameter_server over ranks", "When a rank dies").
# np 4: the chief (rank 0), workers at ranks 1-2, the ps task at rank 3;
# trial i kills worker rank 1 + i % 2 at a moment 1.5-3 s into training.
#
#   sh tests/mpi_ps_rerun.sh [DISTREF] [TRIALS] [EXPERIMENT]
#
# A trial passes when
#   - mpirun exits 0, and the chief's note names the killed rank;
#   - metrics.jsonl has every step 1..N once, and summary.json's
#     updates_applied is N (no closure lost, none applied twice);
#   - ps_schedule.jsonl records one "fail" of the killed worker's closure,
#     which is dispatched again to the other worker and lands;
#   - `--variant=ref --replay_schedule=<that file>` gives the same
#     weights_sha256, every loss_bits, and the same ckpt.bin bytes.
# EXPERIMENT: linear_ones (default: 20000 steps, a quick reference replay)
# or mlp_synthetic (12000 examples x 3 epochs at G=64, 564 steps).
# Prints one line per trial and "rerun N/T"; exit status 0 when N = T.
# Skipped (exit 0, with a note) without mpirun.
set -u
if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi_ps_rerun: skipped (no mpirun on PATH)"
    exit 0
fi
. "$(dirname "$0")/mpi_kill_common.sh"
bin=${1:-bin/distref}
trials=${2:-3}
exp=${3:-linear_ones}
case $exp in
    linear_ones) flags="--experiment=linear_ones --global_batch_size=8 --train_steps=20000"; N=20000 ;;
    mlp_synthetic) flags="--experiment=mlp_synthetic --global_batch_size=64 --synthetic_examples=12000 --epochs=3"; N=564 ;;
    *) echo "mpi_ps_rerun: EXPERIMENT=$exp: expected linear_ones or mlp_synthetic" >&2; exit 2 ;;
esac
flags="$flags --distribution_strategy=parameter_server --staleness=2 --checkpoint_every=1000"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
tf='{"cluster":{"chief":["c:1"],"worker":["w0:1","w1:1"],"ps":["p0:1"]},"task":{"type":"chief","index":0}}'
json_field() {   # json_field FILE KEY: the first value of "KEY": in FILE
    grep -o "\"$2\": *[^,}]*" "$1" | head -1 | sed 's/^[^:]*: *//; s/"//g'
}
ok=0
i=1
while [ "$i" -le "$trials" ]; do
    d=$(mktemp -d)
    rank=$((1 + i % 2)) w=$((i % 2)) other=$((1 - i % 2))
    why=""
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    env -u TF_CONFIG mpirun --oversubscribe --enable-recovery -np 4 "$bin" train --variant=mpi --schedule=free \
        $flags --model_dir="$d/m" > "$d/out" 2> "$d/err" &
    mp=$!
    if ! kill_rank "$mp" "$rank" "$i" 90; then
        echo "trial $i: rank $rank not found (the run ended before the kill?): FAILED"
        rm -rf "$d"; i=$((i + 1)); continue
    fi
    total=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    note=$(grep "distref: note: MPI rank $rank " "$d/err" | head -1)
    fails=$(grep -c '"event":"fail"' "$d/m/ps_schedule.jsonl" 2>/dev/null)
    failline=$(grep '"event":"fail"' "$d/m/ps_schedule.jsonl" 2>/dev/null | head -1)
    k=$(printf '%s' "$failline" | sed -n 's/.*"closure":\([0-9]*\).*/\1/p')
    lines=$(wc -l < "$d/m/metrics.jsonl" 2>/dev/null || echo 0)
    uniq=$(grep -o '"step":[0-9]*' "$d/m/metrics.jsonl" 2>/dev/null | sort -u | wc -l)
    last=$(grep -o '"step":[0-9]*' "$d/m/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2)
    updates=$(json_field "$d/m/summary.json" updates_applied)
    [ "$status" -eq 0 ] || why="$why mpirun exit $status;"
    [ -n "$note" ] || why="$why no note naming rank $rank;"
    [ "$lines" -eq "$N" ] && [ "$uniq" -eq "$N" ] && [ "${last:-0}" -eq "$N" ] ||
        why="$why metrics: $lines lines, $uniq steps, last ${last:-none} (want $N);"
    [ "${updates:-0}" = "$N" ] || why="$why updates_applied ${updates:-none} (want $N);"
    if [ "$fails" = 1 ] && printf '%s' "$failline" | grep -q "\"worker\":$w," && [ -n "$k" ]; then
        grep -q "\"event\":\"dispatch\",\"worker\":$other,\"closure\":$k," "$d/m/ps_schedule.jsonl" &&
            grep -q "\"event\":\"land\",\"worker\":$other,\"closure\":$k," "$d/m/ps_schedule.jsonl" ||
            why="$why closure $k not re-run on worker $other;"
    else
        why="$why ${fails:-0} fail events (want 1, of worker $w);"
    fi
    # shellcheck disable=SC2086
    if TF_CONFIG=$tf "$bin" train --variant=ref $flags --replay_schedule="$d/m/ps_schedule.jsonl" \
        --model_dir="$d/r" > "$d/ref.out" 2> "$d/ref.err"; then
        [ "$(json_field "$d/m/summary.json" weights_sha256)" = "$(json_field "$d/r/summary.json" weights_sha256)" ] ||
            why="$why weights_sha256 differs from the reference's replay;"
        grep -o '"loss_bits":"[^"]*"' "$d/m/metrics.jsonl" > "$d/m.bits"
        grep -o '"loss_bits":"[^"]*"' "$d/r/metrics.jsonl" > "$d/r.bits"
        cmp -s "$d/m.bits" "$d/r.bits" || why="$why loss_bits differ from the reference's replay;"
        cmp -s "$d/m/ckpt.bin" "$d/r/ckpt.bin" || why="$why ckpt.bin differs from the reference's replay;"
    else
        why="$why the reference's replay failed: $(grep -h error "$d/ref.err" | head -1);"
    fi
    if [ -z "$why" ]; then
        ok=$((ok + 1))
        echo "trial $i: killed rank $rank (worker $w); closure $k re-ran on worker $other; job over $secs s after the kill, $total s in all; $N steps = ref replay: passed"
    else
        echo "trial $i: killed rank $rank (worker $w); job over $secs s after the kill; FAILED:$why"
        grep -h 'distref: \(error\|note\)' "$d/err" | head -3 | sed 's/^/    /'
    fi
    rm -rf "$d"
    i=$((i + 1))
done
echo "rerun $ok/$trials ($exp)"
[ "$ok" -eq "$trials" ]
