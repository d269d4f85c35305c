#!/bin/sh
# docs/TUTORIAL.md, run: every line of its ```sh blocks, in order, with
# /tmp/tour replaced by this run's scratch folder and bin/distref by the
# CLI of this build. Its ```expected blocks are checked against the output
# (examples/tutorial/EXPECTED_IN names the file that holds them).
set -eu
unset MAKEFLAGS MFLAGS MAKELEVEL
# shellcheck disable=SC2016
awk '/^```sh[ \t]*$/ { b = 1; next } b && /^```/ { b = 0; next } b { print }' docs/TUTORIAL.md |
    sed -e "s#/tmp/tour#$EXAMPLE_TMP/tour#g" -e 's#^bin/distref #"$DISTREF" #' > "$EXAMPLE_TMP/tour.sh"
[ -s "$EXAMPLE_TMP/tour.sh" ] || { echo "tutorial: no \`\`\`sh block in docs/TUTORIAL.md" >&2; exit 1; }
sh -eu "$EXAMPLE_TMP/tour.sh"
