#!/bin/sh
# The cost of --gradient_accumulation_steps (docs/TRAINING_FEATURES.md):
# mlp_synthetic on the OpenMP engine, mirrored R=2, 2 threads, exact and
# fast numerics. For each numerics, interleaved, best of REPS:
#   plain      G=64, N micro-batches, an update each
#   k=4        G=64, N micro-batches, an update every 4 (same examples, same
#              micro-batch: the ratio k=4 / plain is what accumulation costs
#              or saves per example)
#   one step   G=256, N/4 steps (what k=4 computes: the same updates' bits
#              in exact numerics, checked)
# Times are the run's own "(S s; ...)" (training, without process start).
#
#   sh scripts/bench_accumulation.sh [BIN] [N] [REPS]   (bin/distref 160 3)
set -u
bin=${1:-bin/distref}
n=${2:-160}
reps=${3:-3}
tmp=$(mktemp -d /tmp/distref_accb.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
COMMON="--variant=openmp --distribution_strategy=mirrored --num_gpus=2 --threads=2 --synthetic_examples=2560 --seed=7 --l2=0.001"
secs() {   # secs FLAGS...: training seconds of one run; its hash in $tmp/sha
    d=$(mktemp -d "$tmp/run.XXXXXX")
    # shellcheck disable=SC2086
    "$bin" train $COMMON --model_dir="$d" "$@" > "$d.log" 2>&1 || { echo "FAILED: $*" >&2; echo 0; return; }
    sed -n 's/.*weights_sha256=\([0-9a-f]\{16\}\).*/\1/p' "$d.log" > "$tmp/sha"
    sed -n 's/.*(\([0-9.]*\) s;.*/\1/p' "$d.log"
}
best() { awk 'NR == 1 || $1 < m { m = $1 } END { print m }'; }
echo "# accumulation cost: openmp mirrored R=2, 2 threads, mlp_synthetic, $n micro-batches of 64, best of $reps; load: $(uptime | sed 's/.*load average: //')"
printf '%-6s %10s %10s %10s %12s %14s %s\n' mode plain_s k4_s step256_s k4/plain k4/one_step "k4 = one step (bits)"
for num in exact fast; do
    : > "$tmp/p"; : > "$tmp/k"; : > "$tmp/o"
    for _ in $(seq "$reps"); do
        secs --numerics=$num --global_batch_size=64 --train_steps="$n" >> "$tmp/p"
        secs --numerics=$num --global_batch_size=64 --train_steps="$n" --gradient_accumulation_steps=4 >> "$tmp/k"
        ksha=$(cat "$tmp/sha")
        secs --numerics=$num --global_batch_size=256 --train_steps=$((n / 4)) >> "$tmp/o"
        osha=$(cat "$tmp/sha")
    done
    p=$(best < "$tmp/p"); k=$(best < "$tmp/k"); o=$(best < "$tmp/o")
    same=$([ "$ksha" = "$osha" ] && echo yes || echo no)
    awk -v m=$num -v p="$p" -v k="$k" -v o="$o" -v s="$same" \
        'BEGIN { printf "%-6s %10.3f %10.3f %10.3f %12.3f %14.3f %s\n", m, p, k, o, k / p, k / o, s }'
done
