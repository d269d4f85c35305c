# distref conformance plots (gnuplot 5).
#
#   gnuplot -e "outdir='reports/out'" reports/plots.gp
#
# Reads the .dat files bin/conformance wrote into outdir and writes, into the
# same directory, the five PNGs that index.html embeds:
#   loss_curves.png     curve_ref_one_device.dat, curve_openmp_exact_mirrored4.dat,
#                       curve_openmp_fast_mirrored4.dat     ("step loss")
#   fast_delta.png      fast_delta.dat                      ("step |delta loss|", 1e-12 = exactly 0)
#   splits.png          split_auto_0..2.dat, split_off_0..2.dat ("step n_replica0 n_replica1 ...",
#                       one per uneven case and auto-shard policy; the header's "(...)" names the case)
#   regularization.png  reg.dat                             ("replicas reg_term_in_loss reference")
#   faults.png          faults.dat, or the file named by faults= ("fault expected_suite caught suites_that_failed";
#                       faultsrun='<revision>, <date>' goes into its title)
# A missing data file gives a PNG that says so instead of stopping the script.

if (!exists("outdir")) outdir = "reports/out"
dat(name) = outdir . "/" . name
readable(f) = system(sprintf("test -r '%s' && echo 1 || echo 0", f)) eq "1"

# pngcairo where there is one, libgd's png otherwise; `term(w, h)` sets the size
termname = (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) ? "pngcairo" : "png"
term(w, h) = sprintf("set terminal %s size %d,%d font 'DejaVu Sans,12' noenhanced%s", \
                     termname, w, h, (termname eq "pngcairo") ? " linewidth 1.2" : "")
eval(term(1000, 560))

# Drawn in place of a plot whose data file is missing: set `nodata` first.
nodata = ""
placeholder = 'reset; unset border; unset tics; unset key; set title ptitle; ' . \
              'set label 1 "no data: " . nodata . " was not written" at graph 0.5, 0.5 center font ",16"; ' . \
              'set xrange [0:1]; set yrange [0:1]; plot NaN notitle'

# ---------------------------------------------------------------- loss curves
set output dat("loss_curves.png")
ref   = dat("curve_ref_one_device.dat")
exact = dat("curve_openmp_exact_mirrored4.dat")
fast  = dat("curve_openmp_fast_mirrored4.dat")
ptitle = "Training loss: reference vs the engine (mirrored, 4 replicas)"
if (readable(ref) && readable(exact) && readable(fast)) {
    reset
    stats ref using 2 nooutput
    lo = STATS_min; hi = STATS_max; nsteps = STATS_records
    stats exact using 2 nooutput
    lo = (STATS_min < lo) ? STATS_min : lo; hi = (STATS_max > hi) ? STATS_max : hi
    stats fast using 2 nooutput
    lo = (STATS_min < lo) ? STATS_min : lo; hi = (STATS_max > hi) ? STATS_max : hi
    span = (hi > lo) ? hi - lo : ((abs(hi) > 0) ? 0.02 * abs(hi) : 1)
    # the largest |exact - ref| and |fast - ref| over the steps both have
    stats sprintf("< paste '%s' '%s'", ref, exact) using (abs($2 - $4)) nooutput
    dexact = STATS_max
    stats sprintf("< paste '%s' '%s'", ref, fast) using (abs($2 - $4)) nooutput
    dfast = STATS_max
    set title ptitle . sprintf("\nmax |exact - ref| = %.3g%s,  max |fast - ref| = %.3g%s", \
        dexact, (dexact == 0 ? " (bit-identical)" : ""), dfast, (dfast == 0 ? " (identical)" : ""))
    set xlabel "training step"
    set ylabel "loss (mean cross-entropy + L2, nats)"
    set grid
    # room above the data for the key
    set yrange [lo - 0.08 * span : hi + 0.45 * span]
    set xrange [0.5 : nsteps + 0.5]
    set xtics 1
    if (nsteps > 20) { set xtics 5 }
    set key top right box opaque samplen 4 spacing 1.2
    plot ref   using 1:2 with lines lw 9 lc rgb "#a6cee3" title "reference (ref/), one_device  [thick line]", \
         exact using 1:2 with points pt 7 ps 1.4 lc rgb "#1f3d99" title "engine exact, openmp mirrored R=4  [dots: on the line = identical]", \
         fast  using 1:2 with lines dt (10,8) lw 2.5 lc rgb "#e6550d" title "engine fast, openmp mirrored R=4  [dashed]"
} else {
    nodata = "curve_*.dat"; eval(placeholder)
}

# ------------------------------------------------------------ fast-mode delta
set output dat("fast_delta.png")
fd = dat("fast_delta.dat")
ptitle = "Fast mode: |loss(openmp fast, R=4) - loss(ref one_device)| per step"
if (readable(fd)) {
    reset
    stats fd using 2 nooutput
    dmax = STATS_max; nsteps = STATS_records
    stats fd using ($2 > 1e-12 ? 1 : 0) nooutput
    ndiff = int(STATS_sum)
    # one float32 ULP of the loss, for scale (from the reference curve when it is there)
    ulp = NaN
    if (readable(ref)) {
        stats ref using 2 nooutput
        ulp = 2.0 ** (floor(log(abs(STATS_mean)) / log(2)) - 23)
    }
    set termoption enhanced
    set title ptitle . sprintf("\n%d of %d steps differ from the reference", ndiff, nsteps) noenhanced
    set xlabel "training step" noenhanced
    set ylabel "|delta loss| (nats, log scale)" noenhanced
    set logscale y
    set format y "10^{%L}"
    top = (dmax * 1e3 > 1e-4) ? dmax * 1e3 : 1e-4     # the key sits in the top decades
    set yrange [1e-13 : top]
    set xrange [0.5 : nsteps + 0.5]
    set xtics 1
    if (nsteps > 20) { set xtics 5 }
    set grid
    set key inside top center horizontal maxcols 2 box opaque noenhanced spacing 1.2 width -4
    plot 1e-12 with lines dt 3 lw 1.5 lc rgb "#777777" title "1e-12 floor = exactly equal (delta 0)", \
         ulp with lines dt 2 lw 1.5 lc rgb "#3182bd" title sprintf("1 float32 ULP of the loss (%.2g)", ulp), \
         fd using 1:($2 > 1e-12 ? $2 : NaN) with linespoints pt 7 ps 1.3 lw 2 lc rgb "#e6550d" title "fast differs from ref", \
         fd using 1:($2 > 1e-12 ? NaN : $2) with points pt 6 ps 1.6 lw 2 lc rgb "#31a354" title "fast equals ref bit for bit"
} else {
    nodata = "fast_delta.dat"; eval(placeholder)
}

# --------------------------------------------------------------- batch splits
# Two rules, one per auto-shard policy, each panel titled with the rule it
# shows (TensorFlow 2.21 as measured, docs/SEMANTICS.md):
#   AUTO  the default on an in-memory dataset: each batch of B is cut into
#         slices of ceil(B/R), the last slices short or empty
#         (range(23).batch(10) over 4 replicas: 3,3,3,1 3,3,3,1 1,1,1,0)
#   OFF   batch_sizes_for_worker: the first G mod R replicas get one more, a
#         short final batch fills replicas in order (3,3,2,2 ... 3,0,0,0)
eval(term(1400, 1100))
set output dat("splits.png")
ptitle = "Per-replica batch sizes"
pols = "auto off"
polname(p) = (p eq "auto") ? "AUTO (the default)" : "OFF"
rule(p) = (p eq "auto") ? "slices of ceil(B/R); the last slices short or empty" \
                        : "the first G mod R replicas get one more; a short batch fills in order"
splitf(p, k) = dat(sprintf("split_%s_%d.dat", p, k))
have_splits = 1
do for [k = 0:2] { do for [p = 1:2] { have_splits = have_splits && readable(splitf(word(pols, p), k)) } }
if (have_splits) {
    reset
    array pal[8] = ["#1f78b4", "#33a02c", "#e31a1c", "#ff7f00", "#6a3d9a", "#b15928", "#a6cee3", "#b2df8a"]
    # replicas per case (both policies split the same case); one shared key
    array Rs[3]
    Rmax = 0
    do for [k = 0:2] {
        stats splitf("auto", k) nooutput
        Rs[k + 1] = STATS_columns - 1
        Rmax = (Rs[k + 1] > Rmax) ? Rs[k + 1] : Rmax
    }
    # one shared key above the panels, drawn by hand (a key would wrap to the panel's width)
    do for [i = 0:Rmax - 1] {
        kx = 0.5 + (i - (Rmax - 1) / 2.0) * 0.1
        set object 100 + i rect center screen kx - 0.03, 0.905 size char 2.2, char 1.1 \
            fc rgb pal[i % 8 + 1] fs solid 0.85 border rgb "#333333" front
        set label 100 + i sprintf("replica %d", i) at screen kx - 0.016, 0.905 left front font ",12"
    }
    set multiplot layout 3,2 margins 0.06, 0.98, 0.05, 0.84 spacing 0.06, 0.09 \
        title "Per-replica batch sizes each step, by auto-shard policy: left AUTO, TensorFlow's default on an in-memory dataset\n(each batch cut into slices of ceil(B/R)); right OFF (batch_sizes_for_worker: the first G mod R replicas get one more)" font ",13"
    set style data histograms
    set style histogram clustered gap 1
    set style fill solid 0.85 border rgb "#333333"
    set boxwidth 1.0 relative
    set grid ytics
    do for [k = 0:2] {
        do for [p = 1:2] {
            pol = word(pols, p)
            f = splitf(pol, k)
            R = Rs[k + 1]
            ymax = 0
            do for [c = 2:R + 1] {
                stats f using c nooutput
                ymax = (STATS_max > ymax) ? STATS_max : ymax
            }
            # the case, from the header's "(...)"
            head = system(sprintf("sed -n '1s/^[^(]*(\\(.*\\)).*$/\\1/p' '%s'", f))
            set title sprintf("%s: %s\n%s", polname(pol), head, rule(pol)) font ",11"
            if (k == 2) { set xlabel "training step" } else { unset xlabel }
            if (p == 1) { set ylabel "examples per replica" } else { unset ylabel }
            set yrange [0 : ceil(ymax * 1.25) + 0.5]
            set ytics 1
            if (ymax > 5) { set ytics 2 }
            unset key
            w = 1.0 / (R + 1)
            plot for [c = 2:R + 1] f using c:xtic(1) lc rgb pal[(c - 2) % 8 + 1] notitle, \
                 for [c = 2:R + 1] f using ($0 + (c - 2 - (R - 1) / 2.0) * w):(column(c)):(sprintf("%d", column(c))) \
                     with labels offset 0, 0.65 font ",10" notitle
            unset for [i = 0:Rmax - 1] object 100 + i
            unset for [i = 0:Rmax - 1] label 100 + i
        }
    }
    unset multiplot
} else {
    nodata = "split_auto_*.dat, split_off_*.dat"; eval(placeholder)
}
unset output
eval(term(1000, 560))

# ------------------------------------------------------------- regularization
set output dat("regularization.png")
rg = dat("reg.dat")
ptitle = "L2 regularization term in the loss vs replica count"
if (readable(rg)) {
    reset
    stats rg using 2 nooutput
    lo = STATS_min; hi = STATS_max; nr = STATS_records
    stats rg using 3 nooutput
    lo = (STATS_min < lo) ? STATS_min : lo; hi = (STATS_max > hi) ? STATS_max : hi
    refv = STATS_mean
    stats rg using 1 nooutput
    rmax = STATS_max
    stats rg using (abs($2 - $3)) nooutput
    dmax = STATS_max
    # pad: a band of +-2% around flat data, 20% of the spread otherwise
    pad = (hi > lo) ? 0.2 * (hi - lo) : ((abs(hi) > 0) ? 0.02 * abs(hi) : 1)
    if (pad < 0.02 * abs(hi)) { pad = 0.02 * abs(hi) }
    set title ptitle . sprintf("\nmax |term - reference| over %d replica counts = %.3g%s", \
        nr, dmax, (dmax == 0 ? " (bit-identical: the term does not depend on R)" : ""))
    set xlabel "replicas R (mirrored)"
    set ylabel "L2 term = loss with L2 - loss without (nats)"
    set xrange [0.5 : rmax + 0.5]
    set yrange [lo - pad : hi + ((hi > lo) ? 2 : 1) * pad]    # room for the key over a spread
    ydec = -floor(log10(pad)); ydec = (ydec < 0) ? 0 : ydec
    set format y sprintf("%%.%df", ydec)
    set grid
    set key top right box opaque spacing 1.3
    plot refv with lines lw 8 lc rgb "#c7e9c0" title sprintf("one_device reference (%.9g)", refv), \
         rg using 1:2:xtic(1) with linespoints pt 7 ps 1.5 lw 2 lc rgb "#08519c" title "mirrored: L2 term in the loss"
} else {
    nodata = "reg.dat"; eval(placeholder)
}

# --------------------------------------------------------------------- faults
# The last mutant run's file when the caller names it (bin/conformance passes
# faults='<file>' faultsrun='<revision>, <date>'), else outdir's faults.dat.
fl = exists("faults") ? faults : dat("faults.dat")
fromrun = exists("faultsrun") ? "fault matrix from the mutant run of " . faultsrun : "planted faults"
ptitle = "Planted faults"
suites = "loss_curves batch_splitting regularization reductions checkpoints durability compact mpi"
ns = words(suites)
failed(list, s) = strstrt("," . list . ",", "," . s . ",") > 0
suite_index(s) = sum [j = 1:ns] ((word(suites, j) eq s) ? j : 0)
if (readable(fl)) {
    reset
    # the faults that were not caught, as one string
    misses = ""
    stats fl using ((column(3) == 0) ? (misses = misses . " " . strcol(1), 0) : 0) nooutput
    nf = STATS_records
    # eight suite columns; a row per fault
    eval(term(1300, 200 + 30 * nf))
    set output dat("faults.png")
    if (strlen(misses) == 0) {
        set title fromrun . sprintf("\nevery fault caught (%d of %d)", nf, nf) font ",14"
    } else {
        set title fromrun . "\nNOT caught:" . misses font ",14" textcolor rgb "#cc0000"
    }
    set xrange [0.5 : ns + 0.5]
    set yrange [nf - 0.5 : -0.5]
    set x2range [0.5 : ns + 0.5]
    unset xtics
    set x2tics out nomirror scale 0 font ",11"
    do for [j = 1:ns] { set x2tics add (word(suites, j) j) }
    set ytics out nomirror scale 0 font ",11"
    set x2label "suite (a cell is filled when the suite failed under the fault)"
    set ylabel "planted fault"
    unset grid
    set border 0
    set style fill solid 1.0 border rgb "#ffffff"
    set key outside below center horizontal box samplen 2 spacing 1.3 width 1
    c_exp = 0x74c476; c_other = 0xfdae6b; c_none = 0xf0f0f0
    cell(list, exp, s) = failed(list, s) ? ((s eq exp) ? c_exp : c_other) : c_none
    text(list, exp, s) = failed(list, s) ? ((s eq exp) ? "caught" : "failed") : ((s eq exp) ? "MISSED" : "")
    tcol(list, exp, s) = (!failed(list, s) && s eq exp) ? 0xcc0000 : 0x111111
    plot for [j = 1:ns] fl using (j):0:(0.48):(0.46):(cell(strcol(4), strcol(2), word(suites, j))):ytic(1) \
             with boxxyerror fc rgb variable notitle, \
         fl using (suite_index(strcol(2))):0:(0.47):(0.45) with boxxyerror fs empty lc rgb "#000000" lw 3 notitle, \
         for [j = 1:ns] fl using (j):0:(text(strcol(4), strcol(2), word(suites, j))):(tcol(strcol(4), strcol(2), word(suites, j))) \
             with labels font ",11" tc rgb variable notitle, \
         NaN with boxes fs solid fc rgb "#74c476" title "failed: the suite the fault targets (outlined)", \
         NaN with boxes fs solid fc rgb "#fdae6b" title "failed: another suite", \
         NaN with boxes fs solid fc rgb "#f0f0f0" title "passed"
} else {
    set output dat("faults.png")
    nodata = "faults.dat"; eval(placeholder)
}

unset output
