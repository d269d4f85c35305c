#!/usr/bin/env python3
"""distref nightly: the A/A and planted tally of a history (docs/NIGHTLY.md).

    nightly_tally.py HISTORY [--window W] [--alpha A] [--only A,B]

For every metric of every run after the first, in the order of the
history: the run's recorded verdict (with its confirmation re-run), and the
change and p-value recomputed against the same baseline the run had (the
pooled samples of the last W earlier runs without that metric planted,
scripts/nightly.py's baseline_samples and verdict). A record whose metric
was planted counts toward detection (flagged = REGRESSION); any other
counts as an A/A comparison (false alarm = REGRESSION; improvements and the
suspects the confirmation dismissed are counted apart). Prints one line per
metric: the minimum effect in force now, A/A comparisons, false alarms
(recorded; and recomputed with today's effect, without the confirmation
re-run), dismissed, A/A changes min..max, planted runs flagged (recorded;
recomputed), planted changes min..max, and the load average at the start
of the metric's runs (min..max, as recorded).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nightly  # noqa: E402


def tally(history, window, alpha, only=None):
    runs = []
    for r in history:
        if r["run_id"] not in runs:
            runs.append(r["run_id"])
    order = {rid: i for i, rid in enumerate(runs)}
    out = {}
    for r in history:
        m = r["metric"]
        if only and m not in only:
            continue
        earlier = [h for h in history if order[h["run_id"]] < order[r["run_id"]]]
        base, _ = nightly.baseline_samples(earlier, m, window, None)
        if not base:
            continue
        eff = nightly.METRIC_EFFECT.get(m, nightly.DEFAULT_EFFECT)
        row = nightly.verdict(r["samples"], base, alpha, eff)
        t = out.setdefault(m, {"aa": [], "plant": [], "effect": eff, "load": []})
        if r.get("loadavg") is not None:
            t["load"].append(r["loadavg"])
        (t["plant"] if r.get("plant") == m else t["aa"]).append((r["verdict"], row["change"], row["p"],
                                                                  row["verdict"]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("history")
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--only")
    a = ap.parse_args()
    t = tally(nightly.load_history(a.history), a.window, a.alpha, a.only.split(",") if a.only else None)
    print("%-40s %6s %4s %6s %4s %17s | %9s %17s | %s" % ("metric", "effect", "A/A", "FA/rec", "dism",
                                                       "A/A change", "plant/rec", "planted change", "load"))
    for m, v in t.items():
        aa, pl = v["aa"], v["plant"]
        fa = sum(1 for x in aa if x[0] == "REGRESSION")
        far = sum(1 for x in aa if x[3] == "REGRESSION")
        dis = sum(1 for x in aa if x[0] in ("unconfirmed", "improvement"))
        ca = [x[1] for x in aa]
        cp = [x[1] for x in pl]
        print("%-40s %5.0f%% %4d %3d/%-2d %4d %17s | %2d/%2d/%-3d %17s | %s" % (
            m, 100 * v["effect"], len(aa), fa, far, dis,
            "%+.1f..%+.1f%%" % (100 * min(ca), 100 * max(ca)) if ca else "-",
            sum(1 for x in pl if x[0] == "REGRESSION"), sum(1 for x in pl if x[3] == "REGRESSION"), len(pl),
            "%+.1f..%+.1f%%" % (100 * min(cp), 100 * max(cp)) if cp else "-",
            "%.1f..%.1f" % (min(v["load"]), max(v["load"])) if v["load"] else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
