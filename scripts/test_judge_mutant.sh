#!/bin/sh
# docs/JUDGING.md's engine-mutant command, as a test: `distref diff` of the
# reference against a CLI built with the planted fault bias_grad_axis (the
# openmp kernels sum the bias gradient along the wrong axis) names the
# first update it touched, step 1, and the tensor, dense_0/bias (and a row
# for the engine's recorded gradient/dense_0/bias at step 1); the same
# run with the unmutated CLI is identical (so the check can fail both ways).
#
#   sh scripts/test_judge_mutant.sh DISTREF
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutant).
set -eu
bin=${1:?usage: test_judge_mutant.sh DISTREF}
: "${BUILD:?}"
sh scripts/mutant_cli.sh bias_grad_axis > /dev/null
mut=$BUILD/mutants/cli_bias_grad_axis/distref
t=$(mktemp -d /tmp/distref_judge_mut.XXXXXX)
trap 'rm -rf "$t"' EXIT
run="--experiment=mlp_synthetic --synthetic_examples=256 --train_steps=3 --trajectory=every:1"
"$bin" train $run --distribution_strategy=one_device --model_dir="$t/ref" > /dev/null
"$bin" train $run --variant=openmp --distribution_strategy=mirrored --num_gpus=2 --model_dir="$t/omp" > /dev/null
"$mut" train $run --variant=openmp --distribution_strategy=mirrored --num_gpus=2 --model_dir="$t/mut" > /dev/null
fail=0
"$bin" diff "$t/ref" "$t/omp" > "$t/same.txt" 2>&1 && rc=0 || rc=$?
if [ "$rc" != 0 ] || ! grep -q '^identical: 4 steps' "$t/same.txt"; then
    echo "judge mutant: the unmutated openmp run is not identical to the reference (exit $rc):"; cat "$t/same.txt"; fail=1
fi
"$bin" diff "$t/ref" "$t/mut" > "$t/mut.txt" 2>&1 && rc=0 || rc=$?
if [ "$rc" != 1 ] || ! grep -q '^first divergence: step 1, tensor dense_0/bias, element' "$t/mut.txt" ||
   ! grep -Eq '^ +1  gradient/dense_0/bias ' "$t/mut.txt"; then
    echo "judge mutant: bias_grad_axis not named at step 1, dense_0/bias and gradient/dense_0/bias (exit $rc):"; cat "$t/mut.txt"; fail=1
fi
[ $fail = 0 ] && echo "judge mutant: bias_grad_axis named by distref diff at step 1, dense_0/bias; unmutated: identical"
exit $fail
