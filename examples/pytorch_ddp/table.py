"""The numbers of docs/JUDGING.md's DDP table, from crosscheck.sh's folder.

    python table.py OUT [DISTREF]      (OUT: crosscheck.sh's output folder)

Per pair: `distref diff --json` (identical, differing elements, the first
divergence, per step and tensor max ulp and max relative error), and with
NumPy the largest |a-b| of each kind of tensor (variables, slots,
gradients, loss) over every step and, for a pair that first differs at
step s, at that step. Kinds: "gradients" gradient/..., "slots"
optimizer/..., "loss", else "variables".
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import distref  # noqa: E402

PAIRS = [("distref mirrored 4 (openmp) vs one_device (ref)", "ref", "omp4"),
         ("DDP W=1 vs distref", "ref", "ddp1"), ("DDP W=2 vs distref", "ref", "ddp2"),
         ("DDP W=4 vs distref", "ref", "ddp4"), ("DDP W=2 vs DDP W=1", "ddp1", "ddp2"),
         ("DDP W=4 vs DDP W=1", "ddp1", "ddp4"), ("DDP W=4 per_rank_mean vs DDP W=4", "ddp4", "ddp4_bug"),
         ("DDP W=4 per_rank_mean vs distref", "ref", "ddp4_bug")]


def kind(name):
    if name == "loss":
        return "loss"
    if name.startswith("gradient/"):
        return "gradients"
    return "slots" if name.startswith("optimizer/") else "variables"


def traj(path):
    t = os.path.join(path, "trajectory")
    return distref.Trajectory(t if os.path.exists(os.path.join(t, "index.json")) else path)


def max_abs(a, b, at_step=None):
    ta, tb = traj(a), traj(b)
    out = {}
    for step in ta.steps:
        if at_step is not None and step != at_step:
            continue
        names = set(ta._step(step)["tensors"]) & set(tb._step(step)["tensors"])
        for name in names:
            x = ta.load(step, name).astype(np.float64)
            y = tb.load(step, name).astype(np.float64)
            d = float(np.max(np.abs(x - y))) if x.size else 0.0
            k = kind(name)
            out[k] = max(out.get(k, 0.0), d)
    return out


def main():
    out = sys.argv[1]
    bin_ = sys.argv[2] if len(sys.argv) > 2 else "bin/distref"
    for title, a, b in PAIRS:
        pa, pb = os.path.join(out, a), os.path.join(out, b)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            continue
        r = subprocess.run([bin_, "diff", pa, pb, "--json"], capture_output=True, text=True)
        j = json.loads(r.stdout)
        maxrel, maxulp, loss_first = {}, {}, None
        for row in j.get("rows", []):
            k = kind(row["tensor"])
            maxrel[k] = max(maxrel.get(k, 0.0), row["max_rel"])
            if row["max_ulp"] is not None:
                maxulp[k] = max(maxulp.get(k, 0), row["max_ulp"])
            if k == "loss" and loss_first is None:
                loss_first = row["step"]
        fd = j.get("first_divergence")
        first = "" if not fd else "step %d, %s %s, %d ulp" % (fd["step"], fd["tensor"], fd["index"], fd["ulp"])
        absall = max_abs(pa, pb)
        line = {"pair": title, "identical": j["identical"], "steps": j["steps"], "elements": j["elements"],
                "differing": j["differing"], "first_divergence": first, "loss_first_differs": loss_first,
                "max_rel": maxrel, "max_ulp": maxulp, "max_abs": absall}
        if fd:
            line["max_abs_at_first_step"] = max_abs(pa, pb, fd["step"])
        for tol in ("atol=1e-6",):
            t = subprocess.run([bin_, "diff", pa, pb, "--tolerance=" + tol], capture_output=True, text=True)
            line["exit_" + tol] = t.returncode
        print(json.dumps(line))


if __name__ == "__main__":
    main()
