#!/bin/sh
# Resuming parameter_server training over MPI ranks from a checkpoint, both
# ways across variants (docs/MPI.md, "parameter_server over ranks"):
#   straight   mpi, --schedule=seeded, N steps in one run (np 4: chief, 2
#              workers, 1 ps);
#   ref -> mpi ref stops at step K, mpi resumes to N;
#   mpi -> ref mpi stops at step K, ref resumes to N;
#   mpi -> mpi mpi stops at step K2 (not a multiple of --checkpoint_every:
#              the plan's final join), mpi resumes to N (the resumed step
#              is a join: the oracle is the reference's own K2 -> N);
#   free       mpi --schedule=free stops at step K, mpi --schedule=free
#              resumes to N (re-walking its recording, ps_schedule.jsonl);
#              its oracle is the reference replaying the final recording
#              from step 0;
# each must equal the reference's uninterrupted N steps: weights_sha256,
# every metrics line's loss_bits, ckpt.bin byte for byte. And refused with
# a message naming the setting: a resume with another --schedule_seed
# (ps_schedule.json differs), a seeded checkpoint resumed with
# --schedule=free (no recording beside it), and a free one whose recording
# holds fewer updates than the checkpoint.
#
#   sh tests/mpi_ps_resume.sh [DISTREF]
#
# Skipped (exit 0, with a note) without mpirun.
set -u
if ! command -v mpirun >/dev/null 2>&1; then
    echo "mpi_ps_resume: skipped (no mpirun on PATH)"
    exit 0
fi
bin=${1:-bin/distref}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
flags="--distribution_strategy=parameter_server --staleness=2 --global_batch_size=37
    --synthetic_examples=230 --checkpoint_every=4 --l2=0.001 --optimizer=adam"
tf='{"cluster":{"chief":["c:1"],"worker":["w0:1","w1:1"],"ps":["p0:1"]},"task":{"type":"chief","index":0}}'
d=$(mktemp -d)
fails=0
mpi() {   # mpi DIR STEPS [more flags]: the mpi variant under mpirun -np 4
    dir=$1 steps=$2; shift 2
    # shellcheck disable=SC2086
    env -u TF_CONFIG mpirun --oversubscribe -np 4 "$bin" train --variant=mpi $flags --schedule_seed="${seed:-7}" \
        --train_steps="$steps" --model_dir="$d/$dir" "$@" > /dev/null 2>> "$d/$dir.err"
}
ref() {   # ref DIR STEPS [more flags]
    dir=$1 steps=$2; shift 2
    # shellcheck disable=SC2086
    TF_CONFIG=$tf "$bin" train --variant=ref $flags --schedule_seed=7 --train_steps="$steps" --model_dir="$d/$dir" \
        "$@" > /dev/null 2>> "$d/$dir.err"
}
same() {   # same NAME DIR [ORACLE]: DIR's run equals the reference's (default: oracle, uninterrupted)
    o=${3:-oracle}
    sa=$(grep -o '"weights_sha256":"[0-9a-f]*"' "$d/$2/summary.json" 2>/dev/null)
    sb=$(grep -o '"weights_sha256":"[0-9a-f]*"' "$d/$o/summary.json")
    grep -o '"loss_bits":"[^"]*"' "$d/$2/metrics.jsonl" > "$d/$2.bits" 2>/dev/null
    grep -o '"loss_bits":"[^"]*"' "$d/$o/metrics.jsonl" > "$d/$o.bits"
    why=""
    [ -n "$sa" ] && [ "$sa" = "$sb" ] || why="$why weights differ;"
    cmp -s "$d/$2.bits" "$d/$o.bits" || why="$why loss_bits differ ($(wc -l < "$d/$2.bits") vs $(wc -l < "$d/$o.bits") lines);"
    cmp -s "$d/$2/ckpt.bin" "$d/$o/ckpt.bin" || why="$why ckpt.bin differs;"
    if [ -z "$why" ]; then echo "$1: = ref ($o): passed"; else echo "$1: FAILED:$why"; fails=$((fails + 1)); fi
}
ref oracle 16 || { echo "mpi_ps_resume: the reference run failed: $(cat "$d/oracle.err")"; exit 1; }
mpi straight 16; same "mpi, 16 steps straight" straight
ref r2m 8 && mpi r2m 16; same "ref 8 steps -> mpi resumes to 16" r2m
mpi m2r 8 && ref m2r 16; same "mpi 8 steps -> ref resumes to 16" m2r
# a resume at step 6 joins there (the reference's rule), so its oracle is the reference's own 6 -> 16
ref r2r 6 && ref r2r 16
mpi m2m 6 && mpi m2m 16; same "mpi 6 steps -> mpi resumes to 16" m2m r2r
# refusals: another seed (the plan differs), the free schedule
mpi seed 8 && seed=8 mpi seed 16
if grep -q 'ps_schedule.json: the checkpoint.s schedule was' "$d/seed.err"; then
    echo "resume with another --schedule_seed: refused, naming ps_schedule.json: passed"
else
    echo "resume with another --schedule_seed: FAILED (not refused as expected)"; fails=$((fails + 1))
fi
mpi seed 16 --schedule=free
if grep -q 'schedule=free: checkpoint .* has no .*ps_schedule.jsonl beside it' "$d/seed.err"; then
    echo "seeded checkpoint resumed with --schedule=free: refused, naming ps_schedule.jsonl: passed"
else
    echo "seeded checkpoint resumed with --schedule=free: FAILED (not refused as expected)"; fails=$((fails + 1))
fi
# --schedule=free: the order is the run's own; its resume re-walks the recording
mpi f2f 8 --schedule=free && mpi f2f 16 --schedule=free
cp "$d/f2f/ps_schedule.jsonl" "$d/f2f.jsonl" 2>/dev/null
ref fref 16 --replay_schedule="$d/f2f.jsonl"; same "mpi free 8 steps -> mpi free resumes to 16" f2f fref
grep -q '"resumed_from_step":8' "$d/f2f/summary.json" ||
    { echo "mpi free 8 steps -> 16: FAILED (summary.json does not say it resumed from step 8)"; fails=$((fails + 1)); }
head -n 5 "$d/f2f.jsonl" > "$d/f2f/ps_schedule.jsonl"
mpi f2f 20 --schedule=free
if grep -q 'ps_schedule.jsonl records [0-9]* updates but checkpoint .* is at step 16' "$d/f2f.err"; then
    echo "free resume with a recording of another checkpoint: refused, naming both: passed"
else
    echo "free resume with a recording of another checkpoint: FAILED (not refused as expected)"; fails=$((fails + 1))
fi
grep -h 'distref: error' "$d"/*.err | grep -v 'schedule was\|beside it\|updates but checkpoint' | head -3 | sed 's/^/    /'
rm -rf "$d"
echo "mpi_ps_resume: $fails failed"
[ "$fails" -eq 0 ]
