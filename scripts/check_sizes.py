#!/usr/bin/env python3
"""Library code stays readable: no file over 600 lines and no function over
80 lines in core/, ref/, devices/, strategies/, harness/, cli/ and
include/distref/, except the ones named below with the reason. A function
is counted from its signature's first line to its closing brace at column 0
(the repository's style). Prints each offender; exit 1 if any.

    python3 scripts/check_sizes.py [ROOT]
"""
import glob
import re
import sys

MAX_FILE, MAX_FUNC = 600, 80
# name -> why it may be longer
EXCEPTIONS = {
    'dr_cli_flag_table': 'one table literal: a row per flag, read top to bottom like --help',
}
SIG = re.compile(r'^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b(\w+)\s*\([^;]*$')


def functions(lines):
    i = 0
    while i < len(lines):
        m = SIG.match(lines[i])
        if m and '=' not in lines[i].split('(')[0]:
            j = i
            while j < len(lines) and not lines[j].startswith('{') and not lines[j].rstrip().endswith('{'):
                if lines[j].rstrip().endswith(';'):
                    break
                j += 1
            if j < len(lines) and (lines[j].startswith('{') or lines[j].rstrip().endswith('{')):
                k = j + 1
                while k < len(lines) and not lines[k].startswith('}'):
                    k += 1
                yield m.group(1), i + 1, k - i + 1
                i = k
        i += 1


def main(root):
    files = []
    for pat in ('core/*.[ch]', 'ref/*.[ch]', 'devices/*/*.[ch]', 'strategies/*.[ch]', 'harness/*.[ch]',
                'cli/*.[ch]', 'include/distref/*.h'):
        files += sorted(glob.glob(root + '/' + pat))
    bad = []
    for f in files:
        lines = open(f, encoding='utf-8').read().split('\n')
        name = f[len(root) + 1:]
        if len(lines) - 1 > MAX_FILE:
            bad.append('%s: %d lines (at most %d)' % (name, len(lines) - 1, MAX_FILE))
        for fn, line, n in functions(lines):
            if n > MAX_FUNC and fn not in EXCEPTIONS:
                bad.append('%s:%d: %s is %d lines (at most %d)' % (name, line, fn, n, MAX_FUNC))
    for b in bad:
        print('sizes: ' + b)
    print('sizes: %d library files, %s' % (len(files), '%d over the limits' % len(bad) if bad else
          'none over %d lines, no function over %d (exceptions: %s)' % (MAX_FILE, MAX_FUNC, ', '.join(EXCEPTIONS))))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '.'))
