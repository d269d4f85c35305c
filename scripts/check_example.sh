#!/bin/sh
# distref — an example's README against the output of its run.
#
#   sh scripts/check_example.sh OUTPUT README
#
# Every fenced block of README opened with ```expected holds lines the run
# must have printed, in that order (other lines may come between them). A
# line is matched whole; "..." inside it stands for any text (a time, a
# path), and a line that is only "..." is skipped. Exit 0 when every line
# is found, 1 with the first line that is not and the output line that
# shares the longest beginning with it.
set -eu
out=$1
readme=$2
[ -r "$out" ] || { echo "check_example: cannot read output $out" >&2; exit 2; }
[ -r "$readme" ] || { echo "check_example: cannot read $readme" >&2; exit 2; }
awk -v readme="$readme" '
function matches(line, pat,    n, parts, i, pos, p) {
    if (index(pat, "...") == 0) return line == pat
    n = split(pat, parts, /\.\.\./)
    if (substr(line, 1, length(parts[1])) != parts[1]) return 0
    pos = length(parts[1]) + 1
    for (i = 2; i < n; i++) {
        p = index(substr(line, pos), parts[i])
        if (p == 0) return 0
        pos += p - 1 + length(parts[i])
    }
    if (n < 2) return 1
    return length(line) - pos + 1 >= length(parts[n]) && \
           substr(line, length(line) - length(parts[n]) + 1) == parts[n]
}
function common(a, b,    n) { n = 0; while (n < length(a) && n < length(b) && substr(a, n + 1, 1) == substr(b, n + 1, 1)) n++; return n }
FNR == NR { o[++no] = $0; next }
/^```expected[ \t]*$/ { inblock = 1; blocks++; next }
inblock && /^```/ { inblock = 0; next }
inblock {
    if ($0 == "..." || $0 == "") next
    nexp++
    while (at < no) {
        at++
        if (matches(o[at], $0)) { found++; next }
    }
    printf "%s:%d: README states a line the run did not print (in this order):\n  %s\n", readme, FNR, $0
    best = 0; bestlen = 0
    for (k = 1; k <= no; k++) { c = common(o[k], $0); if (c > bestlen) { bestlen = c; best = k } }
    if (best) printf "the closest line the run printed (line %d):\n  %s\n", best, o[best]
    bad = 1
    exit 1
}
END {
    if (bad) exit 1
    if (blocks == 0 || nexp == 0) { printf "%s: no ```expected block with lines to check\n", readme; exit 1 }
    printf "%s: %d expected lines found\n", readme, found
}
' "$out" "$readme"
