#!/usr/bin/env python3
"""The shape of src/, checked from the compiled objects.

Which file uses which: file A uses file B when A's object refers to a
symbol that B's object defines (nm); and, read from the source (what nm
cannot see), when A includes B ("#include "B""), when A calls a function
defined in header B (static inline), with what that function calls in
turn (through other headers' inline functions, to the .c files defining
the rest), or when header A's inline code calls a function of file B. A
header's own inline code calling its own .c (exit_signals.h ->
exit_signals.c) is one module, no arrow: whoever calls that inline code
uses the .c. Prints each file's uses, the import cycles (strongly
connected components of more than one file; each as one path, one line),
and which files a sample passes through from the signal handler and from
the safe point. Exits non-zero when a rule of docs/design.md ("Who owns
what") is broken:
  - no import cycle among src files (.c and .h, the graph above): no file
    below another depends on it, through a call, an inline call or an
    include;
  - src/ljp.h, the context, defines no inline function (it calls nothing);
  - each part of the context (a field of struct ljp_ctx in src/ljp.h
    whose comment says "owner: F", F a file or a glob) is written only by
    its owner: the files F and the header declaring the part's type (its
    inline functions are the owner's; a type header of its own,
    src/*_part.h, which ljp.h includes instead of an owner's header that
    takes a context, defines no inline function). A write is an assignment, ++/--,
    or an atomic store/add/exchange/compare-exchange or memset/memcpy to
    X->part.field (also through a pointer to the part taken in that file:
    p = &X->part; p->field = ...), comments aside;
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
    file is in one of the two tables (SAMPLER_FILES, VM_FILES);
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
            "ReadProcessMemory", "CreateThread", "SetThreadPriority",
            "DuplicateHandle", "timeBeginPeriod", "CreateWaitableTimerExW",
            "SetWaitableTimer", "QueryThreadCycleTime", "MoveFileExA",
            "GetModuleHandleExA", "GetModuleHandleA", "GetProcAddress"]
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


def strip(text):
    """C text with comments, string and character literals blanked (lines
    kept)."""
    def blank(m):
        return " " + "\n" * m.group().count("\n")
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  blank, text, flags=re.S)


INLINE = re.compile(r"\bstatic\s+(?:__inline__\s+|inline\s+)[^;{}()]*?\b(\w+)\s*"
                    r"\(([^()]|\([^()]*\))*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?\{",
                    re.S)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined",
            "__attribute__", "__typeof__", "typeof", "_Alignof", "alignof"}


def body_at(text, brace):
    """The text of the block whose "{" is at index brace."""
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace:i + 1]
    return text[brace:]


def source_graph(src, owner):
    """file -> {file: names}: the includes and inline calls of src/ (see
    the top). owner: symbol -> the object (basename) defining it."""
    files = sorted(os.path.basename(p) for p in
                   glob.glob(os.path.join(src, "*.c")) +
                   glob.glob(os.path.join(src, "*.h")))
    texts, inline = {}, {}     # inline: function -> (header, body)
    for f in files:
        with open(os.path.join(src, f)) as fh:
            raw = fh.read()
        texts[f] = (raw, strip(raw))
        if f.endswith(".h"):
            s = texts[f][1]
            for m in INLINE.finditer(s):
                inline.setdefault(m.group(1), (f, body_at(s, m.end() - 1)))
    # what each inline function reaches: headers and .c files
    reach_memo = {}

    def reaches(fn, seen):
        if fn in reach_memo:
            return reach_memo[fn]
        out = {}
        hdr, body = inline[fn]
        for c in set(CALL.findall(body)) - KEYWORDS - {fn}:
            if c in inline and c not in seen:
                h2 = inline[c][0]
                if h2 != hdr:
                    out.setdefault(h2, set()).add(c)
                for k, v in reaches(c, seen | {fn}).items():
                    out.setdefault(k, set()).update(v)
            elif c in owner:
                out.setdefault(owner[c] + ".c", set()).add(c)
        reach_memo[fn] = out
        return out

    graph = {f: {} for f in files}
    for f in files:
        raw, s = texts[f]
        base = f.rsplit(".", 1)[0]
        for inc in re.findall(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', raw,
                              re.M):
            if inc in texts and inc != f:
                graph[f].setdefault(inc, set()).add("#include")
        if f.endswith(".h"):
            # the header's own inline code: calls of other files
            own_defs = {n for n, (h, _) in inline.items() if h == f}
            calls = set()
            for n in own_defs:
                calls |= set(CALL.findall(inline[n][1]))
            calls -= KEYWORDS | own_defs
            for c in calls:
                if c in owner and owner[c] != base:
                    graph[f].setdefault(owner[c] + ".c", set()).add(c)
        else:
            calls = set(CALL.findall(s)) - KEYWORDS
        for c in calls:
            if c not in inline:
                continue
            hdr = inline[c][0]
            if hdr != f:
                graph[f].setdefault(hdr, set()).add(c)
            for k, v in reaches(c, frozenset()).items():
                if k == f or (f.endswith(".h") and k == base + ".c"):
                    continue
                graph[f].setdefault(k, set()).update(v)
    return graph


def a_cycle(graph, comp):
    """One cycle inside the strongly connected component comp, as a path."""
    comp = set(comp)
    start = min(comp)
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in comp and w not in prev:
                prev[w] = v
                todo.append(w)
    return sorted(comp)


def part_owners(src):
    """part -> (owner files, the header declaring its type), from the
    "owner:" marks in struct ljp_ctx (src/ljp.h)."""
    with open(os.path.join(src, "ljp.h")) as f:
        raw = f.read()
    body = raw[raw.find("struct ljp_ctx {"):]
    body = body[:body.find("\n};")]
    parts = {}
    for m in re.finditer(r"^\s*(\w+)\s+(\w+);\s*/\*(.*?)\*/", body, re.M | re.S):
        typ, name, comment = m.groups()
        o = re.search(r"owners?:\s*([^)]*)", comment)
        if not o:
            continue
        pats = [p for p in re.split(r"[\s,]+", o.group(1)) if p]
        own = set()
        for p in pats:
            found = glob.glob(os.path.join(src, p))
            if not found:
                own.add("?" + p)
            own |= {os.path.basename(x) for x in found}
            own |= {os.path.basename(x)[:-2] + ".h" for x in found
                    if os.path.exists(x[:-2] + ".h")}
        for h in glob.glob(os.path.join(src, "*.h")):
            with open(h) as f:
                if re.search(r"}\s*%s\s*;" % re.escape(typ), f.read()):
                    own.add(os.path.basename(h))
        parts[name] = own
    return parts


WRITE_OP = r"(?:=(?!=)|\+\+|--|[-+*/%|&^]=|<<=|>>=)"
WRITE_FN = (r"\b(?:atomic_store|atomic_fetch_\w+|atomic_exchange|"
            r"atomic_compare_exchange\w*|memset|memcpy)(?:_explicit)?\s*\(\s*&\s*$")


def part_writes(src, parts):
    """Writes to a part's fields outside its owner (see the top)."""
    bad = []
    for path in sorted(glob.glob(os.path.join(src, "*.c")) +
                       glob.glob(os.path.join(src, "*.h"))):
        name = os.path.basename(path)
        with open(path) as f:
            s = strip(f.read())
        for part, own in sorted(parts.items()):
            if name in own:
                continue
            # X->part.field..., and pointers to the part: p = &X->part
            bases = [r"\w+\s*->\s*%s\s*\.\s*\w+" % part]
            for a in set(re.findall(r"\b(\w+)\s*=\s*&\s*\w+\s*->\s*%s\s*[;,)]"
                                    % part, s)):
                bases.append(r"\b%s\s*->\s*\w+" % a)
            for b in bases:
                pat = re.compile(r"\b%s(?:\s*(?:\.|->)\s*\w+|\[[^\]]*\])*"
                                 % b)
                for m in pat.finditer(s):
                    lhs = m.group()
                    pre = re.search(r"(\+\+|--)\s*$", s[max(0, m.start() - 8):m.start()])
                    op = re.match(r"\s*%s" % WRITE_OP, s[m.end():m.end() + 8])
                    fn = re.search(WRITE_FN, s[max(0, m.start() - 60):m.start()])
                    if pre or op or fn:
                        line = s.count("\n", 0, m.start()) + 1
                        bad.append("%s:%d writes %s, a part of the context "
                                   "owned by %s: call a function of the owner"
                                   % (name, line, re.sub(r"\s+", "", lhs),
                                      ", ".join(sorted(own))))
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
    # The whole graph: nm's arrows between objects, and the source's
    # (includes, inline calls), over the files of src/.
    sgraph = source_graph(src, owner)
    whole = {f: set(e) for f, e in sgraph.items()}
    for name, users in graph.items():
        whole.setdefault(name + ".c", set()).update(u + ".c" for u in users)
    for f in list(whole):
        for g in whole[f]:
            whole.setdefault(g, set())
    cycles = [c for c in sccs(whole) if len(c) > 1]
    for c in cycles:
        path = a_cycle(whole, c)
        ties = []
        for a, b in zip(path, path[1:]):
            names = sorted(sgraph.get(a, {}).get(b, ()))
            if not names and b.endswith(".c") and a.endswith(".c"):
                names = sorted(s for s in undefs.get(a[:-2], ())
                               if owner.get(s) == b[:-2])
            ties.append("%s -> %s (%s)" % (a, b, ", ".join(names[:3]) or "?"))
        bad.append("import cycle of %d files: %s" % (len(c), "; ".join(ties)))
    with open(os.path.join(src, "ljp.h")) as f:
        hub = INLINE.findall(strip(f.read()))
    if hub:
        bad.append("src/ljp.h defines %s: the context's header calls "
                   "nothing; the function goes to its owner's header"
                   % ", ".join(n for n, _ in hub))
    parts = part_owners(src)
    for part, own in sorted(parts.items()):
        for o in sorted(own):
            if o.startswith("?"):
                bad.append("src/ljp.h: the owner %s of part %s is no file"
                           % (o[1:], part))
    if not parts:
        bad.append("src/ljp.h: no part of struct ljp_ctx names its owner")
    bad += part_writes(src, parts)
    # A part's own type header (src/*_part.h: what ljp.h includes when the
    # owner's header takes a context) is exempt above as the header
    # declaring the type: it holds types only, so the exemption writes
    # nothing.
    for h in sorted(glob.glob(os.path.join(src, "*_part.h"))):
        with open(h) as f:
            defs_h = INLINE.findall(strip(f.read()))
        if defs_h:
            bad.append("src/%s defines %s: a part's type header holds types "
                       "only; the function goes to its owner's header"
                       % (os.path.basename(h), ", ".join(n for n, _ in defs_h)))
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
        print("read from the source (includes, inline calls):")
        for f in sorted(sgraph):
            if sgraph[f]:
                print("  %-14s uses %s" % (f, " ".join(sorted(sgraph[f]))))
        print("parts and their owners: %s" %
              "; ".join("%s %s" % (p, " ".join(sorted(o)))
                        for p, o in sorted(parts.items())))
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
# only. VM_FILES implement it (the LuaJIT side); every other src file is
# sampler side and listed in SAMPLER_FILES, which is checked: the
# file (or a header it includes, followed through every header but vm.h)
# includes no header of the LuaJIT side (VM_HEADERS), and its object uses
# no symbol of VM_FILES that vm.h (or vm_luajit.h, the types and inline
# readers it includes) does not name. Every src/*.c is in
# exactly one of the two tables.
VM_FILES = {"vmprobe", "luastack", "tracemem", "tracesnap", "vmlearn",
            "traces", "ffid", "names", "luaframes", "irmap", "mcmap",
            "vmnames"}
SAMPLER_FILES = {"sample", "signal", "timer_thread", "timer_posix",
                 "timer_itimer", "timer_exit", "clocks", "safepoint", "run",
                 "api", "lua_ljprof", "hook", "jitmode", "slots", "ring",
                 "store", "table", "buf", "zones", "labels", "auto",
                 "exit_signals", "exit_write", "exec", "preload", "spawn", "sigowner",
                 "os_linux", "os_win", "ownstate", "outfile", "writer",
                 "codemap", "complete", "dumpstack", "calls", "pkgpaths",
                 "unwind", "cfi", "symbols", "objects", "elfsyms", "epoch",
                 "x64dec",  # a pure x86-64 decoder (mcmap.c, test hooks)
                 # the Windows side (issue 31): one file per OS
                 "timer_win", "signal_win", "sigowner_win", "exit_win",
                 "objects_win", "unwind_win", "auto_win", "outfile_win",
                 "spawn_win"}
VM_INTERFACE = "vm.h"
VM_TYPES = "vm_luajit.h"  # included by vm.h only: its types and inline readers
VM_HEADERS = {"vmprobe.h", "luastack.h", "tracemem.h", "tracesnap.h",
              "ffid.h", "traces.h", "names.h", "vm_luajit.h", "mcmap.h",
              "vmnames.h"}


def vm_seam(src, defs, undefs, owner):
    bad = []
    names = {os.path.basename(p)[:-2]
             for p in glob.glob(os.path.join(src, "*.c"))}
    tables = (("SAMPLER_FILES", SAMPLER_FILES), ("VM_FILES", VM_FILES))
    for n in sorted(names):
        inside = [t for t, files in tables if n in files]
        if len(inside) != 1:
            bad.append("%s.c is in %s of SAMPLER_FILES, VM_FILES "
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
