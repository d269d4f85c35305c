#!/bin/sh
# The planted faults' registry (tests/faults.tsv) against what it describes;
# static and cheap (make test and make check-faults run it). It fails when:
#   - a row is malformed: not nine TAB-separated fields, a name twice, an
#     unknown kind, a file or seam file that does not exist;
#   - a row's macro is in none of its seam files, or a file it rebuilds
#     neither holds the macro nor includes a seam file, or includes it but
#     uses none of the DR_SEAM_* names the header defines under the macro
#     (the mutant build would not change that file); a sed patch no
#     longer changes its file;
#   - a DR_MUTANT_* name in the sources (core ref devices strategies
#     harness conformance cli tests include, .c .h .cl) is in no row, or a
#     file tests it (#if defined) that no row naming it lists (the harness
#     would build the mutant without it);
#   - a generated block of the docs differs from the registry:
#     docs/CONFORMANCE.md's fault table (faults:table) and the counts in
#     README.md, docs/TESTING.md, docs/CONFORMANCE.md and
#     docs/ARCHITECTURE.md (faults:counts), each between the lines
#     <!-- BEGIN faults:NAME --> and <!-- END faults:NAME -->.
#
#   sh scripts/check_faults.sh              check (run from the checkout)
#   sh scripts/check_faults.sh --write      rewrite the docs' blocks from the registry
#   sh scripts/check_faults.sh --self-test  the check on copies with planted
#                                           disagreements: each must fail it
#   CC=cc CFLAGS='...' sh scripts/check_faults.sh --compile
#       compile (no link) every sed patch's patched file with the build's
#       flags and its layer's define (make test runs it): a patch that no
#       longer compiles fails here in seconds, instead of building a mutant
#       that every harness would count as caught by its build error
set -u
table=tests/faults.tsv
DOCS="README.md docs/TESTING.md docs/CONFORMANCE.md docs/ARCHITECTURE.md"
SRC_DIRS="core ref devices strategies harness conformance cli tests include"
KINDS="unit exact golden cli conformance mpi_native script manual"
tab=$(printf '\t')
bad=0
fail() { echo "check-faults: $*" >&2; bad=1; }

rows() { awk -F'\t' '!/^#/ && NF' "$table"; }

seam_names() {   # seam_names MACRO HEADER...: the DR_SEAM_* a header defines inside #if defined(MACRO)
    m=$1; shift
    for h in "$@"; do
        case $h in *.h) [ -f "$h" ] && awk -v m="$m" '
            /^#if/ { depth++; if (index($0, "defined(" m ")")) { inside = depth } ; next }
            /^#endif/ { if (depth == inside) inside = 0; depth--; next }
            inside && /^#define DR_SEAM_/ { sub(/^#define /, ""); sub(/[( ].*/, ""); print }' "$h" ;; esac
    done | sort -u
}

check_rows() {
    rows | awk -F'\t' -v kinds=" $KINDS " '
        NF != 9 { print "row " NR ": " NF " fields, not 9: " $1; next }
        seen[$1]++ { print "fault " $1 ": named twice" }
        index(kinds, " " $2 " ") == 0 { print "fault " $1 ": unknown kind " $2 }
        { for (i = 1; i <= 9; i++) if ($i == "") print "fault " $1 ": field " i " empty (\"-\" for none)" }' |
    while read -r line; do echo "check-faults: $line" >&2; echo x; done | grep -q x && bad=1
    while IFS=$tab read -r name kind macro files seams catcher needs breaks patch; do
        for f in $(echo "$files,$seams" | tr ',' ' '); do
            [ "$f" = - ] || [ -f "$f" ] || fail "fault $name: no file $f"
        done
        if [ "$macro" = - ]; then
            [ "$patch" != - ] || { fail "fault $name: neither a macro nor a patch"; continue; }
            for f in $(echo "$files" | tr ',' ' '); do
                [ -f "$f" ] || continue
                sed "$patch" "$f" | cmp -s - "$f" && fail "fault $name: its patch no longer changes $f"
            done
            continue
        fi
        case $macro in
        DR_MUTANT=*)   # tests/mutants.h: DR_MUTANT == value
            grep -qw "DR_MUTANT == ${macro#DR_MUTANT=}" $(echo "$seams" | tr ',' ' ') 2>/dev/null ||
                fail "fault $name: no seam '${macro#DR_MUTANT=}' in $seams"
            continue ;;
        esac
        for m in $(echo "$macro" | tr ',' ' '); do
            # shellcheck disable=SC2046
            grep -qw "$m" $(echo "$seams" | tr ',' ' ') 2>/dev/null || fail "fault $name: $m is in none of $seams"
        done
        first=${macro%%,*}
        for f in $(echo "$files" | tr ',' ' '); do
            [ -f "$f" ] || continue
            grep -qw "$first" "$f" && continue
            ok=0
            for s in $(echo "$seams" | tr ',' ' '); do
                grep -q "#include \"${s#include/}\"" "$f" && ok=1   # include/distref/x.h: "distref/x.h"
            done
            [ $ok = 1 ] || { fail "fault $name: $f neither holds $first nor includes one of $seams"; continue; }
            # the seam names the header defines under the macro: the file must use one
            names=$(seam_names "$first" $(echo "$seams" | tr ',' ' '))
            [ -z "$names" ] && continue
            used=0
            for s in $names; do   # in the file, or in an inline function of the header it includes
                grep -qw "$s" "$f" && used=1
                for h in $(echo "$seams" | tr ',' ' '); do
                    grep -v '^#define' "$h" 2>/dev/null | grep -qw "$s" && used=1
                done
            done
            [ $used = 1 ] || fail "fault $name: $f uses none of $first's seams ($(echo $names)): the mutant build would not change it"
        done
    done <<EOF
$(rows)
EOF
}

check_sources() {   # every DR_MUTANT_ name in the sources is a registry macro, tested
                    # (#if defined) only in a file of a row that names it
    known=$(rows | cut -f3 | tr ',' '\n' | grep '^DR_MUTANT_' | sort -u)
    # shellcheck disable=SC2086
    found=$(find $SRC_DIRS \( -name '*.c' -o -name '*.h' -o -name '*.cl' \) -type f 2>/dev/null |
        xargs grep -ohE 'DR_MUTANT_[A-Z0-9_]+' | grep -v '_$' | sort -u)
    printf '%s\n' "$known" > "$tmp/known"
    for m in $(printf '%s\n' "$found" | comm -23 - "$tmp/known"); do
        fail "$m is in the sources ($(grep -rlw "$m" $SRC_DIRS | head -3 | tr '\n' ' ')) but in no row of $table"
    done
    rows | awk -F'\t' '{ n = split($3, m, ","); k = split($4 "," $5, f, ",")
                         for (i = 1; i <= n; i++) for (j = 1; j <= k; j++) print m[i], f[j] }' | sort -u > "$tmp/allowed"
    # shellcheck disable=SC2086
    find $SRC_DIRS \( -name '*.c' -o -name '*.h' -o -name '*.cl' \) -type f 2>/dev/null | sort |
    while read -r f; do
        grep -oE 'defined\(DR_MUTANT_[A-Z0-9_]+\)' "$f" | sed 's/defined(\(.*\))/\1/' | sort -u |
            while read -r m; do grep -qx "$m $f" "$tmp/allowed" || echo "$m $f"; done
    done > "$tmp/stray"
    while read -r m f; do
        fail "$f tests $m, but no row of $table that names $m lists $f (the harness would not rebuild it)"
    done < "$tmp/stray"
}

gen_counts() {
    rows | awk -F'\t' '
        { n[$2]++; all++ }
        END {
            run = all - n["manual"]
            printf "Planted faults (tests/faults.tsv, the one list): %d in all; `make test` plants %d of them:", all, run
            printf " %d conformance (`make conformance-mutants`: each must fail its suite),", n["conformance"]
            printf " %d exact (`scripts/exact_mutants.sh`: the exact kernels and their neighbours, each must fail a unit test),", n["exact"]
            printf " %d cli (`scripts/cli_mutants.sh`), %d golden (`scripts/golden_mutants.sh`),", n["cli"], n["golden"]
            printf " %d unit (`tests/mutants.h`: wrong summations test_exact must catch),", n["unit"]
            printf " %d mpi_native (`tests/mpi_native.sh`) and %d in the kill and rerun scripts (kind script);", n["mpi_native"], n["script"]
            printf " %d more are run by hand (kind manual, `tests/mpi_exit_status.sh`).\n", n["manual"]
        }' | fold -s -w 76 | sed 's/ *$//'
}

gen_table() {
    echo "| fault | where | what it breaks | must fail |"
    echo "|---|---|---|---|"
    rows | awk -F'\t' '$2 == "conformance" {
        if ($9 != "-") where = "a patched copy of `" $4 "`"
        else {
            where = ""; n = split($4 "," $5, f, ","); delete have
            for (i = 1; i <= n; i++) {
                if (f[i] == "-" || f[i] ~ /seams\.h$/ || (f[i] in have)) continue
                have[f[i]] = 1; where = where (where == "" ? "" : ", ") "`" f[i] "`"
            }
        }
        printf "| `%s` | %s | %s | %s |\n", $1, where, $8, $6 }'
}

block() {   # block FILE NAME: the lines between its markers
    awk -v b="<!-- BEGIN faults:$2 -->" -v e="<!-- END faults:$2 -->" '
        $0 == e { p = 0 } p { print } $0 == b { p = 1 }' "$1"
}

write_block() {   # write_block FILE NAME GENERATED-FILE
    awk -v b="<!-- BEGIN faults:$2 -->" -v e="<!-- END faults:$2 -->" -v g="$3" '
        $0 == e { while ((getline l < g) > 0) print l; close(g); p = 0 }
        !p { print } $0 == b { p = 1 }' "$1" > "$1.tmp" && mv "$1.tmp" "$1"
}

check_docs() {   # write: 1 rewrites the blocks
    gen_counts > "$tmp/counts"; gen_table > "$tmp/table"
    for doc in $DOCS; do
        grep -qx "<!-- BEGIN faults:counts -->" "$doc" || { fail "$doc: no faults:counts block"; continue; }
        if [ "$1" = 1 ]; then write_block "$doc" counts "$tmp/counts"
        else block "$doc" counts | cmp -s - "$tmp/counts" ||
            fail "$doc: the fault counts differ from tests/faults.tsv's (sh scripts/check_faults.sh --write):
$(block "$doc" counts | diff - "$tmp/counts" | sed -n '2,$p' | head -8)"
        fi
    done
    doc=docs/CONFORMANCE.md
    grep -qx "<!-- BEGIN faults:table -->" "$doc" || { fail "$doc: no faults:table block"; return; }
    if [ "$1" = 1 ]; then write_block "$doc" table "$tmp/table"
    else block "$doc" table | cmp -s - "$tmp/table" ||
        fail "$doc: the fault table differs from tests/faults.tsv's conformance rows:
$(block "$doc" table | diff - "$tmp/table" | head -8)"
    fi
}

layer_of() {   # layer_of FILE: the -DDR_LAYER_ define the Makefile gives its directory
    case $1 in core/*) echo -DDR_LAYER_CORE ;; ref/*) echo -DDR_LAYER_REF ;;
    strategies/*|devices/*) echo -DDR_LAYER_ENGINE ;; harness/*) echo -DDR_LAYER_HARNESS ;; esac
}

compile_patches() {   # every sed patch applied, the result compiled from its directory's view
    n=0
    # the flags must build an unpatched file, or every patch would "fail" for them
    # shellcheck disable=SC2086
    ${CC:-cc} ${CFLAGS:-} -DDR_LAYER_CORE -c core/plan.c -o "$tmp/plain.o" 2> "$tmp/cc.err" || {
        fail "--compile: core/plan.c does not compile unpatched with CC=${CC:-cc} CFLAGS=${CFLAGS:-} (give the build's: make check-faults): $(grep -m1 error "$tmp/cc.err" | cut -c1-120)"
        return; }
    while IFS=$tab read -r name kind macro files seams catcher needs breaks patch; do
        [ "$patch" = - ] && continue
        for f in $(echo "$files" | tr ',' ' '); do
            case $f in *.c) ;; *) continue ;; esac
            n=$((n + 1))
            sed "$patch" "$f" > "$tmp/patched.c"
            # shellcheck disable=SC2086
            ${CC:-cc} ${CFLAGS:-} $(layer_of "$f") -iquote "$(dirname "$f")" -c "$tmp/patched.c" \
                -o "$tmp/patched.o" 2> "$tmp/cc.err" ||
                fail "fault $name: $f with its patch does not compile: $(grep -m1 'error' "$tmp/cc.err" | cut -c1-160)"
        done
    done <<EOF
$(rows)
EOF
    [ $bad -eq 0 ] && echo "check-faults: the $n files tests/faults.tsv's sed patches change compile with them"
}

self_test() {   # each planted disagreement, on a copy, must fail the check
    root=$(pwd); n=0; missed=""
    plant() {   # plant NAME COMMAND...: a fresh copy, the edit, the check must fail
        n=$((n + 1)); c="$tmp/self/$1"; mkdir -p "$c"; shift
        (cd "$root" && cp -r $SRC_DIRS docs README.md scripts "$c/")
        (cd "$c" && eval "$@") || { missed="$missed $1(edit failed)"; return; }
        if (cd "$c" && sh scripts/check_faults.sh $mode > "$c.out" 2>&1); then missed="$missed $(basename "$c")"
        else echo "check-faults self-test: $(basename "$c") caught: $(grep -m1 'check-faults:' "$c.out" | cut -c1-110)"; fi
    }
    mode=--compile
    plant patch_broken "sed 's|^\\(fill_in_order	.*\\)p->shard_data = false;/\$|\\1p->shard_data = false;;}/|' $table > t && mv t $table"
    mode=
    plant unknown_macro "printf 'ghost\tconformance\tDR_MUTANT_GHOST\tstrategies/step.c\tstrategies/step.c\tmpi\t-\tnothing\t-\n' >> $table"
    plant row_removed "grep -v '^skip_as_pass	' $table > t && mv t $table"
    plant seam_moved "printf '#if defined(DR_MUTANT_WRONG_SPLIT)\n#endif\n' >> strategies/engine.c"
    plant seam_unused "sed 's/DR_SEAM_CHUNK_END(/DR_SEAM_CHUNK_EDN(/' devices/comm/comm_elem.c > t && mv t devices/comm/comm_elem.c"
    plant seam_removed "sed 's/DR_MUTANT_TFEVENTS_NO_START/DR_MUTANT_TFEVENTS_NO_STAR/' core/seams.h > t && mv t core/seams.h"
    plant patch_stale "sed 's/F - 150 - WIN_S)/F - 150 - (WIN_S)/' core/reduce.c > t && mv t core/reduce.c"
    plant readme_count "sed '/BEGIN faults:counts/,/END faults:counts/s/ \\([0-9][0-9]*\\) exact/ 9\\1 exact/' README.md > t && mv t README.md"
    plant table_suite "sed 's/^| \`mean_not_sum\` \(.*\) reductions |\$/| \`mean_not_sum\` \1 loss_curves |/' docs/CONFORMANCE.md > t && mv t docs/CONFORMANCE.md"
    plant suite_in_registry "sed 's/^\(wrong_split	.*\)	batch_splitting	/\1	reductions	/' $table > t && mv t $table"
    rm -rf "$tmp/self"
    if [ -n "$missed" ]; then echo "check-faults self-test: planted disagreements NOT caught:$missed" >&2; return 1; fi
    echo "check-faults self-test: all $n planted disagreements caught"
}

tmp=$(mktemp -d /tmp/check_faults.XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
case ${1:-} in
--self-test) self_test; exit ;;
--write) check_docs 1; exit $bad ;;
--compile) compile_patches; exit $bad ;;
"") ;;
*) echo "usage: check_faults.sh [--write | --self-test | --compile]" >&2; exit 2 ;;
esac
[ -r "$table" ] || { echo "check-faults: no $table" >&2; exit 1; }
check_rows
check_sources
check_docs 0
if [ $bad -ne 0 ]; then echo "check-faults: FAILED (tests/faults.tsv and what it describes disagree)" >&2; exit 1; fi
echo "check-faults: $(rows | wc -l) faults in tests/faults.tsv agree with the sources' seams, the patches, docs/CONFORMANCE.md's table and the docs' counts"
