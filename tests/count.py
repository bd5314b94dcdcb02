#!/usr/bin/env python3
"""Count meson test logs: tests/count.py EXTRA_FAILED LOG [LOG...]

Prints the failed tests, then the one line "N passed, N failed" (with
", N skipped" when some were) over every LOG (meson's testlog.json), plus
EXTRA_FAILED failures counted by the caller. A LOG that does not exist
counts as one failure (its build failed before any test ran). Exits 1
when anything failed. Used by tests/run (the Linux build's log, and the
Windows build's when ./run passes it in LJPROF_MORE_LOGS) and by
./run test-windows.
"""
import json
import os
import sys

ok = skip = bad = 0
bad += int(sys.argv[1])
for path in sys.argv[2:]:
    if not os.path.isfile(path):
        print("failed: no test log", path)
        bad += 1
        continue
    res = []
    for l in open(path, errors="replace"):
        if not l.strip():
            continue
        try:
            res.append(json.loads(l))
        except ValueError:  # a torn log (two meson runs wrote it at once)
            print("failed: unreadable line in", path)
            bad += 1
    ok += sum(1 for r in res if r["result"] in ("OK", "EXPECTEDFAIL"))
    skip += sum(1 for r in res if r["result"] == "SKIP")
    for r in res:
        if r["result"] not in ("OK", "EXPECTEDFAIL", "SKIP"):
            print("failed:", r["name"], r["result"])
            bad += 1
print(f"{ok} passed, {bad} failed" + (f", {skip} skipped" if skip else ""))
sys.exit(1 if bad else 0)
