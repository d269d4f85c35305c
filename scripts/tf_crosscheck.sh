#!/bin/sh
# TensorFlow judged by `distref diff` (docs/JUDGING.md), the same path as
# PyTorch DDP's: scripts/tf_golden.py trajectory writes MirroredStrategy
# R = 1, 2, 4 trajectories in distref's format (python/distref's
# Trajectory), and every comparison is one `bin/distref diff --json`.
# Optional (make tf-crosscheck); never a test dependency. The CNN and the
# ResNet (replica and sync batch normalization, R = 1, 2, 4) are judged by
# the step before this one, tf_golden.py generate + test_golden: distref's
# --trajectory does not record conv models yet (docs/MODELS.md).
#
#   sh scripts/tf_crosscheck.sh PYTHON OUT [STEPS]
#
# Settings: mlp_synthetic, 1000 synthetic examples, G = 64 (step 16 of each
# epoch is a short batch of 40), seed 42, SGD momentum 0.9, every step.
set -eu
py=${1:?usage: tf_crosscheck.sh PYTHON OUT [STEPS]}
out=${2:?usage: tf_crosscheck.sh PYTHON OUT [STEPS]}
steps=${3:-200}
bin=${DISTREF:-bin/distref}
rm -rf "$out"; mkdir -p "$out"
run="--experiment=mlp_synthetic --synthetic_examples=1000 --global_batch_size=64 --train_steps=$steps --trajectory=every:1"
"$bin" train $run --distribution_strategy=one_device --model_dir="$out/ref" > /dev/null
"$bin" train $run --variant=openmp --distribution_strategy=mirrored --num_gpus=4 --model_dir="$out/omp4" > /dev/null
for r in 1 2 4; do
    TF_CPP_MIN_LOG_LEVEL=3 "$py" scripts/tf_golden.py trajectory "$out/tf$r" "$r" "$steps" > "$out/tf$r.log" 2>&1 ||
        { cat "$out/tf$r.log" >&2; exit 1; }
done
judge() {   # NAME A B: the diff's JSON, and its verdict under the DDP-measured atol=1e-6
    "$bin" diff "$2" "$3" --json --plot="$out/plot_$1" > "$out/$1.json" 2> "$out/$1.err" && rc=0 || rc=$?
    [ "$rc" -le 1 ] || { cat "$out/$1.err" >&2; exit 1; }
    "$bin" diff "$2" "$3" --tolerance=atol=1e-6 > /dev/null 2>&1 && echo 0 > "$out/$1.atol" || echo $? > "$out/$1.atol"
}
judge omp4_vs_ref "$out/ref" "$out/omp4"
for r in 1 2 4; do judge "tf${r}_vs_ref" "$out/ref" "$out/tf$r"; done
for r in 2 4; do judge "tf${r}_vs_tf1" "$out/tf1" "$out/tf$r"; done
"$py" - "$out" "$steps" <<'PY'
import json, os, sys
out, steps = sys.argv[1], sys.argv[2]
print("| A vs B | identical? | first divergence | loss first differs at step | variables max ulp | variables max rel "
      "| loss max rel | gradients max rel | `--tolerance=atol=1e-6` |")
print("|---|---|---|---|---|---|---|---|---|")
rows = [("omp4_vs_ref", "distref mirrored 4 (openmp) vs one_device (ref)")] + \
       [("tf%d_vs_ref" % r, "TF R=%d vs distref" % r) for r in (1, 2, 4)] + \
       [("tf%d_vs_tf1" % r, "TF R=%d vs TF R=1" % r) for r in (2, 4)]
for name, title in rows:
    d = json.load(open(os.path.join(out, name + ".json")))
    atol = "pass" if open(os.path.join(out, name + ".atol")).read().strip() == "0" else "FAIL"
    if d["identical"]:
        print("| %s | **yes**, %d steps, %d elements | | | 0 | 0 | 0 | 0 | %s |" % (title, d["steps"], d["elements"], atol))
        continue
    f = d["first_divergence"]
    kind = lambda t: "loss" if t == "loss" else "gradients" if t.startswith("gradient/") else \
        "slots" if t.startswith("optimizer/") else "variables"
    mu = {}; mr = {}
    loss_step = None
    for r in d["rows"]:
        k = kind(r["tensor"])
        mu[k] = max(mu.get(k, 0), r["max_ulp"] if r["max_ulp"] is not None else float("inf"))
        mr[k] = max(mr.get(k, 0.0), r["max_rel"])
        if k == "loss" and loss_step is None:
            loss_step = r["step"]
    print("| %s | no | step %d, %s %s, %s ulp | %s | %s | %.3g | %.3g | %.3g | %s |" % (
        title, f["step"], f["tensor"], f["index"], f["ulp"], loss_step, mu.get("variables", 0),
        mr.get("variables", 0), mr.get("loss", 0), mr.get("gradients", 0), atol))
PY
