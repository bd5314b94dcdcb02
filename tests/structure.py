#!/usr/bin/env python3
"""The shape of src/, checked from the compiled objects.

Which file uses which: file A uses file B when A's object refers to a
symbol that B's object defines (nm). Prints each file's uses, the import
cycles (strongly connected components of more than one file), and which
files a sample passes through from the signal handler and from the safe
point. Exits non-zero when a rule of docs/design.md ("Who owns what") is
broken:
  - no import cycle among src files;
  - lua_sethook/lua_gethook* only in the hook owner (hook.c) and the probe;
  - dl_iterate_phdr only in the object registry (objects.c);
  - signal dispositions, masks and threads (sigaction, signal,
    sigprocmask, pthread_sigmask, pthread_create) in exactly one file,
    their owner (sigowner.c): no other file uses them, and it does;
  - the context lookups (ljp_slot_find, ljp_slot_enter,
    ljp_ctx_get) only in the entry points;
  - nothing below an entry point names it: the files that look up a
    context are used only by files holding an entry point (ENTRY_FILES),
    but for the symbols of EXCEPT;
  - every file whose source marks an entry point ("ENTRY") is in the
    entry points' table of docs/design.md, and in ENTRY_FILES below;
  - the OS calls (process_vm_readv, prctl, the raw system-call numbers
    tgkill/rt_tgsigqueueinfo/gettid, _dl_find_object, /proc/self/task,
    REG_RIP; on Windows windows.h and the Win32 calls below) are named in
    the source of the OS files only (src/os_linux.c/.h, src/os_win.c/.h,
    behind src/os.h), comments aside;
  - the signal handler's unwinder (cfi.c) calls nothing outside itself:
    no libc, no other src file (it is async-signal-safe by construction);
  - the ELF symbol reader (elfsyms.c) uses no other src file: what it
    needs of the object registry comes in its arguments (ljp_elfobj);
  - libljprof.so does not depend on libunwind (its _Unwind_* exports
    would bind a host's C++/LuaJIT exceptions to it, issue 15), and
    exports no _Unwind_* symbol itself;
  - the VM seam: a sampler-side file (SAMPLER_FILES) includes no header of
    the LuaJIT side (VM_HEADERS), directly or through another header, only
    src/vm.h, and uses no symbol of a VM file (VM_FILES) that vm.h (or
    vm_luajit.h, its types and inline readers) does not name; every src
    file is in one table (SAMPLER_FILES, VM_FILES, VM_NAMING);
  - its SONAME is libljprof.so.N, N the major of meson's project version
    (libljprof.so.0 for 0.1.0), and libljprof.so.N is in the build tree.

Usage: tests/structure.py BUILD_DIR [--report]
"""
import glob
import json
import os
import re
import subprocess
import sys

# Files that look up a context (ljp_slot_*, ljp_ctx_get).
ENTRY_POINTS = {"signal", "safepoint", "api", "lua_ljprof"}
# Files holding an entry point of docs/design.md's table besides those:
# what calls them is outside ljprof (the kernel, a thread's start, the
# host, Lua), so they may name the files above.
ENTRY_FILES = ENTRY_POINTS | {"exit_signals", "auto", "exec", "preload",
                              "spawn", "timer_thread", "timer_exit",
                              "os_linux"}
# (user, entry point file): symbols a file below may still name there.
EXCEPT = {}
# Symbols used by exactly one file, their owner.
OWNED = [
    ({"sigaction", "signal", "sigprocmask", "pthread_sigmask",
      "pthread_create", "sigset", "bsd_signal", "sysv_signal",
      "__sysv_signal"}, "sigowner", "sigaction"),
]
# OS calls (docs/design.md "The OS interface"): named in the source of the
# OS file only (src/os_linux.c and the inline half, src/os_linux.h),
# comments aside. Read from the source, not nm: the raw system-call
# numbers leave no symbol, and the per-tick ones are inline.
OS_FILES = {"os_linux.c", "os_linux.h", "os_win.c", "os_win.h"}
OS_CALLS = ["process_vm_readv", "prctl", "SYS_tgkill", "SYS_rt_tgsigqueueinfo",
            "SYS_gettid", "_dl_find_object", "dl_find_object",
            "/proc/self/task", "REG_RIP",
            # Windows (os_win.c/.h, issue 31)
            "windows.h", "QueryPerformanceCounter", "QueryPerformanceFrequency",
            "SuspendThread", "ResumeThread", "GetThreadContext",
            "ReadProcessMemory"]
# Files with a reason to name one of them anyway: cfi.c decodes the
# whole register file from a ucontext and calls nothing outside itself.
OS_EXCEPT = {("cfi.c", "REG_RIP")}
RULES = [
    # (symbols, files allowed to use them)
    ({"lua_sethook", "lua_gethook", "lua_gethookmask", "lua_gethookcount"},
     {"hook", "vmprobe"}),
    ({"dl_iterate_phdr"}, {"objects"}),
    ({"ljp_slot_find", "ljp_slot_enter", "ljp_ctx_get"},
     ENTRY_POINTS | {"slots"}),
]


def objects(build):
    objs = {}
    # The objects of the library libljprof.so links to (libljprof.so.X.Y.Z):
    # an older build tree may also hold those of an unversioned one.
    lib = os.path.realpath(os.path.join(build, "libljprof.so"))
    pdir = lib + ".p" if os.path.isdir(lib + ".p") else os.path.join(build, "libljprof.so*.p")
    for o in glob.glob(os.path.join(pdir, "*.o")):
        base = os.path.basename(o)
        if base.startswith("src_") and base.endswith(".c.o"):
            objs[base[len("src_"):-len(".c.o")]] = o
    return objs


def project_version(build):
    """meson's project version, from the build tree's introspection data."""
    path = os.path.join(build, "meson-info", "intro-projectinfo.json")
    with open(path) as f:
        return json.load(f)["version"]


def symbols(path):
    out = subprocess.run(["nm", path], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR" and parts[1].isupper():
            defined.add(parts[2])
    return defined, undefined


def sccs(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def reach(graph, start):
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        if v in seen or v not in graph:
            continue
        seen.add(v)
        todo.extend(graph[v])
    return seen


def os_calls(src):
    """The OS calls named outside the OS file (comments stripped)."""
    bad = []
    paths = sorted(glob.glob(os.path.join(src, "*.c")) +
                   glob.glob(os.path.join(src, "*.h")))
    for path in paths:
        name = os.path.basename(path)
        if name in OS_FILES:
            continue
        with open(path) as f:
            text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
        for call in OS_CALLS:
            pat = re.escape(call) if "/" in call else r"\b%s\b" % re.escape(call)
            if re.search(pat, text) and (name, call) not in OS_EXCEPT:
                bad.append("%s names %s: OS calls live in src/os_<system>.c/.h "
                           "(os.h)" % (name, call))
    return bad


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    report = "--report" in sys.argv
    objs = objects(build)
    if not objs:
        print("structure: no objects under %s/libljprof.so*.p" % build)
        return 1
    defs, undefs = {}, {}
    for name, path in objs.items():
        defs[name], undefs[name] = symbols(path)
    owner = {}
    for name, d in defs.items():
        for s in d:
            owner.setdefault(s, name)
    graph = {n: set() for n in objs}
    for name, u in undefs.items():
        for s in u:
            o = owner.get(s)
            if o and o != name:
                graph[name].add(o)
    bad = []
    for syms, own, must in OWNED:
        users = sorted(n for n, u in undefs.items() if u & syms)
        for name in users:
            if name != own:
                bad.append("%s uses %s: %d files do, one may (%s.c)" %
                           (name, ", ".join(sorted(undefs[name] & syms)),
                            len(users), own))
        if must not in undefs.get(own, ()):
            bad.append("%s.c does not call %s: it owns it" % (own, must))
    for name, u in sorted(undefs.items()):
        if name in ENTRY_FILES:
            continue
        for e in sorted(graph[name] & ENTRY_POINTS):
            named = sorted(s for s in u if owner.get(s) == e and
                           s not in EXCEPT.get((name, e), ()))
            if named:
                bad.append("%s names the entry point %s: %s" %
                           (name, e, ", ".join(named)))
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    bad += os_calls(src)
    bad += vm_seam(src, defs, undefs, owner)
    design = os.path.join(src, "..", "docs", "design.md")
    if os.path.exists(design):
        with open(design) as f:
            text = f.read()
        table = text[text.find("**Entry points**"):]
        table = table[:table.find("\n\n", table.find("| entry point"))]
        for name in sorted(objs):
            path = os.path.join(src, name + ".c")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                marked = "ENTRY" in f.read()
            if marked and ("`%s.c`" % name) not in table:
                bad.append("%s.c marks an entry point that is not in the "
                           "entry points' table of docs/design.md" % name)
            if (name in ENTRY_FILES) != marked:
                bad.append("%s.c: ENTRY in its source and ENTRY_FILES in "
                           "tests/structure.py disagree" % name)
    if graph.get("elfsyms"):
        bad.append("elfsyms uses other src files: " +
                   " ".join(sorted(graph["elfsyms"])))
    cycles = [c for c in sccs(graph) if len(c) > 1]
    for c in cycles:
        bad.append("import cycle: " + " ".join(c))
    for syms, allowed in RULES:
        for name, u in sorted(undefs.items()):
            used = sorted((u | defs[name]) & syms)
            if used and name not in allowed:
                bad.append("%s uses %s (allowed in: %s)" %
                           (name, ", ".join(used), ", ".join(sorted(allowed))))
    if report or bad:
        print("%d files in src/" % len(objs))
        for name in sorted(graph):
            print("  %-14s uses %s" % (name, " ".join(sorted(graph[name])) or "-"))
        for start, fn in (("signal handler", "signal"), ("safe point", "safepoint")):
            r = reach(graph, fn) - {fn}
            print("%s (%s.c) enters %d other files: %s" %
                  (start, fn, len(r), " ".join(sorted(r))))
        print("import cycles: %s" %
              ("; ".join(" ".join(c) for c in cycles) if cycles else "none"))
    if "cfi" in undefs:
        ext = sorted(s for s in undefs["cfi"] if s != "_GLOBAL_OFFSET_TABLE_")
        if ext:
            bad.append("cfi calls outside itself: " + ", ".join(ext))
    lib = os.path.join(build, "libljprof.so")
    if os.path.exists(lib):
        dyn = subprocess.run(["readelf", "-dW", lib], capture_output=True,
                             text=True, check=True).stdout
        for line in dyn.splitlines():
            if "(NEEDED)" in line and "libunwind" in line:
                bad.append("libljprof.so needs " + line.split()[-1])
        exp = subprocess.run(["nm", "-D", "--defined-only", lib],
                             capture_output=True, text=True, check=True).stdout
        for line in exp.splitlines():
            if line.split()[-1].startswith("_Unwind_"):
                bad.append("libljprof.so exports " + line.split()[-1])
        want = "libljprof.so." + project_version(build).split(".")[0]
        soname = [l.split("[")[-1].rstrip("]") for l in dyn.splitlines()
                  if "(SONAME)" in l]
        if soname != [want]:
            bad.append("libljprof.so's SONAME is %s, want %s" %
                       (soname[0] if soname else "missing", want))
        elif not os.path.exists(os.path.join(build, want)):
            bad.append("no %s in the build tree" % want)
        elif report:
            print("SONAME: " + want)
    else:
        bad.append("no libljprof.so in " + build)
    for b in bad:
        print("structure: " + b)
    return 1 if bad else 0


# The VM interface (src/vm.h): the sampler side names the VM through vm.h
# only. VM_FILES implement it (the LuaJIT side); VM_NAMING are the files
# that still name Lua frames with LuaJIT's own headers; every other src
# file is sampler side and listed in SAMPLER_FILES, which is checked: the
# file (or a header it includes, followed through every header but vm.h)
# includes no header of the LuaJIT side (VM_HEADERS), and its object uses
# no symbol of VM_FILES that vm.h (or vm_luajit.h, the types and inline
# readers it includes) does not name. Every src/*.c is in
# exactly one of the three tables.
VM_FILES = {"vmprobe", "luastack", "tracemem", "tracesnap", "vmlearn",
            "traces", "ffid", "names"}
VM_NAMING = {
    "complete",   # the record loop and LuaJIT's naming of Lua frames in
                  # one file: on the VM's side until its naming half moves
    "calls",      # call counts: functions named through names.h
    "dumpstack",  # LuaJIT's own dumpstack format, through names.h
}
SAMPLER_FILES = {"sample", "signal", "timer_thread", "timer_posix",
                 "timer_itimer", "timer_exit", "clocks", "safepoint", "run",
                 "api", "lua_ljprof", "hook", "jitmode", "slots", "ring",
                 "store", "table", "buf", "zones", "labels", "auto",
                 "exit_signals", "exec", "preload", "spawn", "sigowner",
                 "os_linux", "ownstate", "outfile", "writer", "codemap",
                 "unwind", "cfi", "symbols", "objects", "elfsyms"}
VM_INTERFACE = "vm.h"
VM_TYPES = "vm_luajit.h"  # included by vm.h only: its types and inline readers
VM_HEADERS = {"vmprobe.h", "luastack.h", "tracemem.h", "tracesnap.h",
              "ffid.h", "traces.h", "names.h", "vm_luajit.h"}


def vm_seam(src, defs, undefs, owner):
    bad = []
    names = {os.path.basename(p)[:-2]
             for p in glob.glob(os.path.join(src, "*.c"))}
    tables = (("SAMPLER_FILES", SAMPLER_FILES), ("VM_FILES", VM_FILES),
              ("VM_NAMING", VM_NAMING))
    for n in sorted(names):
        inside = [t for t, files in tables if n in files]
        if len(inside) != 1:
            bad.append("%s.c is in %s of SAMPLER_FILES, VM_FILES, VM_NAMING "
                       "(tests/structure.py): one, the side it is on" %
                       (n, " and ".join(inside) or "none"))
    incl = {}
    for p in glob.glob(os.path.join(src, "*.[ch]")):
        with open(p) as f:
            text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
        incl[os.path.basename(p)] = re.findall(
            r'^\s*#\s*include\s+"(?:\.\./src/)?([^"/]+)"', text, flags=re.M)
    for n in sorted(SAMPLER_FILES & names):
        seen, todo = set(), [(n + ".c", n + ".c")]
        while todo:
            f, path = todo.pop()
            for h in incl.get(f, ()):
                if h in VM_HEADERS:
                    bad.append("%s includes %s (%s): the sampler side names "
                               "the VM through src/%s only" %
                               (n + ".c", h, path + " -> " + h, VM_INTERFACE))
                elif h != VM_INTERFACE and h not in seen:
                    seen.add(h)
                    todo.append((h, path + " -> " + h))
    # named by the interface or the types header it includes (whose inline
    # readers may use the layout they read, e.g. ljp_tml)
    declared = set()
    for h in (VM_INTERFACE, VM_TYPES):
        with open(os.path.join(src, h)) as f:
            text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
        declared |= set(re.findall(r"\b(ljp_\w+)\b", text))
    for n in sorted(SAMPLER_FILES & set(undefs)):
        used = sorted(s for s in undefs[n]
                      if owner.get(s) in VM_FILES and s not in declared)
        if used:
            bad.append("%s uses %s of the VM side, not in src/%s" %
                       (n, ", ".join(used), VM_INTERFACE))
    return bad


if __name__ == "__main__":
    sys.exit(main())
