#!/bin/sh
# The planted faults' registry, tests/faults.tsv (FAULT_TABLE overrides it),
# read for the mutant harnesses, the Makefile and scripts/check_faults.sh.
#
#   sh scripts/faults.sh rows KIND [NAME...]   the rows of KIND (all with "all"),
#                                              only NAMEs when given; an unknown
#                                              NAME is an error
#   sh scripts/faults.sh names KIND            their names, one a line
#   sh scripts/faults.sh get NAME FIELD        one field (name kind macro files
#                                              seams catcher needs breaks patch)
#   sh scripts/faults.sh layer FILE            the DR_LAYER_ a file is built under
set -u
table=${FAULT_TABLE:-tests/faults.tsv}
[ -r "$table" ] || { echo "faults: no registry $table" >&2; exit 2; }
rows() {   # KIND [NAME...]
    kind=$1; shift
    awk -F'\t' -v kind="$kind" -v want="$*" '
        BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) asked[w[i]] = 1 }
        /^#/ || NF == 0 { next }
        (kind == "all" || $2 == kind) && (n == 0 || ($1 in asked)) { print; seen[$1] = 1 }
        END { for (k in asked) if (!(k in seen)) { print "faults: no " (kind == "all" ? "" : kind " ") "fault named " k > "/dev/stderr"; bad = 1 }
              exit bad }' "$table"
}
case ${1:-} in
rows)  shift; rows "$@" ;;
names) shift; r=$(rows "$@") || exit 1; [ -z "$r" ] || printf '%s\n' "$r" | cut -f1 ;;
get)   col=$(printf 'name kind macro files seams catcher needs breaks patch\n' | tr ' ' '\n' | grep -nx "${3:?}" | cut -d: -f1)
       [ -n "$col" ] || { echo "faults: no field $3" >&2; exit 2; }
       r=$(rows all "${2:?}") || exit 1; printf '%s\n' "$r" | cut -f"$col" ;;
layer) case ${2:?} in
       core/*) echo CORE ;; ref/*) echo REF ;; devices/*|strategies/*) echo ENGINE ;;
       harness/*|conformance/*|cli/*) echo HARNESS ;; *) echo "faults: no layer for $2" >&2; exit 2 ;;
       esac ;;
*) echo "usage: faults.sh rows|names KIND [NAME...] | get NAME FIELD | layer FILE" >&2; exit 2 ;;
esac
