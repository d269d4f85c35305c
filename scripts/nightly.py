#!/usr/bin/env python3
"""distref nightly performance regression runs (issue 15, docs/NIGHTLY.md).

    nightly.py run --bench build/rel/bench/nightly [--samples N] [--only A,B]
                   [--mpi-bench build/rel/bench/nightly_mpi]
                   [--conformance bin/conformance --conf-samples N --conf-suites A,B]
                   [--baseline REV] [--window W] [--alpha A] [--min-effect F]
                   [--effect METRIC=F ...] [--history FILE] [--outdir DIR]
                   [--label TEXT] [--no-plot] [--cflags TEXT]
    nightly.py plot [--history FILE] [--outdir DIR]
    nightly.py selftest

`run` runs the bench program once (every metric: N interleaved ratio
samples), the MPI bench under mpirun and the conformance slices
(scripts/nightly_rows.py; each skipped with a note when its tool is
absent), compares each metric with a baseline (the pooled samples of the
last W earlier runs in the history, planted runs excluded, or of every run
of revision REV), prints a table, writes JUnit XML and a Google
Benchmark-compatible JSON of the run, appends one record per metric to the
history and plots it. Exit status 1 when a metric regressed (each named),
0 otherwise; 2 on usage or bench errors.

The statistics are Python 3 standard library only (no numpy/scipy): the
Mann-Whitney U test (exact null distribution for small samples without
ties, otherwise the normal approximation with tie and continuity
correction) and a percentile bootstrap CI of the ratio of medians. A
metric is a REGRESSION when p < alpha AND its median grew by more than the
metric's minimum effect (5% unless configured), an improvement when p <
alpha and it shrank by more than that; significant but smaller changes are
reported as "small", never alarms. A metric that looks changed is measured
again (--confirm 1, the default) and stays a regression or improvement
only if the re-run's samples say the same; otherwise it is "unconfirmed".
"""
import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import subprocess
import sys
import xml.sax.saxutils as sx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nightly_rows  # noqa: E402  (scripts/nightly_rows.py: the MPI and conformance rows)

# Minimum effect per metric (relative change of the median ratio) below
# which a significant change is not an alarm, set from A/A runs on the
# shared 2-core machine (docs/NIGHTLY.md): a ratio of two different kernels
# moves with what the other jobs on the machine run (their instruction mix
# and memory traffic slow the two halves unequally), by 5-7% for the sums,
# up to 50% for the fast GEMM against sgemm and 20% for training in one
# A/A pair. The synthetic control (a loop against itself): 5%.
DEFAULT_EFFECT = 0.05
METRIC_EFFECT = {
    "sum_exact_100k_vs_vecpass": 0.10,
    "sum_exact_100k_vs_naive": 0.30,
    "sum_exact_100k_vs_sdot": 0.10,
    "gemm_fast_256x784x128_vs_sgemm": 0.20,
    "train_fast_g64_vs_gemms": 0.20,
    "train_exact_g64_vs_gemms": 0.20,
    "train_ref_g64_vs_gemms": 0.20,
    "train_fast_mirrored2_g64_vs_one_device": 0.20,
    "train_fast_g256_2thr_vs_1thr": 0.25,
    # issue 33's exact / fast cells, as the other training rows: 20%; exact
    # on 2 threads against 1 as its fast row: 25%
    "train_exact_g64_vs_fast": 0.20,
    "train_exact_g256_vs_fast": 0.20,
    "train_exact_mirrored2_g64_vs_fast": 0.20,
    "train_exact_g256_2thr_vs_1thr": 0.25,
    # the conv model's rows (issue 31), as the other training rows: 20%
    "train_cnn_fast_g64_vs_mlp_fast": 0.20,
    "train_cnn_exact_g64_vs_fast": 0.20,
    "train_resnet_fast_g64_vs_cnn_fast": 0.20,
    "train_resnet_exact_g64_vs_fast": 0.20,
}
# Item 6's rows (docs/NIGHTLY.md, "The OpenCL, MPI and conformance rows"),
# set from A/A runs on the shared machine while its load average went from
# 6 to 1.5: with PoCL on one thread the OpenCL training ratios moved up to
# 11% (fast) and 4% (exact), the OpenCL GEMM's between 0.76 and 1.07; the all-reduce at
# 64 KB 53..76, at 1 MB 129..642 (the exact ring's time is compute and
# fell 5x with the load, MPI_Allreduce's is not); the conformance slices'
# wall times 2.5x (they are absolute seconds, no in-run baseline); their
# peak RSS within 1%. Session 8 (docs/history/NIGHTLY.md, "Load-tracking
# baselines"): the OpenCL GEMM on PoCL's basic driver, best of 15, moved
# -2.1..+4.9% in A/A (10%); the 1 MB all-reduce over the same op
# -10.8..+19.7% at load 2-8 (25%; a planted 15% moved it -3..+38%); the
# conformance CPU ratios within ~8% (10%).
METRIC_EFFECT.update({
    "train_opencl_fast_g64_vs_openmp": 0.20,
    "train_opencl_exact_g64_cpu_vs_openmp48": 0.10,
    "gemm_opencl_fast_256x784x128_vs_sgemm": 0.10,
    "allreduce_exact_64k_np2_vs_mpi": 0.50,
    "allreduce_exact_1m_np2_vs_mpi": 4.0,
    "allreduce_exact_1m_np2_cpu_vs_local": 0.10,
    # issue 33 item 2's gradient all-reduce, wall time as the _vs_mpi rows:
    # three runs of 5 samples at load 4-8 (2026-11-29) gave medians
    # 12.9-14.6 at 1 MB (+-12%) and 4.1-6.4 at 16 MB (+-50%)
    "allreduce_grad_1m_np2_vs_mpi": 0.25,
    "allreduce_grad_16m_np2_vs_mpi": 1.0,
    # issue 33 item 3's two ranks against one (exact multi_worker_mirrored
    # training, wall time): on 2 shared cores the two ranks compete with the
    # load for both cores while one rank needs one: 3-sample runs at load
    # 1.3-8 (2026-11-29) gave medians 0.7-2.1
    "train_exact_mwms_np2_vs_np1": 1.0,
})
for _n in nightly_rows.conf_metric_names():
    METRIC_EFFECT[_n] = 1.5 if "_wall_" in _n else 0.10



# ---- statistics ------------------------------------------------------------

def median(v):
    s = sorted(v)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def ranks(values):
    """1-based ranks, ties get their average rank; also the tie groups' sizes."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            r[order[k]] = avg
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return r, ties


def _exact_cdf_counts(n1, n2):
    """counts[u] = number of arrangements of n1 x's and n2 y's with U = u."""
    # f[a][b] = list of counts for a x's and b y's; build by recursion on
    # the largest element: it is an x (adds b to U) or a y (adds 0).
    f = [[None] * (n2 + 1) for _ in range(n1 + 1)]
    for a in range(n1 + 1):
        for b in range(n2 + 1):
            if a == 0 or b == 0:
                f[a][b] = [1]
                continue
            x = f[a - 1][b]
            y = f[a][b - 1]
            out = [0] * (a * b + 1)
            for u, c in enumerate(x):
                out[u + b] += c
            for u, c in enumerate(y):
                out[u] += c
            f[a][b] = out
    return f[n1][n2]


def mann_whitney(x, y, exact_limit=50):
    """Two-sided Mann-Whitney U test of x against y.

    Returns (U_x, p, method): U_x counts the pairs with x > y (ties 1/2).
    Exact null distribution when there are no ties and n1 + n2 <= exact_limit,
    else the normal approximation with tie correction and continuity
    correction."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return float("nan"), 1.0, "none"
    r, ties = ranks(list(x) + list(y))
    r1 = sum(r[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    if not ties and n <= exact_limit:
        counts = _exact_cdf_counts(n1, n2)
        total = float(sum(counts))
        k = int(round(u1))
        lo = sum(counts[:k + 1]) / total           # P(U <= u)
        hi = sum(counts[k:]) / total               # P(U >= u)
        return u1, min(1.0, 2.0 * min(lo, hi)), "exact"
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1.0))
    var = n1 * n2 / 12.0 * ((n + 1.0) - tie_term)
    if var <= 0:
        return u1, 1.0, "normal"
    d = u1 - mu
    d = max(0.0, abs(d) - 0.5)                     # continuity correction
    z = d / math.sqrt(var)
    return u1, min(1.0, math.erfc(z / math.sqrt(2.0))), "normal"


def bootstrap_ratio_ci(x, y, reps=2000, level=0.95, seed=12345):
    """Percentile bootstrap CI of median(x) / median(y) (deterministic seed)."""
    rng = random.Random(seed)
    n1, n2 = len(x), len(y)
    out = []
    for _ in range(reps):
        mx = median([x[rng.randrange(n1)] for _ in range(n1)])
        my = median([y[rng.randrange(n2)] for _ in range(n2)])
        if my > 0:
            out.append(mx / my)
    out.sort()
    if not out:
        return float("nan"), float("nan")
    a = (1.0 - level) / 2.0
    return out[int(a * (len(out) - 1))], out[int((1.0 - a) * (len(out) - 1))]


def verdict(cur, base, alpha, effect):
    """The row of the table for one metric: a dict."""
    row = {"this_median": median(cur), "n": len(cur), "n_base": len(base), "effect": effect}
    if not base:
        row.update(verdict="new", base_median=float("nan"), change=float("nan"), p=float("nan"),
                   ci=(float("nan"), float("nan")), method="none")
        return row
    bm = median(base)
    change = row["this_median"] / bm - 1.0 if bm > 0 else float("nan")
    _, p, method = mann_whitney(cur, base)
    ci = bootstrap_ratio_ci(cur, base)
    if p < alpha and change > effect:
        v = "REGRESSION"
    elif p < alpha and change < -effect:
        v = "improvement"
    elif p < alpha:
        v = "small"
    else:
        v = "same"
    row.update(verdict=v, base_median=bm, change=change, p=p, ci=ci, method=method, effect=effect)
    return row


# ---- the run's context -----------------------------------------------------

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def context(cflags):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    rev = sh("git rev-parse HEAD") or "unknown"
    cc = os.environ.get("CC", "cc")
    return {
        "revision": rev,
        "revision_short": rev[:7],
        "dirty": bool(sh("git status --porcelain --untracked-files=no")),
        "compiler": (sh(cc + " --version").splitlines() or [""])[0],
        "cflags": cflags,
        "cpu_model": cpu,
        "cores": os.cpu_count() or 0,
        "affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "(unset)"),
        # bench/nightly re-executes itself with GOMP_SPINCOUNT=1000 when neither is set (harness/omp_policy.c)
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT", "(unset: 1000 in the bench)"),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
        "pocl_max_pthread_count": os.environ.get("POCL_MAX_PTHREAD_COUNT", "1 (set by the bench)"),
        "pocl_devices": os.environ.get("POCL_DEVICES", "basic (set by the bench)"),
        "bench_threads": 1,
        "host": platform.node(),
        "kernel": platform.release(),
        "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


# ---- history -----------------------------------------------------------------

def load_history(path):
    recs = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        recs.append(json.loads(line))
                    except ValueError:
                        print("nightly: skipping a bad line of %s" % path, file=sys.stderr)
    return recs


def baseline_samples(history, metric, window, baseline_rev):
    """Pooled samples of the metric over the baseline runs, and their run ids."""
    recs = [r for r in history if r.get("metric") == metric and not r.get("plant")]
    if baseline_rev:
        recs = [r for r in recs if r.get("revision", "").startswith(baseline_rev)]
    else:
        runs = []
        for r in recs:
            if r["run_id"] not in runs:
                runs.append(r["run_id"])
        keep = set(runs[-window:]) if window > 0 else set()
        recs = [r for r in recs if r["run_id"] in keep]
    out = []
    for r in recs:
        out.extend(r["samples"])
    return out, sorted({r["run_id"] for r in recs})


# ---- outputs -----------------------------------------------------------------

def write_gbench(path, ctx, metrics, stamp):
    """Google Benchmark's JSON format: compare.py reads it. Each metric is a
    family of repetitions whose real_time/cpu_time is the ratio sample
    (time_unit "s" so the values are the ratios themselves), plus
    <metric>/kernel and <metric>/baseline with the raw times in ns."""
    bms = []

    def family(name, values, unit, scale):
        n = len(values)
        if n == 0:
            return
        fam = len({b["run_name"] for b in bms})
        for i, v in enumerate(values):
            bms.append({"name": name, "family_index": fam, "per_family_instance_index": 0, "run_name": name,
                        "run_type": "iteration", "repetitions": n, "repetition_index": i, "threads": 1,
                        "iterations": 1, "real_time": v * scale, "cpu_time": v * scale, "time_unit": unit})
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        for agg, val in (("mean", mean), ("median", median(values)), ("stddev", sd)):
            bms.append({"name": name + "_" + agg, "family_index": fam, "per_family_instance_index": 0,
                        "run_name": name, "run_type": "aggregate", "repetitions": n,
                        "threads": 1, "aggregate_name": agg, "iterations": n, "real_time": val * scale,
                        "cpu_time": val * scale, "time_unit": unit})

    for m in metrics:
        # The value itself as real_time (a ratio, seconds or MiB: compare.py
        # reads them all as times; "unit" is in the history).
        family(m["name"], m["ratio"], "s", 1.0)
        family(m["name"] + "/kernel", m["kernel_s"], "ns", 1e9)
        family(m["name"] + "/baseline", m["baseline_s"], "ns", 1e9)
    gctx = {"date": stamp, "host_name": ctx["host"], "executable": "build/rel/bench/nightly",
            "num_cpus": ctx["cores"], "mhz_per_cpu": 0, "cpu_scaling_enabled": False, "caches": [],
            "load_avg": [ctx["loadavg"] or 0.0], "library_build_type": "release"}
    gctx.update({"distref_" + k: v for k, v in ctx.items()})
    with open(path, "w") as f:
        json.dump({"context": gctx, "benchmarks": bms}, f, indent=1)


def write_junit(path, rows, run_id):
    fails = sum(1 for r in rows if r["verdict"] == "REGRESSION")
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites><testsuite name="nightly" tests="%d" failures="%d" timestamp=%s>'
           % (len(rows), fails, sx.quoteattr(run_id))]
    for r in rows:
        out.append('<testcase classname="nightly" name=%s>' % sx.quoteattr(r["metric"]))
        msg = describe(r)
        if r["verdict"] == "REGRESSION":
            out.append("<failure message=%s>%s</failure>" % (sx.quoteattr(msg), sx.escape(msg)))
        else:
            out.append("<system-out>%s</system-out>" % sx.escape(msg))
        out.append("</testcase>")
    out.append("</testsuite></testsuites>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def describe(r):
    if r["verdict"] == "new":
        return "%s: no baseline yet; median %.4g" % (r["metric"], r["this_median"])
    out = ("%s: %s: median %.4g -> %.4g (%+.1f%%, p=%.2g, 95%% CI of ratio %.3f..%.3f, min effect %.0f%%)"
           % (r["metric"], r["verdict"], r["base_median"], r["this_median"], 100 * r["change"], r["p"],
              r["ci"][0], r["ci"][1], 100 * r["effect"]))
    if "confirm" in r:
        c = r["confirm"]
        out += "; confirmation run: %s, median %.4g (%+.1f%%, p=%.2g)" % (
            c["verdict"], c["this_median"], 100 * c["change"], c["p"])
    return out


def print_table(rows, base_desc):
    print("nightly: baseline = %s" % base_desc)
    print("%-38s %12s %12s %8s %9s %15s %s" % ("metric", "base_median", "this_median", "change", "p",
                                              "CI(ratio)", "verdict"))
    for r in rows:
        if r["verdict"] == "new":
            print("%-38s %12s %12.4g %8s %9s %15s %s" % (r["metric"], "-", r["this_median"], "-", "-", "-", "new"))
        else:
            print("%-38s %12.4g %12.4g %+7.1f%% %9.2g %7.3f..%-6.3f %s" % (
                r["metric"], r["base_median"], r["this_median"], 100 * r["change"], r["p"], r["ci"][0],
                r["ci"][1], r["verdict"]))


# ---- commands ------------------------------------------------------------------

def plot(history_path, outdir, window=5):
    """scripts/nightly_plot.py: history.png and index.html (imported here,
    not at the top: it imports this module's history helpers)."""
    import nightly_plot
    nightly_plot.plot(history_path, outdir, window)


def parse_effects(items):
    eff = dict(METRIC_EFFECT)
    for it in items or []:
        k, _, v = it.partition("=")
        eff[k] = float(v)
    return eff


def run_bench(bench, samples, only):
    """Runs the bench program; its JSON as a dict, None on failure."""
    return nightly_rows.run_json([bench], samples, only, None, "the bench program")


def measure(a, only):
    """Every source of metrics, one after the other: the bench program,
    the MPI bench, the conformance slices. One dict like the bench's JSON
    ("metrics", "plant"), or None when one failed."""
    bench = run_bench(a.bench, a.samples, only)
    if bench is None:
        return None
    metrics, plant = list(bench["metrics"]), bench.get("plant", "")
    if bench.get("opencl"):
        print("nightly: OpenCL rows skipped: no OpenCL device (%s)" % bench["opencl"])
    for more in (nightly_rows.run_mpi(a.mpi_bench, a.samples, only),
                 nightly_rows.run_conformance(a.conformance, a.conf_samples, only, not bench.get("opencl"),
                                              [a.bench, "--calibrate"], a.conf_suites)):
        if more is None:
            return None
        metrics += more["metrics"]
        plant = plant or more.get("plant", "")
    return {"metrics": metrics, "plant": plant}


def cmd_run(a):
    os.makedirs(a.outdir, exist_ok=True)
    history_path = a.history or os.path.join(a.outdir, "history.jsonl")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    ctx = context(a.cflags)
    run_id = "%s-%s-%d" % (stamp, ctx["revision_short"], os.getpid())
    if a.label:
        run_id += "-" + re.sub(r"[^A-Za-z0-9_.-]", "_", a.label)
    print("nightly: run %s, rev %s%s, %s, %d cores, %s, OPENBLAS_CORETYPE=%s" % (
        run_id, ctx["revision_short"], " (dirty)" if ctx["dirty"] else "", ctx["cpu_model"], ctx["cores"],
        ctx["compiler"], ctx["openblas_coretype"]))
    bench = measure(a, a.only)
    if bench is None:
        return 2
    plant = bench.get("plant", "")
    history = load_history(history_path)
    effects = parse_effects(a.effect)
    rows = []
    base_runs = set()
    for m in bench["metrics"]:
        base, ids = baseline_samples(history, m["name"], a.window, a.baseline)
        base_runs.update(ids)
        r = verdict(m["ratio"], base, a.alpha, effects.get(m["name"], a.min_effect))
        r["metric"] = m["name"]
        rows.append(r)
    # Confirmation: a metric that looks changed is measured again (fresh
    # samples, same baseline); only a change both measurements agree on is
    # reported. A burst of load from another job during one metric's turn
    # rarely repeats; a real regression always does.
    suspects = [r for r in rows if r["verdict"] in ("REGRESSION", "improvement")]
    confirm_samples = {}
    if suspects and a.confirm:
        names = ",".join(r["metric"] for r in suspects)
        print("nightly: confirming %s with %d fresh samples" % (names, a.samples))
        again = measure(a, names)
        if again is None:
            return 2
        for m in again["metrics"]:
            confirm_samples[m["name"]] = m["ratio"]
        for r in suspects:
            if r["metric"] not in confirm_samples:   # not measured again (its tool went away): not confirmed
                r["verdict"] = "unconfirmed"
                continue
            base, _ = baseline_samples(history, r["metric"], a.window, a.baseline)
            r2 = verdict(confirm_samples[r["metric"]], base, a.alpha, r["effect"])
            r["confirm"] = r2
            if r2["verdict"] != r["verdict"]:
                r["verdict"] = "unconfirmed"
    base_desc = ("revision %s" % a.baseline) if a.baseline else "the last %d runs" % a.window
    print_table(rows, "%s (%d runs in the history)" % (base_desc, len(base_runs)))
    verdicts = {r["metric"]: r["verdict"] for r in rows}
    with open(history_path, "a") as f:
        for m in bench["metrics"]:
            rec = {"run_id": run_id, "time": stamp, "metric": m["name"], "unit": m.get("unit", "ratio"),
                   "kernel": m["kernel"], "baseline": m["baseline"], "samples": m["ratio"],
                   "kernel_s": m["kernel_s"], "baseline_s": m["baseline_s"], "median": median(m["ratio"]),
                   "plant": plant if plant == m["name"] else "", "label": a.label or "",
                   "verdict": verdicts[m["name"]], "confirm_samples": confirm_samples.get(m["name"], [])}
            rec.update(ctx)
            f.write(json.dumps(rec, sort_keys=True) + "\n")
    gpath = os.path.join(a.outdir, "nightly-%s-%s.json" % (stamp, ctx["revision_short"]))
    write_gbench(gpath, ctx, bench["metrics"], stamp)
    jpath = os.path.join(a.outdir, "nightly-junit.xml")
    write_junit(jpath, rows, run_id)
    print("nightly: history %s, Google Benchmark JSON %s, JUnit %s" % (history_path, gpath, jpath))
    if not a.no_plot:
        plot(history_path, a.outdir, a.window)
    imp = [r["metric"] for r in rows if r["verdict"] == "improvement"]
    reg = [r["metric"] for r in rows if r["verdict"] == "REGRESSION"]
    for r in rows:
        if r["verdict"] in ("improvement", "REGRESSION", "unconfirmed"):
            print("nightly: " + describe(r))
    print("nightly: %d metrics, %d regressed, %d improved%s" % (
        len(rows), len(reg), len(imp), (": regressed " + " ".join(reg)) if reg else ""))
    return 1 if reg else 0


# ---- selftest: the statistics against known answers --------------------------

def selftest():
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    # Ranks with ties.
    r, t = ranks([3, 1, 3, 2])
    check(r == [3.5, 1.0, 3.5, 2.0] and t == [2], "ranks with ties")
    # Fully separated 5 vs 5: U = 0, exact two-sided p = 2 / C(10,5).
    u, p, m = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    check(u == 0 and m == "exact" and abs(p - 2.0 / 252) < 1e-12, "exact separated 5v5: p=%g" % p)
    u, p, m = mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5])
    check(u == 25 and abs(p - 2.0 / 252) < 1e-12, "exact separated, other side")
    # The exact null distribution sums to C(n1+n2, n1) and is symmetric.
    c = _exact_cdf_counts(4, 6)
    check(sum(c) == 210 and c == c[::-1], "exact null distribution of 4v6")
    # Interleaved samples: nothing to see.
    u, p, m = mann_whitney([1, 3, 5, 7, 9], [2, 4, 6, 8, 10])
    check(p > 0.5, "interleaved: p=%g" % p)
    # All equal (every value tied): p = 1.
    u, p, m = mann_whitney([1.0] * 8, [1.0] * 8)
    check(p == 1.0 and m == "normal", "all tied: p=%g" % p)
    # The normal approximation agrees with the exact p for 15 vs 15.
    rng = random.Random(1)
    for shift in (0.0, 0.3, 0.8):
        x = [rng.gauss(shift, 1) for _ in range(15)]
        y = [rng.gauss(0, 1) for _ in range(15)]
        _, pe, me = mann_whitney(x, y)
        _, pn, mn = mann_whitney(x, y, exact_limit=0)
        check(me == "exact" and mn == "normal" and abs(pe - pn) < 0.02, "normal vs exact 15v15: %g %g" % (pe, pn))
    # Normal approximation, hand-computed: 20 vs 20 separated, no ties:
    # U=0, mu=200, var=20*20*41/12, z=(200-0.5)/sqrt(var).
    x = list(range(20))
    y = list(range(100, 120))
    _, p, m = mann_whitney(x, y, exact_limit=0)
    z = 199.5 / math.sqrt(400 * 41 / 12.0)
    check(m == "normal" and abs(p - math.erfc(z / math.sqrt(2))) < 1e-15, "normal 20v20")
    # Tie correction: x=[1,1,2], y=[2,3,3] by hand: ranks 1.5,1.5,3.5 | 3.5,5.5,5.5;
    # U1 = 6.5 - 6 = 0.5; var = 9/12*(7 - (6+6+6)/30) = 4.8; z = (4.5-0.5-0.5)/sqrt(4.8).
    u, p, m = mann_whitney([1, 1, 2], [2, 3, 3])
    check(u == 0.5 and abs(p - math.erfc(3.5 / math.sqrt(4.8) / math.sqrt(2))) < 1e-15, "tie correction")
    # Verdicts: a 15% shift is a regression, 2% is not (min effect 5%).
    base = [1 + 0.01 * rng.gauss(0, 1) for _ in range(30)]
    cur = [1.15 + 0.01 * rng.gauss(0, 1) for _ in range(15)]
    check(verdict(cur, base, 0.01, 0.05)["verdict"] == "REGRESSION", "15% is a regression")
    cur = [0.85 + 0.01 * rng.gauss(0, 1) for _ in range(15)]
    check(verdict(cur, base, 0.01, 0.05)["verdict"] == "improvement", "-15% is an improvement")
    cur = [1.02 + 0.01 * rng.gauss(0, 1) for _ in range(15)]
    check(verdict(cur, base, 0.01, 0.05)["verdict"] in ("small", "same"), "2% is not an alarm")
    lo, hi = bootstrap_ratio_ci([1.15] * 5 + [1.16] * 5, [1.0] * 10)
    check(1.14 < lo <= hi < 1.17, "bootstrap CI %g..%g" % (lo, hi))
    for f in fails:
        print("nightly selftest: FAILED: %s" % f)
    print("nightly selftest: %d checks failed" % len(fails) if fails else "nightly selftest: statistics OK")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--bench", default="build/rel/bench/nightly")
    r.add_argument("--samples", type=int, default=15)
    r.add_argument("--only")
    r.add_argument("--mpi-bench", default="", help="bench/nightly_mpi, run under mpirun -np 2 (none: no MPI rows)")
    r.add_argument("--conformance", default="", help="bin/conformance: its per-variant slices are timed (none: no rows)")
    r.add_argument("--conf-samples", type=int, default=3, help="runs of each conformance slice (0: none)")
    r.add_argument("--conf-suites", default=nightly_rows.IN_PROCESS_SUITES,
                   help="the suites of the ref, openmp and opencl slices (a smaller slice for tests)")
    r.add_argument("--baseline", help="a revision (prefix): its runs are the baseline")
    r.add_argument("--window", type=int, default=5, help="earlier runs pooled as the baseline")
    r.add_argument("--alpha", type=float, default=0.01)
    r.add_argument("--min-effect", type=float, default=DEFAULT_EFFECT)
    r.add_argument("--effect", action="append", help="METRIC=FRACTION: that metric's minimum effect")
    r.add_argument("--history")
    r.add_argument("--outdir", default="reports/bench")
    r.add_argument("--label")
    r.add_argument("--no-plot", action="store_true")
    r.add_argument("--cflags", default="")
    r.add_argument("--confirm", type=int, default=1,
                   help="1: re-measure a changed metric and report it only if the re-run agrees (default); 0: no")
    p = sub.add_parser("plot")
    p.add_argument("--history")
    p.add_argument("--outdir", default="reports/bench")
    sub.add_parser("selftest")
    a = ap.parse_args()
    if a.cmd == "run":
        return cmd_run(a)
    if a.cmd == "plot":
        plot(a.history or os.path.join(a.outdir, "history.jsonl"), a.outdir)
        return 0
    return selftest()


if __name__ == "__main__":
    sys.exit(main())
