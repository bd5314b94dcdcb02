#!/usr/bin/env python3
"""Ctrl-C under -jprof in the Windows build, under Wine (suite windows).

Wine makes a console for a program whose standard handles are a
terminal: here a pseudo-terminal (headless; without one there is no
console and GenerateConsoleCtrlEvent fails with error 12). The Lua program
(interpreted loop) sends its console group CTRL_C_EVENT itself
(GenerateConsoleCtrlEvent through the FFI) after 0.5 s of work;
luajit.exe's own interrupt handling (its SIGINT handler, which the C
runtime runs on the console control handler's thread, sets a hook) raises
"interrupted!" at the next instruction, and the program ends through the
error path, which writes the profile. Checked: the message, the same exit
status as without the profiler, the profile holding the loop, and that
the program did not run on past the event.

Usage: ctrlc.py WINE LUAJIT_EXE SRC_DIR BUILD_DIR (tests/windows/meson.build)
"""
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile
import time

PROG = r"""
jit.off()
local ffi = require("ffi")
ffi.cdef[[int GenerateConsoleCtrlEvent(unsigned long ev, unsigned long group);
unsigned long GetLastError(void);]]
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local t0 = os.clock()
while os.clock() - t0 < 0.5 do spin(100000) end
if ffi.C.GenerateConsoleCtrlEvent(0, 0) == 0 then
  io.stderr:write("GenerateConsoleCtrlEvent failed: ", tonumber(ffi.C.GetLastError()), "\n")
  os.exit(9)
end
t0 = os.clock()
while os.clock() - t0 < 5 do spin(100000) end
io.stderr:write("RAN ON\n")
"""

failed = 0


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failed += 1
    return cond


def on_pty(argv, env, cwd):
    """argv with its standard handles on a pseudo-terminal: its output
    (the console's escapes taken out) and exit status."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                         cwd=cwd, start_new_session=True)
    os.close(slave)
    out = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    try:
        code = p.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        p.kill()
        code = p.wait()
    os.close(master)
    text = out.decode("utf-8", "replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")
    return text, code


def main():
    wine, exe, src, build = sys.argv[1:5]
    d = tempfile.mkdtemp(prefix="ljp_winctrlc_")
    try:
        with open(os.path.join(d, "cc.lua"), "w") as f:
            f.write(PROG)
        env = dict(os.environ)
        env["LUA_PATH"] = "Z:" + src + "/?.lua;;"
        env["LUA_CPATH"] = "Z:" + build + "/?.dll"
        plain, plain_code = on_pty([wine, exe, "cc.lua"], env, d)
        out, code = on_pty([wine, exe, "-jprof=f,cc.txt", "cc.lua"], env, d)
        print("  without the profiler: status %d; with: status %d" % (plain_code, code))
        check("GenerateConsoleCtrlEvent failed" not in plain + out,
              "Wine delivered the event: " + out[-300:])
        check("interrupted!" in plain and "interrupted!" in out,
              "luajit's interrupted! both times: " + out[-300:])
        check("RAN ON" not in plain + out, "the program stopped at the event")
        check(code == plain_code and code != 0,
              "the same exit status: %d, without the profiler %d" % (code, plain_code))
        prof = ""
        if os.path.exists(os.path.join(d, "cc.txt")):
            with open(os.path.join(d, "cc.txt")) as f:
                prof = f.read()
        check(re.search(r"(?m)^\s?\d+%  spin\s*$", prof) is not None,
              "the profile was written and holds spin: " + prof[:200])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
