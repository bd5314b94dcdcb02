#!/usr/bin/env python3
"""Console control events that end the program under jit.prof in the
Windows build, under Wine (suite windows): the profile written by the
console control handler's thread (src/exit_win.c), the exit status the
same as without the profiler.

Wine delivers GenerateConsoleCtrlEvent only to a console, which it makes
for a program on a pseudo-terminal (ctrlc.py). Cases:
  - a C host without a handler of its own (host_ctrl.c), Ctrl-C, an
    interpreted loop; Ctrl-Break; Ctrl-C in a compiled endless loop;
    Ctrl-C while blocked in a C call: each against the same host and
    event without the profiler (its status: Windows' default handler's)
  - luajit.exe -jprof, Ctrl-C in a compiled endless loop (luajit's
    "interrupted!" hook is never reached there): ends with the profile,
    with STATUS_CONTROL_C_EXIT.
Wine 8 delivers neither Ctrl-Break (GenerateConsoleCtrlEvent fails) nor,
headless, the console's close (CTRL_CLOSE_EVENT), logoff or shutdown:
those are delivered to ljprof's handler through ljprof.dll's test entry,
which does what Windows' control routine does (the handler on a new
thread; if it passes the event on, ExitProcess(STATUS_CONTROL_C_EXIT)).
Wine's own default handler ends a process with status 0 (not Windows'
STATUS_CONTROL_C_EXIT): the Ctrl-C cases compare with the run without
the profiler.
Prints the time from the event's sending to the end of the process.

Usage: ctrlevents.py WINE LUAJIT_EXE SRC_DIR BUILD_DIR HOST_EXE
"""
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# (Ctrl-C comes from host_ctrl.exe spawn, 0.5 s after the loop began: it
# is compiled by then; an event that came before would find it
# interpreted, and luajit's "interrupted!" would end it)
LJ_PROG = r"""
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local t0 = os.clock()
while os.clock() - t0 < 0.3 do spin(100000) end
io.open("started", "w"):close()
local x = 0
while true do x = x + 1 end
"""

failed = 0


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    sys.stdout.flush()
    if not cond:
        failed += 1
    return cond


def on_pty(argv, env, cwd, limit=60):
    """argv on a pseudo-terminal: its output, exit status and the seconds
    from "SENT" to its end (None: never sent)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                         cwd=cwd, start_new_session=True)
    os.close(slave)
    out = b""
    sent = None
    deadline = time.time() + limit
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if not r:
            if p.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if sent is None and b"SENT" in re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\r|\n", b"", out):
            sent = time.monotonic()
    try:
        code = p.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        code = p.wait()
    end = time.monotonic()
    os.close(master)
    text = out.decode("utf-8", "replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")
    return text, code, (end - sent) if sent is not None else None


def read(path):
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


CONTROL_C_EXIT = 0xC000013A & 0xFF  # STATUS_CONTROL_C_EXIT, as Wine's exit status


def said(out):
    """ljprof's lines on stderr besides its notices."""
    return re.search(r"ljprof:(?!\s*notice)", out) is not None


def has(out, what):
    """what in the console's output, whitespace aside (Wine's console
    moves the cursor for spaces: taken out with the escapes)."""
    return re.sub(r"\s", "", what) in re.sub(r"\s", "", out)


def main():
    wine, exe, src, build, host = [os.path.abspath(a) for a in sys.argv[1:6]]
    d = tempfile.mkdtemp(prefix="ljp_winctrlev_")
    try:
        env = dict(os.environ)
        env["LUA_PATH"] = "Z:" + src + "/?.lua;;"
        env["LUA_CPATH"] = "Z:" + build + "/?.dll"
        env["WINEPATH"] = "Z:" + build + ";Z:" + os.path.dirname(exe)
        base = {}
        for ev in ("c", "break"):
            out, code, dt = on_pty([wine, host, ev, "interp", "x.txt", "none"], env, d)
            if has(out, "GenerateConsoleCtrlEvent failed"):
                print("  without the profiler, %s: not delivered by Wine (%s)"
                      % (ev, out.strip().splitlines()[-2:]))
                continue
            base[ev] = code
            print("  without the profiler, %s: status %d, %.2f s after the event"
                  % (ev, code, dt if dt is not None else -1))
            check(not has(out, "RAN ON") and dt is not None, "%s ends the host" % ev)
        check("c" in base, "Wine delivered Ctrl-C (GenerateConsoleCtrlEvent)")
        # (event, loop, the function the profile must show, expected status):
        # Ctrl-C and, if Wine delivers it, Ctrl-Break; then the events Wine
        # does not deliver through the test entry, which ends the process as
        # Windows' default handler does (STATUS_CONTROL_C_EXIT).
        cases = [("c", "interp", "spin", base.get("c")),
                 ("c", "compiled", None, base.get("c")),
                 ("c", "blocked", None, base.get("c"))]
        if "break" in base:
            cases.append(("break", "interp", "spin", base["break"]))
        cases += [("tbreak", "interp", "spin", CONTROL_C_EXIT),
                  ("close", "compiled", None, CONTROL_C_EXIT),
                  ("close", "blocked", None, CONTROL_C_EXIT),
                  ("logoff", "interp", "spin", CONTROL_C_EXIT)]
        for ev, mode, want, status in cases:
            name = "%s_%s.txt" % (ev, mode)
            out, code, dt = on_pty([wine, host, ev, mode, name], env, d)
            prof = read(os.path.join(d, name))
            print("  %s in %s: status %d (want %s), %.2f s after the event"
                  % (ev, mode, code, status, dt if dt is not None else -1))
            check(not has(out, "RAN ON") and not said(out) and
                  not has(out, "GenerateConsoleCtrlEvent failed"),
                  "%s/%s: ended, nothing said: %s" % (ev, mode, out[-300:]))
            check(code == status, "%s/%s: status %s: %d" % (ev, mode, status, code))
            lines = re.findall(r"(?m)^\s*(\d+)%\s+(\S.*)$", prof)
            ok = len(lines) > 0
            if want:
                ok = any(n.strip() == want and int(p) >= 50 for p, n in lines)
            check(ok, "%s/%s: the profile written%s: %s"
                  % (ev, mode, " with %s >= 50%%" % want if want else "", prof[:200]))
            check(dt is not None and dt < 10, "%s/%s: ended within 10 s of the event"
                  % (ev, mode))
        # luajit.exe -jprof: Ctrl-C in a compiled endless loop. Its SIGINT
        # handler's hook is never reached there: without the profiler the
        # first Ctrl-C does not end it. The profile is written, the process
        # ends as the default handler of real Windows ends it.
        with open(os.path.join(d, "loop.lua"), "w") as f:
            f.write(LJ_PROG)
        cmd = "%s -jprof=f,loop.txt loop.lua" % ("Z:" + exe).replace("/", "\\")
        out, code, dt = on_pty([wine, host, "spawn", "500", cmd], env, d, 60)
        prof = read(os.path.join(d, "loop.txt"))
        print("  luajit.exe -jprof, compiled loop: status %d, %.2f s after the event"
              % (code, dt if dt is not None else -1))
        check(dt is not None and dt < 10, "luajit compiled loop: ended within 10 s "
              "of Ctrl-C: " + out[-300:])
        check(code == CONTROL_C_EXIT, "luajit compiled loop: status "
              "STATUS_CONTROL_C_EXIT (%d): %d" % (CONTROL_C_EXIT, code))
        check(re.search(r"(?m)^\s*\d+%\s+loop\.lua:", prof) is not None,
              "luajit compiled loop: the profile written, the loop in it: " + prof[:200])
        check(not said(out), "luajit compiled loop: nothing said")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
