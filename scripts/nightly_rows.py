"""distref nightly: the rows measured outside bench/nightly.c (issue 15,
item 6; docs/NIGHTLY.md). scripts/nightly.py imports this module.

Each runner returns what bench/nightly.c writes with --json, a dict with
"metrics": [{"name", "kernel", "baseline", "unit", "ratio": [samples],
"kernel_s": [...], "baseline_s": [...]}] and "plant", or None when the
measurement failed (the error printed). A runner whose tool is absent
prints a one-line note and returns no metrics.

  run_mpi(bench, samples, only)     bench/nightly_mpi.c under mpirun -np 2:
                                    the exact all-reduce over MPI_Allreduce
  run_conformance(conf, samples, only, have_opencl, calib)
                                    bin/conformance's per-variant slices:
                                    CPU seconds over a calibration
                                    workload's, run right before and after
                                    each slice (a ratio), wall time (s) and
                                    peak RSS (MiB); lower is better
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

MPI_NP = 2
MPI_LAUNCHES = 5

# The slice of `make conformance` each variant's rows time: its quick suites
# for that variant alone (bin/conformance --variant NAME; ref = the
# reference's own cases). loss_curves (21-58 s a variant here) and the
# variant-independent durability suite (18 s) are left out so that a full
# `make nightly` stays under 10 minutes on 2 cores; mpi is its own suite
# (the mpi variant under mpirun against the reference, ~60 s).
IN_PROCESS_SUITES = "batch_splitting,regularization,reductions,checkpoints"


def conf_slices(suites=IN_PROCESS_SUITES):
    """(variant, bin/conformance arguments) of each slice; suites replaces
    the in-process variants' suites (the small-scale test's smaller slice)."""
    return [(v, ["--quick", "--variant", v, "--only", suites]) for v in ("ref", "openmp", "opencl")] + [
        ("mpi", ["--quick", "--variant", "mpi", "--only", "mpi"])]


CONF_SLICES = conf_slices()


def conf_names(v):
    """The metrics of variant v's slice: CPU ratio, wall seconds, peak RSS."""
    return ["conformance_cpu_%s_vs_calib" % v, "conformance_wall_s_" + v, "conformance_peak_rss_mib_" + v]


def conf_metric_names():
    out = []
    for v, _ in CONF_SLICES:
        out += conf_names(v)
    return out


def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    return env


def _selected(only, names):
    if not only:
        return list(names)
    want = only.split(",")
    return [n for n in names if n in want]


def run_mpi(bench, samples, only):
    """bench/nightly_mpi.c under mpirun -np 2 (root allowed, oversubscribed)."""
    if not bench:
        return {"metrics": [], "plant": ""}
    if not shutil.which("mpirun"):
        print("nightly: MPI rows skipped: no mpirun (scripts/deps.sh installs openmpi-bin)")
        return {"metrics": [], "plant": ""}
    try:
        listed = subprocess.run([bench, "--list"], capture_output=True, text=True).stdout.splitlines()
    except OSError as e:
        print("nightly: %s: %s" % (bench, e), file=sys.stderr)
        return None
    names = [l.split()[0] for l in listed if l.strip()]   # each line: the metric's name, then what it times
    if only and not _selected(only, names):
        return {"metrics": [], "plant": ""}
    # MPI_LAUNCHES mpirun launches, samples split between them: a launch's
    # ranks keep their pages, message slots and cores for the whole launch,
    # and that moved the 1 MB CPU row's median by -7..+9% from one launch to
    # the next while its samples within a launch stayed within ~3%; with 3
    # launches an odd launch (8-10% low) still decided a median now and then
    # (docs/history/NIGHTLY.md, session 9). Spread over 5 launches, that variation is
    # inside every run's samples (and the baseline's), not between runs.
    launches = max(1, min(MPI_LAUNCHES, samples))
    out = None
    for k in range(launches):
        n = samples // launches + (1 if k < samples % launches else 0)
        got = run_json(["mpirun", "--oversubscribe", "-np", str(MPI_NP), bench], n, only, mpi_env(),
                       "the MPI bench program")
        if got is None:
            return None
        if out is None:
            out = got
            continue
        by_name = {m["name"]: m for m in got["metrics"]}
        for m in out["metrics"]:
            for key in ("ratio", "kernel_s", "baseline_s"):
                m[key] = m[key] + by_name[m["name"]][key]
    return out


def run_json(cmd, samples, only, env, what):
    """A bench program's JSON: cmd --samples N --json FILE [--only NAMES],
    or None (with a note) when it fails."""
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = cmd + ["--samples", str(samples), "--json", tmp] + (["--only", only] if only else [])
    sys.stdout.flush()
    try:
        if subprocess.run(cmd, env=env).returncode != 0:
            print("nightly: %s failed" % what, file=sys.stderr)
            return None
        with open(tmp) as f:
            return json.load(f)
    finally:
        os.unlink(tmp)


def _time_child(cmd, env):
    """Wall seconds, peak RSS (MiB), exit status, stderr and CPU seconds
    (user + sys) of cmd. wait4's rusage covers the process and every
    descendant it waited for (mpirun and its ranks, the shells of
    system()): CPU seconds summed, ru_maxrss the largest of them."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss / 1024.0, p.returncode, err.decode(errors="replace"), ru.ru_utime + ru.ru_stime


def _calibrate(calib, env):
    """CPU seconds of one run of the calibration workload, None on failure."""
    _, _, rc, err, cpu = _time_child(calib, env)
    if rc != 0:
        print("nightly: %s failed (exit %d): %s" % (" ".join(calib), rc, err.strip()[-300:]), file=sys.stderr)
        return None
    return cpu


def run_conformance(conf, samples, only, have_opencl=True, calib=None, suites=IN_PROCESS_SUITES):
    """samples runs of each selected slice, the order rotating from one
    sample to the next (load drifting during the run spreads over every
    variant), each in a fresh --out folder. calib (a command: bench/nightly
    --calibrate) runs before the first slice and after every slice; a
    slice's CPU row is its CPU seconds over the mean of the calibration
    runs on either side of it: what slows every CPU-bound process on the
    machine (the clock, cache and memory contention) moves both. Without
    a conformance_cpu_* row selected the calibration is not run."""
    if not conf or samples <= 0:
        return {"metrics": [], "plant": ""}
    slices = []
    if only and not [n for n in only.split(",") if n.startswith("conformance_cpu_")]:
        calib = None
    for v, args in conf_slices(suites):
        if only and not _selected(only, conf_names(v)):
            continue
        if v == "opencl" and not have_opencl:
            print("nightly: conformance opencl rows skipped: no OpenCL device")
            continue
        if v == "mpi" and not shutil.which("mpirun"):
            print("nightly: conformance mpi rows skipped: no mpirun")
            continue
        slices.append((v, args))
    if not slices:
        return {"metrics": [], "plant": ""}
    wall = {v: [] for v, _ in slices}
    rss = {v: [] for v, _ in slices}
    cpu = {v: [] for v, _ in slices}
    cal = {v: [] for v, _ in slices}
    env = mpi_env()
    out = tempfile.mkdtemp(prefix="distref_nightly_conf_")
    print("nightly: conformance slices %s, %d runs each" % (", ".join(v for v, _ in slices), samples))
    sys.stdout.flush()
    try:
        before = _calibrate(calib, env) if calib else 0.0
        if before is None:
            return None
        for s in range(samples):
            k = s % len(slices)
            for v, args in slices[k:] + slices[:k]:
                cmd = [conf] + args + ["--out", os.path.join(out, v)]
                w, r, rc, err, c = _time_child(cmd, env)
                if rc != 0:
                    print("nightly: %s failed (exit %d): %s" % (" ".join(cmd), rc, err.strip()[-300:]),
                          file=sys.stderr)
                    return None
                after = _calibrate(calib, env) if calib else 0.0
                if after is None:
                    return None
                wall[v].append(w)
                rss[v].append(r)
                cpu[v].append(c)
                cal[v].append(0.5 * (before + after))
                before = after
    finally:
        shutil.rmtree(out, ignore_errors=True)
    metrics = []
    for v, args in slices:
        what = "bin/conformance " + " ".join(args)
        print("  conformance %-7s wall %s s, CPU %s s, calibration CPU %s s, peak RSS %s MiB" % (
            v, " ".join("%.1f" % x for x in wall[v]), " ".join("%.2f" % x for x in cpu[v]),
            " ".join("%.3f" % x for x in cal[v]), " ".join("%.0f" % x for x in rss[v])))
        if calib:
            metrics.append({"name": "conformance_cpu_%s_vs_calib" % v, "kernel": what + ": CPU s (user + sys)",
                            "baseline": " ".join(calib) + ": CPU s, the mean of the runs before and after",
                            "unit": "ratio", "ratio": [c / b if b > 0 else 0.0 for c, b in zip(cpu[v], cal[v])],
                            "kernel_s": cpu[v], "baseline_s": cal[v]})
        metrics.append({"name": "conformance_wall_s_" + v, "kernel": what + ": wall time", "baseline": "-",
                        "unit": "s", "ratio": wall[v], "kernel_s": wall[v], "baseline_s": []})
        metrics.append({"name": "conformance_peak_rss_mib_" + v, "kernel": what + ": peak RSS", "baseline": "-",
                        "unit": "MiB", "ratio": rss[v], "kernel_s": wall[v], "baseline_s": []})
    return {"metrics": metrics, "plant": ""}
