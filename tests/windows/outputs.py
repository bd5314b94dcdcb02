#!/usr/bin/env python3
"""The Windows build's outputs, read by their real tools (suite windows):
luajit.exe under Wine runs a compiled-loop workload (a, b, c: 1:2:3)
under -jprof with four outputs; here, on Linux, each is read by what
reads it for real: the SVG by an XML parser (its root an <svg>, frames
labelled with the functions), the speedscope file by a JSON parser
(its $schema, one sampled profile whose frames name a, b and c), the
pprof file by protoc --decode against the pprof schema
(tests/profile.proto: the functions in its string table, samples with
values) and by go tool pprof -top (c the most sampled), the folded file line by line (every line "frames count", c the
most sampled leaf). Without protoc or go it fails, saying how to install them.

With --speedscope (test win-speedscope): the speedscope file of another
run (with its folded file) imported by speedscope's own importer, as
tests/lua/test_speedscope.lua does on Linux (tests/speedscope_import.js,
the npm package speedscope@1.25.0 installed once into BUILD_DIR/npm):
detected as speedscope JSON, one profile, its frames with the self and
total weights, the total weight and the callers that the folded file of
the same run gives (its counts times the 1 ms interval, in ns). Without
node or npm it exits 77 (meson: skipped), saying so.

Usage: outputs.py [--speedscope] WINE LUAJIT_EXE SRC_DIR BUILD_DIR
(tests/windows/meson.build)
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

WORK = """
local function a(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function b(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local function c(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local t0 = os.clock()
while os.clock() - t0 < 1 do a(1e5) b(2e5) c(3e5) end
"""

failed = 0


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failed += 1
    return cond


SPEEDSCOPE = "speedscope@1.25.0"  # as tests/lua/test_speedscope.lua


def run_work(wine, exe, src, build, d, names):
    """The workload under -jprof=i1 with outputs names in d: their paths."""
    script = os.path.join(d, "work.lua")
    with open(script, "w") as f:
        f.write(WORK)
    outs = ",".join("Z:" + os.path.join(d, n) for n in names)
    env = dict(os.environ)
    env["LUA_PATH"] = "Z:" + src + "/?.lua;;"
    env["LUA_CPATH"] = "Z:" + build + "/?.dll"
    p = subprocess.run([wine, exe, "-jprof=i1," + outs, "Z:" + script],
                       env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "the workload ran: %d %s" % (p.returncode, p.stderr))
    paths = {n: os.path.join(d, n) for n in names}
    for n, pth in paths.items():
        check(os.path.exists(pth) and os.path.getsize(pth) > 0, n + " written")
    return paths


def hexs(s):
    return None if s is None else s.encode("utf-8").hex()


def speedscope_import(wine, exe, src, build):
    """The speedscope file imported by speedscope itself (node)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print("skipped: node and npm are needed to run speedscope's importer "
              "(apt-get install nodejs npm; ./run test installs them)")
        return 77
    prefix = os.path.join(build, "npm")
    schema = os.path.join(prefix, "node_modules", "speedscope", "dist", "release",
                          "file-format-schema.json")
    if not os.path.exists(schema):
        os.makedirs(prefix, exist_ok=True)
        q = subprocess.run([npm, "install", "--prefix", prefix, "--no-audit", "--no-fund",
                            "--loglevel=error", SPEEDSCOPE], capture_output=True, text=True,
                           timeout=600)
        if not check(q.returncode == 0 and os.path.exists(schema),
                     "npm install --prefix %s %s: %s" % (prefix, SPEEDSCOPE,
                                                         (q.stdout + q.stderr)[-500:])):
            return 1
    d = tempfile.mkdtemp(prefix="ljp_winss_")
    try:
        paths = run_work(wine, exe, src, build, d, ["o.speedscope.json", "o.folded"])
        if failed:
            return 1
        with open(paths["o.speedscope.json"]) as f:
            s = json.load(f)
        files = {fr["name"]: (fr.get("file"), fr.get("line")) for fr in s["shared"]["frames"]}
        # the expectation, from the folded file: 1 ms = 1e6 ns a sample
        frames, edges, total = {}, set(), 0
        with open(paths["o.folded"]) as f:
            for ln in f:
                stack, _, n = ln.rstrip("\n").rpartition(" ")
                w = int(n) * 1000000
                total += w
                fr = stack.split(";")
                for i, name in enumerate(fr):
                    e = frames.setdefault(name, {"self": 0, "total": 0})
                    if name not in fr[:i]:
                        e["total"] += w
                    if i == len(fr) - 1:
                        e["self"] += w
                    if i > 0:
                        edges.add((fr[i - 1], name))
        check({"a", "b", "c"} <= set(frames), "folded: a, b and c sampled: %s" % sorted(frames))
        check(set(frames) == set(files), "speedscope's frames are the folded file's: %s %s"
              % (sorted(files), sorted(frames)))
        exp = {"profileName": hexs(s["profiles"][0]["name"]), "totalWeight": total,
               "frames": [{"name": hexs(k), "file": hexs(files.get(k, (None, None))[0]),
                           "line": files.get(k, (None, None))[1],
                           "self": v["self"], "total": v["total"]} for k, v in frames.items()],
               # a callee with one caller: a, b, c by the main chunk
               "edges": [[hexs(a), hexs(b)] for a, b in sorted(edges)
                         if sum(1 for x in edges if x[1] == b) == 1]}
        exp_path = os.path.join(d, "expect.json")
        with open(exp_path, "w") as f:
            json.dump(exp, f)
        # imported under a name that does not say the format (detected by
        # its $schema, as on Linux)
        prof = os.path.join(d, "o.profile")
        shutil.copy(paths["o.speedscope.json"], prof)
        q = subprocess.run([node, os.path.join(src, "tests", "speedscope_import.js"), prefix,
                            prof, exp_path], capture_output=True, text=True, timeout=120)
        out = q.stdout + q.stderr
        print("node: " + out.strip())
        check(q.returncode == 0 and "all checks passed" in out,
              "speedscope's importer read the file as the folded file says: %s" % out[-800:])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%s" % ("all passed" if not failed else "%d failed" % failed))
    return 1 if failed else 0


def main():
    if sys.argv[1] == "--speedscope":
        return speedscope_import(*sys.argv[2:6])
    wine, exe, src, build = sys.argv[1:5]
    d = tempfile.mkdtemp(prefix="ljp_winout_")
    try:
        paths = run_work(wine, exe, src, build, d,
                         ["o.svg", "o.speedscope.json", "o.pb.gz", "o.folded"])
        # SVG
        try:
            root = ET.parse(paths["o.svg"]).getroot()
            labels = {(el.text or "").strip() for el in root.iter()
                      if el.tag.endswith("text")}
            check(root.tag.endswith("svg"), "SVG: the root is <svg>")
            check({"work.lua:a", "work.lua:b", "work.lua:c"} <= labels,
                  "SVG: frames labelled work.lua:a, :b, :c")
        except Exception as e:  # noqa: BLE001
            check(False, "SVG parses as XML: %s" % e)
        # speedscope
        try:
            with open(paths["o.speedscope.json"]) as f:
                s = json.load(f)
            check(s.get("$schema") == "https://www.speedscope.app/file-format-schema.json",
                  "speedscope: its $schema")
            frames = {fr.get("name") for fr in s["shared"]["frames"]}
            check({"a", "b", "c"} <= frames, "speedscope: frames a, b, c: %s" % sorted(frames))
            prof = s["profiles"][0]
            check(prof["type"] == "sampled" and len(prof["samples"]) > 0 and
                  len(prof["samples"]) == len(prof["weights"]),
                  "speedscope: a sampled profile with %d samples" % len(prof["samples"]))
        except Exception as e:  # noqa: BLE001
            check(False, "speedscope parses: %s" % e)
        # pprof
        protoc = shutil.which("protoc")
        if check(protoc is not None, "protoc is installed (apt-get install -y "
                 "protobuf-compiler): the pprof file's oracle"):
            raw = gzip.decompress(open(paths["o.pb.gz"], "rb").read())
            tests = os.path.join(src, "tests")
            q = subprocess.run([protoc, "--decode=perftools.profiles.Profile",
                                "--proto_path=" + tests,
                                os.path.join(tests, "profile.proto")],
                               input=raw, capture_output=True, timeout=60)
            out = q.stdout.decode("utf-8", "replace")
            check(q.returncode == 0, "pprof: protoc --decode: %s" % q.stderr.decode()[:300])
            strings = [ln.split(":", 1)[1].strip() for ln in out.splitlines()
                       if ln.startswith("string_table:")]
            check(all('"%s"' % f in strings for f in ("a", "b", "c")),
                  "pprof: the string table names a, b, c")
            check(out.count("sample {") > 0 and "value:" in out, "pprof: samples with values")
        go = shutil.which("go")
        if check(go is not None, "go is installed (apt-get install -y golang-go): "
                 "go tool pprof reads the pprof file"):
            genv = dict(os.environ, HOME=d, PPROF_TMPDIR=d, GOTOOLCHAIN="local", GOFLAGS="")
            q = subprocess.run([go, "tool", "pprof", "-symbolize=none", "-top", paths["o.pb.gz"]],
                               cwd=d, env=genv, capture_output=True, text=True, timeout=120)
            rows = [ln.split() for ln in q.stdout.splitlines()]
            # -top's rows: flat flat% sum% cum cum% name (file:line), most flat first
            top = [r[5] for r in rows if len(r) >= 6 and r[1].endswith("%")]
            check(q.returncode == 0 and top[:1] == ["c"],
                  "pprof: go tool pprof -top puts c first: %s %s" % (top[:4], q.stderr[:300]))
        # folded
        leaf = {}
        ok = True
        with open(paths["o.folded"]) as f:
            for ln in f:
                stack, _, n = ln.rstrip("\n").rpartition(" ")
                ok = ok and bool(stack) and n.isdigit()
                if ok:
                    k = stack.split(";")[-1]
                    leaf[k] = leaf.get(k, 0) + int(n)
        check(ok and leaf, "folded: every line is 'frames count'")
        check(leaf and max(leaf, key=leaf.get) == "c", "folded: c the most sampled: %s" % leaf)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%s" % ("all passed" if not failed else "%d failed" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
