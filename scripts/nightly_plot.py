"""distref nightly: the plots of the history (issue 15, item 4;
docs/NIGHTLY.md). scripts/nightly.py imports this module.

  plot(history_path, outdir, window)   reports/bench/history.png (gnuplot)
                                       and index.html
"""
import os
import re
import shutil
import subprocess
import sys
import xml.sax.saxutils as sx

from nightly import load_history, median

UNIT_LABEL = {"ratio": "kernel / baseline", "s": "wall seconds", "MiB": "peak RSS (MiB)"}


def plot(history_path, outdir, window=5):
    """reports/bench/history.png: each metric's median over the runs, with
    the min..max of its samples; planted runs drawn apart, regressions
    circled."""
    if not shutil.which("gnuplot"):
        print("nightly: plot skipped: no gnuplot")
        return
    hist = load_history(history_path)
    metrics = []
    for r in hist:
        if r["metric"] not in metrics:
            metrics.append(r["metric"])
    if not metrics:
        return
    ddir = os.path.join(outdir, "plot")
    os.makedirs(ddir, exist_ok=True)
    runs = []
    for r in hist:
        if r["run_id"] not in runs:
            runs.append(r["run_id"])
    index = {rid: i for i, rid in enumerate(runs)}
    cols = 2
    rows_n = (len(metrics) + cols - 1) // cols
    gp = ["set terminal pngcairo size %d,%d font 'sans,9'" % (1100, 300 * rows_n),
          "set output '%s'" % os.path.join(outdir, "history.png"),
          "set multiplot layout %d,%d title 'distref nightly: median per run (bars: min..max of its samples); "
          "orange: planted slowdown; red circle: REGRESSION; shaded: the baseline window of the latest run'"
          % (rows_n, cols),
          "set xlabel 'run (revision)'", "set grid",
          "unset key", "set xtics rotate by 45 right", "set offsets 0.5, 0.5, 0, 0"]
    units = {r["metric"]: r.get("unit", "ratio") for r in hist}
    for m in metrics:
        fn = os.path.join(ddir, re.sub(r"[^A-Za-z0-9_]", "_", m) + ".dat")
        with open(fn, "w") as f:
            for r in hist:
                if r["metric"] != m:
                    continue
                s = r["samples"]
                f.write("%d %g %g %g %s %d %d\n" % (index[r["run_id"]], median(s), min(s), max(s),
                                                    r.get("revision_short", "?"), 1 if r.get("plant") else 0,
                                                    1 if r.get("verdict") == "REGRESSION" else 0))
        # The baseline window of the latest run: the earlier plain runs it
        # was compared with, shaded.
        mr = [r for r in hist if r["metric"] == m]
        plain = [index[r["run_id"]] for r in mr[:-1] if not r.get("plant")][-window:]
        gp.append("unset object")
        if plain:
            gp.append("set object 1 rect from %g, graph 0 to %g, graph 1 fc rgb '#e8e8e8' fs solid noborder behind"
                      % (min(plain) - 0.4, max(plain) + 0.4))
        gp.append("set title '%s' noenhanced" % m)
        gp.append("set ylabel '%s'" % UNIT_LABEL.get(units[m], units[m]))
        gp.append("plot '%s' using 1:($6==0?$2:1/0):3:4:xtic(5) with yerrorbars lc rgb '#1f77b4' pt 7 title "
                  "'median', '' using 1:($6==1?$2:1/0):3:4 with yerrorbars lc rgb '#ff7f0e' pt 5 title 'planted', "
                  "'' using 1:($7==1?$2:1/0) with points lc rgb '#d62728' pt 6 ps 3 lw 2 title 'REGRESSION'"
                  % fn)
    gp.append("unset multiplot")
    with open(os.path.join(ddir, "history.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    r = subprocess.run(["gnuplot", os.path.join(ddir, "history.gp")], capture_output=True, text=True)
    if r.returncode != 0:
        print("nightly: gnuplot failed: %s" % r.stderr.strip()[:500], file=sys.stderr)
        return
    # index.html: the plot and the latest run's verdicts.
    last = runs[-1]
    rows = ["<tr><td>%s</td><td>%s</td><td>%.4g %s</td><td>%s</td></tr>" % (
        sx.escape(r["metric"]), sx.escape(r.get("revision_short", "?")), r["median"],
        sx.escape("" if r.get("unit", "ratio") == "ratio" else r["unit"]), sx.escape(r.get("verdict", "")))
        for r in hist if r["run_id"] == last]
    with open(os.path.join(outdir, "index.html"), "w") as f:
        f.write("<!doctype html><html><head><meta charset='utf-8'><title>distref nightly</title></head><body>\n"
                "<h1>distref nightly performance runs</h1>\n<p>%d runs in <code>history.jsonl</code>; "
                "latest: <code>%s</code> (docs/NIGHTLY.md)</p>\n"
                "<table border='1' cellpadding='4'><tr><th>metric</th><th>revision</th>"
                "<th>median</th><th>verdict</th></tr>\n%s\n</table>\n"
                "<p><img src='history.png' alt='each metric per run'></p></body></html>\n"
                % (len(runs), sx.escape(last), "\n".join(rows)))
    print("nightly: plot %s, %s" % (os.path.join(outdir, "history.png"), os.path.join(outdir, "index.html")))
