-- Fixed costs by instruction count: what a profiler started but taking no
-- sample adds to a workload, counted in instructions instead of timed.
-- On this shared VM a timed ratio carries several percent of noise, and a
-- fixed cost of half a percent cannot be seen in it. Instruction counts
-- do not depend on other load; what still moves them is LuaJIT's choice
-- of traces, which is random per process (its PRNG is seeded from
-- getrandom) and depends on the address space layout. Here both are held
-- fixed: bench/detseed.c (LD_PRELOAD) gives LuaJIT the seed
-- LJPROF_BENCH_SEED, and setarch -R turns address randomisation off, so a
-- run repeats its count exactly. Each configuration runs under several
-- seeds; the report gives, per workload, the median count and its ratio
-- to the unprofiled median, with the range over seeds.
--
--   luajit bench/icount.lua [--seeds N] [--workloads a,b] [--jobs J]
--                           [--build DIR] [--out FILE]
--
-- Needs valgrind (cachegrind, no cache simulation), setarch and cc. From
-- the repository root; writes docs/instructions.md (or --out) and prints
-- the table. Workloads and configurations are bench/run's (the ones that
-- take no sample): plain, ljprof `-jprof=Gi60000`, jit.p `-jp=Gi60000`,
-- LuaJIT's profiling mode alone (bench/probe.lua's LJPROF_BENCH_VMPROF),
-- ljprof with inline=exact (the same mode, turned on by ljprof).
package.path = "bench/?.lua;" .. package.path
local proc = require("lib.proc")
local stat = require("lib.stat")

local WORKLOADS = {"fib", "nbody", "spectralnorm", "mandelbrot", "binarytrees", "strings",
                   "tablechurn", "json", "coroutines", "richards", "mixed", "luacheck"}
local opt = require("lib.args").parse(arg, {
  ["--seeds"] = "number", ["--workloads"] = "list", ["--jobs"] = "number",
  ["--build"] = "string", ["--out"] = "string",
}, "icount")
opt.seeds = opt.seeds or 3
opt.jobs = opt.jobs or tonumber(proc.sh("nproc")) or 2
opt.build = opt.build or os.getenv("LJPROF_BUILD") or "build"
opt.out = opt.out or "docs/instructions.md"
opt.workloads = opt.workloads or WORKLOADS
for _, tool in ipairs({"valgrind", "setarch", "cc"}) do
  if proc.sh("command -v " .. tool) == "" then
    io.stderr:write("icount: ", tool, " is not installed (apt-get install valgrind util-linux gcc)\n")
    os.exit(2)
  end
end

local ROOT = proc.sh("pwd")
local TMP = proc.sh("mktemp -d ${TMPDIR:-/tmp}/ljprof-icount.XXXXXX")
local function cleanup() os.execute("rm -rf " .. proc.shellquote(TMP)) end
local SHIM = TMP .. "/detseed.so"
if not os.execute("cc -O2 -shared -fPIC -o " .. SHIM .. " bench/detseed.c -ldl") then
  cleanup()
  error("icount: cannot compile bench/detseed.c")
end

-- name, label, extra arguments before the script, extra environment
local CONFIGS = {
  {"plain", "plain `luajit`", "", ""},
  {"ljprof", "ljprof `-jprof=Gi60000`", "-jprof=Gi60000," .. TMP .. "/out-%s.txt", ""},
  {"jitp", "jit.p `-jp=Gi60000`", "-jp=Gi60000," .. TMP .. "/out-%s.txt", ""},
  {"mode", "LuaJIT's profiling mode alone", "", "LJPROF_BENCH_VMPROF=f"},
  {"exact", "ljprof `-jprof=Gi60000/inline=exact`",
   "-jprof=Gi60000/inline=exact," .. TMP .. "/out-%s.txt", ""},
}

-- One shell command per run, printing "name workload seed count".
local jobs = {}
for _, w in ipairs(opt.workloads) do
  for s = 1, opt.seeds do
    for _, c in ipairs(CONFIGS) do
      local id = string.format("%s-%s-%d", c[1], w, s)
      -- seed s also gets its own heap layout (bench/probe.lua's
      -- LJPROF_BENCH_LAYOUT, as bench/run's round s)
      local env = string.format("LUA_PATH=%s LUA_CPATH=%s LJPROF_BENCH_SEED=%d LJPROF_BENCH_LAYOUT=%d " ..
        "LD_PRELOAD=%s %s", proc.shellquote(ROOT .. "/?.lua;" .. ROOT .. "/jit/?.lua;;"),
        proc.shellquote(ROOT .. "/" .. opt.build .. "/lib?.so;;"), s, (389 * s) % 1001, SHIM, c[4])
      jobs[#jobs + 1] = string.format(
        "env %s setarch -R valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null " ..
        "luajit -lbench.probe %s bench/workloads/%s.lua 2>&1 >/dev/null | " ..
        "awk '/I *refs/ {gsub(\",\", \"\", $NF); print \"%s %s %d \" $NF}'",
        env, c[3]:format(id), w, c[1], w, s)
    end
  end
end
local t0 = proc.now()
io.stderr:write(string.format("icount: %d runs under valgrind, %d at a time\n", #jobs, opt.jobs))
local p = assert(io.popen(proc.parallel(jobs, TMP, opt.jobs)))
local counts = {}
local n = 0
for line in p:lines() do
  local c, w, s, ir = line:match("^(%S+) (%S+) (%d+) (%d+)$")
  if c then
    counts[w] = counts[w] or {}
    counts[w][c] = counts[w][c] or {}
    counts[w][c][tonumber(s)] = tonumber(ir)
    n = n + 1
    io.stderr:write(string.format("\r  %d/%d", n, #jobs))
  end
end
p:close()
io.stderr:write("\n")
local elapsed = proc.now() - t0
cleanup()

-- -- Report ---------------------------------------------------------------

local L = {}
local function out(s) L[#L + 1] = s or "" end
out("# ljprof fixed costs by instruction count")
out()
out("<!-- Generated by bench/icount.lua; do not edit by hand. -->")
out()
out(string.format("Date: %s; %d of %d runs gave a count (a cell with fewer seeds says [n=...]), " ..
  "%.0f s; ljprof at commit %s; %s.", os.date("!%Y-%m-%d %H:%M UTC"), n, #jobs, elapsed,
  proc.sh("git rev-parse --short HEAD"), proc.sh("luajit -v")))
out()
out("Instructions executed by the whole process (valgrind's cachegrind, `I refs`), with LuaJIT's " ..
  "random seed fixed (bench/detseed.c) and address randomisation off (`setarch -R`), so each " ..
  "run repeats exactly; seeds 1.." .. opt.seeds .. " per configuration, seed s with the heap " ..
  "layout of bench/run's round s (`LJPROF_BENCH_LAYOUT`). The profilers start with a " ..
  "60 s interval and take no sample: what is measured is their fixed cost (loading, starting, " ..
  "writing an empty report at exit; ljprof follows no trace event) and any change they make to the " ..
  "code LuaJIT compiles. A seed and a layout change which traces a workload gets (trace " ..
  "aborts are penalised at random; hot counters are shared by bytecode address): a workload " ..
  "whose counts spread over the seeds has several possible " ..
  "compiled programs, and a profiler that moves its share among them moves its count by far " ..
  "more than its own instructions. Each cell: median over the seeds, ratio to the plain " ..
  "median − 1, and in brackets the range of the seeds' ratios.")
out()
local head, sep = {"workload", "plain (G instructions, range)"}, {"---", "---"}
for k = 2, #CONFIGS do head[#head + 1] = CONFIGS[k][2]; sep[#sep + 1] = "---" end
out("| " .. table.concat(head, " | ") .. " |")
out("|" .. table.concat(sep, "|") .. "|")
for _, w in ipairs(opt.workloads) do
  local cw = counts[w] or {}
  local plain = {}
  for _, v in pairs(cw.plain or {}) do plain[#plain + 1] = v end
  if #plain > 0 then
    local pm = stat.median(plain)
    local lo, hi = stat.minmax(plain)
    local function seeds(k) return k < opt.seeds and string.format(" [n=%d]", k) or "" end
    local cells = {w, string.format("%.3f (%.3f-%.3f)%s", pm / 1e9, lo / 1e9, hi / 1e9, seeds(#plain))}
    for k = 2, #CONFIGS do
      local v = {}
      for _, x in pairs(cw[CONFIGS[k][1]] or {}) do v[#v + 1] = x end
      if #v == 0 then
        cells[#cells + 1] = "(no data)"
      else
        local a, b = stat.minmax(v)
        cells[#cells + 1] = string.format("%+.2f%% [%+.1f%%, %+.1f%%]%s", (stat.median(v) / pm - 1) * 100,
          (a / pm - 1) * 100, (b / pm - 1) * 100, seeds(#v))
      end
    end
    out("| " .. table.concat(cells, " | ") .. " |")
  end
end
out()
local report = table.concat(L, "\n")
print(report)
local f = assert(io.open(opt.out, "w"))
f:write(report)
f:close()
io.stderr:write("icount: wrote " .. opt.out .. "\n")
