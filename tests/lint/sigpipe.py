#!/usr/bin/env python3
"""Finds pipelines whose reader may exit before the writer is done.

Under `set -o pipefail` the writer of `cmd | head -1` dies of SIGPIPE when
head has gone, the pipeline's status is 141, and `set -e` (or a caller that
reads the status) ends the script: a race that depends on how much cmd
prints and how fast (issue 32: `bash scripts/demo.sh` failed 12 runs in 20).
A sourced library runs under its caller's options, so the rule holds for
every shell file: after a `|`, no reader that stops reading early.

    head, any form                    ->  sed -n 1p  /  sed -n 1,2p
    grep -q/-m/-l/-L (--quiet ...)    ->  grep PATTERN >/dev/null  /  ... | sed -n 1p
    sed with a q or Q command         ->  sed -n Np
    awk with exit outside END         ->  a pattern that reads on
    cmd | read x (not a while loop)   ->  x=$(cmd)

Usage: sigpipe.py FILE...   (exit 1 naming FILE:LINE of each; 2 on misuse)
       sigpipe.py --self-test

No shell parser fits here: shellcheck exposes no syntax tree and bashlex
fails on [[ ]], here-strings and arithmetic, so this reads each logical
line (continuations joined) and looks at what follows every lone `|`.
"""
from __future__ import annotations

import os
import re
import sys

# A lone pipe: not ||, not |& (stderr too: the same rule, checked alike).
PIPE = re.compile(r"(?<![|])\|(?![|])&?")
# Words before the reader's own command: an environment assignment, and
# programs that run the rest of their words as a command.
WRAPPER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*$")
WRAPPERS = ("command", "env", "exec", "nice", "nohup", "stdbuf", "sudo", "timeout")
GREP_EARLY = re.compile(r"(^|\s)(-[A-Za-z]*[qmlL][A-Za-z0-9]*|--quiet|--silent|--max-count\S*|--files-with\S*)(\s|$)")
SED_QUIT = re.compile(r"(^|[;{'\"\s0-9/$])[qQ]([0-9]*)?\s*(['\";}]|$)")
AWK_EXIT = re.compile(r"\bexit\b")


def early_exit(reader: str) -> str | None:
    """Why this reader may stop reading early, or None."""
    words = reader.split()
    while words and (words[0] in "{(" or WRAPPER.match(words[0])):
        words = words[1:]  # a group, or LC_ALL=C grep ...
    if words and words[0] in WRAPPERS:
        words = words[1:]  # timeout 5 grep -q ..., env grep -q ...
        while words and (words[0].startswith("-") or re.fullmatch(r"[0-9.]+[smhd]?|[A-Za-z_][A-Za-z0-9_]*=\S*", words[0])):
            words = words[1:]  # the wrapper's own options and arguments
    if not words:
        return None
    cmd, rest = os.path.basename(words[0].strip("\\\"'")), " ".join(words[1:])
    if cmd in ("gawk", "mawk", "nawk"):
        cmd = "awk"
    if cmd == "head":
        return "head stops reading once it has its part"
    if cmd in ("grep", "egrep", "fgrep") and GREP_EARLY.search(" " + rest):
        return "grep -q/-m/-l stops reading at the first match"
    if cmd == "sed" and SED_QUIT.search(rest):
        return "sed's q command stops reading"
    if cmd == "awk" and AWK_EXIT.search(rest) and "END" not in rest:
        return "awk's exit stops reading"
    if cmd == "read":
        return "read takes one line and the rest is never read"
    return None


def logical_lines(text: str):
    """(first line number, joined text) of each logical line, comments off."""
    start, buf = None, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        if start is None:
            start = number
        buf += line
        stripped = line.rstrip()
        if stripped.endswith("\\"):
            buf = buf.rstrip()[:-1] + " "
            continue
        if stripped.endswith("|") and not stripped.endswith("||"):
            buf += " "
            continue
        yield start, buf
        start, buf = None, ""
    if buf:
        yield start, buf


def reader_at(line: str, start: int) -> str:
    """The command after a pipe: up to the next unquoted |, ;, & or )."""
    quote, i = None, start
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "|;&)":
            break
        i += 1
    return line[start:i].strip()


def findings(path: str, text: str):
    for number, line in logical_lines(text):
        for match in PIPE.finditer(line):
            reader = reader_at(line, match.end())
            why = early_exit(reader)
            if why:
                yield (f"{path}:{number}: `| {reader}`: {why}; under pipefail "
                       "the writer's SIGPIPE (status 141) fails the pipeline")


BAD = [
    "x=$(dpkg-query -L p | grep '/x/' | head -1)",
    "echo \"$1\" | head -c 600",
    "cmd | grep -q done",
    "cmd | LC_ALL=C grep -qx done",
    "cmd | grep -m1 x",
    "cmd | grep --max-count=1 x",
    "cmd | grep -l x",
    "cmd | sed 1q",
    "cmd | sed -n '/x/{p;q}'",
    "cmd | awk '/x/ { print; exit }'",
    "cmd | read -r first",
    "cmd |\n  head -2",
    "cmd | timeout 5 grep -q x",
    "cmd | env LC_ALL=C grep -q x",
    "cmd | /usr/bin/head -1",
    "cmd | { read -r x; }",
    "cmd | gawk '/x/ { exit }'",
]
GOOD = [
    "x=$(cmd | sed -n 1p)",
    "cmd | grep done >/dev/null",
    "cmd | grep -c x",
    "cmd | grep -v x | sort",
    "a || head -1 file",
    "grep -q x file",
    "grep -q x <<<\"$v\"",
    "cmd | while read -r l; do :; done",
    "cmd | awk '{ n++ } END { if (!n) exit 1 }'",
    "cmd | sed -n 's/q/Q/p'",
    "cmd |& tee log",
    "# cmd | head -1 (a comment)",
    "cmd | timeout 5 grep x >/dev/null",
    "cmd | { cat; }",
]


def self_test() -> int:
    missed = [b for b in BAD if not list(findings("bad", b))]
    wrong = [g for g in GOOD if list(findings("good", g))]
    for b in missed:
        print(f"sigpipe self-test: not flagged: {b!r}", file=sys.stderr)
    for g in wrong:
        print(f"sigpipe self-test: flagged but safe: {g!r}", file=sys.stderr)
    print(f"sigpipe self-test: {len(BAD) - len(missed)}/{len(BAD)} unsafe flagged, "
          f"{len(GOOD) - len(wrong)}/{len(GOOD)} safe passed")
    return 1 if missed or wrong else 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    if not argv:
        print("usage: sigpipe.py FILE... | --self-test", file=sys.stderr)
        return 2
    found = 0
    for path in argv:
        with open(path, encoding="utf-8") as f:
            for line in findings(path, f.read()):
                print(line)
                found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
