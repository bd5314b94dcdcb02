#!/usr/bin/env python3
"""docs/embedding.md shows the tested examples verbatim.

Each fenced code block right after a line `<!-- tests/embed/FILE -->` must
equal that file, every example file under tests/embed (host.c, nginx/*.conf,
love/main.lua) must be shown, and README.md and docs/usage.md must link to
the page.

Usage: tests/embed/doccheck.py SOURCE_DIR
"""
import os
import re
import sys

EXAMPLES = ["tests/embed/host.c", "tests/embed/nginx/init_worker.conf",
            "tests/embed/nginx/location.conf", "tests/embed/love/main.lua"]


def main():
    src = sys.argv[1]
    doc = open(os.path.join(src, "docs/embedding.md"), encoding="utf-8").read()
    bad = []
    shown = set()
    for m in re.finditer(r"<!-- (tests/\S+) -->\n```\w*\n(.*?)```\n", doc, re.S):
        path, block = m.group(1), m.group(2)
        shown.add(path)
        try:
            want = open(os.path.join(src, path), encoding="utf-8").read()
        except OSError as e:
            bad.append("%s: %s" % (path, e))
            continue
        if block != want:
            bad.append("docs/embedding.md: the block for %s differs from the file" % path)
        else:
            print("ok: docs/embedding.md shows %s verbatim (%d lines)" % (path, want.count("\n")))
    for path in EXAMPLES:
        if path not in shown:
            bad.append("docs/embedding.md does not show %s" % path)
    for page in ("README.md", "docs/usage.md"):
        text = open(os.path.join(src, page), encoding="utf-8").read()
        if "embedding.md" not in text:
            bad.append("%s does not link to docs/embedding.md" % page)
        else:
            print("ok: %s links to docs/embedding.md" % page)
    for b in bad:
        print("FAILED: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
