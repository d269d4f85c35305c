#!/usr/bin/env python3
"""The numbers the docs state about the code, computed from the code.

A doc marks each such number with the command that computes it:

    <!-- numbers: wc -l ref/train_step.c ref/trainer.c -->
    | file | lines |
    |---|---|
    | `ref/train_step.c` | 155 |
    | `ref/trainer.c` | 233 |
    | total | 388 |
    <!-- /numbers -->

or inline: `... are <!-- numbers: lines strategies/step.c devices/cpu/*.c -->4,051<!-- /numbers --> lines`.

Commands:
    wc -l FILE...           a table of each file's lines and their total (`wc -l`)
    lines FILE...           the total alone (globs allowed), with a thousands comma
    members STRUCT HEADER   how many function pointers the struct declares
    files DIR               how many .c and .h files the folder holds (not below it)

    python3 scripts/doc_numbers.py [--write] [DOC...]   (default: README.md docs/*.md)

Without --write it exits 1 and prints each block that disagrees with the
code (the doc's text, then the code's); --write rewrites the blocks.
docs/history/ is not checked: history states what was true then.
"""
import glob
import os
import re
import sys

BLOCK = re.compile(r'<!-- numbers: (.*?) -->(.*?)<!-- /numbers -->', re.S)


def expand(args):
    out = []
    for a in args:
        hits = sorted(glob.glob(a))
        if not hits:
            raise ValueError('no file matches %s' % a)
        out.extend(hits)
    return out


def count_lines(path):
    with open(path, 'rb') as f:
        return f.read().count(b'\n')


def members(struct, header):
    text = open(header, encoding='utf-8').read()
    m = re.search(r'typedef struct %s \{(.*?)\} %s;' % (re.escape(struct), re.escape(struct)), text, re.S)
    if not m:
        raise ValueError('%s: no typedef struct %s' % (header, struct))
    body = re.sub(r'/\*.*?\*/', '', m.group(1), flags=re.S)
    return len(re.findall(r'\(\s*\*\s*\w+\s*\)\s*\(', body))


def compute(cmd, inline):
    words = cmd.split()
    if words[:2] == ['wc', '-l']:
        files = expand(words[2:])
        rows = ['| file | lines |', '|---|---|']
        rows += ['| `%s` | %s |' % (f, format(count_lines(f), ',')) for f in files]
        rows.append('| total | %s |' % format(sum(count_lines(f) for f in files), ','))
        return '\n' + '\n'.join(rows) + '\n'
    if words[0] == 'lines':
        return format(sum(count_lines(f) for f in expand(words[1:])), ',')
    if words[0] == 'members' and len(words) == 3:
        return str(members(words[1], words[2]))
    if words[0] == 'files' and len(words) == 2:
        d = words[1]
        if not os.path.isdir(d):
            raise ValueError('no folder %s' % d)
        return str(len([f for f in os.listdir(d) if f.endswith(('.c', '.h'))]))
    raise ValueError('unknown numbers command: %s' % cmd)


def check(path, write):
    text = open(path, encoding='utf-8').read()
    bad, errors = [], []

    def fix(m):
        cmd, old = m.group(1), m.group(2)
        try:
            new = compute(cmd, '\n' not in old)
        except (ValueError, OSError) as e:
            errors.append('%s: <!-- numbers: %s -->: %s' % (path, cmd, e))
            return m.group(0)
        if new != old:
            line = text.count('\n', 0, m.start()) + 1
            bad.append('%s:%d: numbers: %s\n  the doc says: %s\n  the code says: %s'
                       % (path, line, cmd, old.strip().replace('\n', '\n                '),
                          new.strip().replace('\n', '\n                ')))
        return '<!-- numbers: %s -->%s<!-- /numbers -->' % (cmd, new)

    out = BLOCK.sub(fix, text)
    if write and out != text:
        tmp = path + '.tmp.%d' % os.getpid()
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(out)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return (errors + bad if not write else errors), len(BLOCK.findall(text))


def main(argv):
    write = '--write' in argv
    docs = [a for a in argv if a != '--write'] or ['README.md'] + sorted(glob.glob('docs/*.md'))
    problems, blocks = [], 0
    for d in docs:
        b, n = check(d, write)
        problems += b
        blocks += n
    if problems:
        print('\n'.join(problems))
        print('doc numbers: %d of %d blocks disagree with the code (python3 scripts/doc_numbers.py --write '
              'rewrites them)' % (len(problems), blocks))
        return 1
    print('doc numbers: %d blocks in %d docs %s' % (blocks, len(docs), 'rewritten' if write else 'agree with the code'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
