#!/usr/bin/env python3
"""Every reference to a section of docs/design.md or docs/decisions.md
names a heading that exists.

A reference is the file's name followed by one or more quoted section
names: docs/design.md, "Exact stacks" (also design.md's "X", design.md
("X"), "X" and "Y"). It may be wrapped over comment lines (**, --, #, //)
or split across Lua string concatenations. Scanned: README.md, docs/,
src/, include/, jit/, ljprof/, tests/ and bench/. A heading is a
Markdown line starting with #; the name must match its text exactly.

Usage: tests/doclinks.py [SOURCE_ROOT]   (exits 1 naming each bad one)
"""
import os
import re
import sys

DOCS = ("design.md", "decisions.md")
SCAN_DIRS = ("docs", "src", "include", "jit", "ljprof", "tests", "bench")
SCAN_EXT = (".md", ".c", ".h", ".lua", ".py", ".build", ".txt")
ANCHOR = re.compile(r"\b(design|decisions)\.md")
REF = re.compile(r"""^(?:'s)?(?:\s*,\s*|\s+)\(?\s*"([^"]+)"((?:\s*(?:,\s*and|,|and|or)\s*"[^"]+")*)""")


def headings(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        fence = False
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = re.match(r"#+\s+(.*?)\s*#*\s*$", line)
            if m and not fence:
                out.add(m.group(1))
    return out


def normalize(w):
    """The text after an anchor as one line: Lua concatenations joined,
    escaped quotes plain, comment leaders and line breaks one space."""
    w = re.sub(r'"\s*\.\.\s*\n\s*"', "", w)
    w = w.replace('\\"', '"')
    w = re.sub(r"[ \t]*\n[ \t]*(?:\*\*|\*|--|#|//)?[ \t]*", " ", w)
    return w


def refs(text):
    """(line, doc, section) for each reference in text."""
    for m in ANCHOR.finditer(text):
        r = REF.match(normalize(text[m.end():m.end() + 400]))
        if not r:
            continue
        line = text.count("\n", 0, m.start()) + 1
        names = [r.group(1)] + re.findall(r'"([^"]+)"', r.group(2) or "")
        for n in names:
            yield line, m.group(1) + ".md", re.sub(r"\s+", " ", n).strip()


def files(root):
    yield os.path.join(root, "README.md")
    for d in SCAN_DIRS:
        for dirpath, dirnames, names in os.walk(os.path.join(root, d)):
            dirnames[:] = [n for n in dirnames if not n.startswith(".")]
            for n in sorted(names):
                if n.endswith(SCAN_EXT):
                    yield os.path.join(dirpath, n)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(here, ".."))
    heads = {d: headings(os.path.join(root, "docs", d)) for d in DOCS}
    bad, n = [], 0
    for path in files(root):
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        for line, doc, name in refs(text):
            n += 1
            if name not in heads[doc]:
                bad.append('%s:%d: %s, "%s": no such heading in docs/%s' %
                           (os.path.relpath(path, root), line, doc, name, doc))
    for b in bad:
        print(b)
    print("%d references to docs/design.md and docs/decisions.md, %d bad" %
          (n, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
