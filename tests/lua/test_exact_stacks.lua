-- Exact stacks (issue "Exact stacks"): every call path a profile shows
-- must be one the program can have. The Lua part of a sample is read at
-- the next safe point; in compiled code that is the next trace exit, often
-- after the sampled function returned, so a sample can show a path that
-- never happens (main;phys;ai where phys never calls ai).
--
-- Each workload below declares its static call graph (the caller;callee
-- edges among its own named Lua functions and the known C functions it
-- calls). It runs in a child luajit (the JIT in its normal state) under
-- ljprof (record + summary, key "fZ;") and under LuaJIT's jit.profile
-- ("fi1", dumpstack "fZ;" per callback) for comparison. A sample is wrong
-- when its path, reduced to the workload's own frames, holds an edge the
-- program never has. Frames that are not the workload's (the chunk, the
-- harness, C functions not declared, native frames appended by ljprof)
-- are dropped before adjacent pairs are taken.
--
-- Asserted: ljprof's wrong share <= 0.5% in every run, >= 300 samples per
-- run, and for the game frame loop: ai holds the most self samples and
-- each subsystem's inclusive share of main's samples is within 3 points
-- of its share of main's time on the clock sampled (os.clock, CPU time,
-- for cpu and itimer; CLOCK_MONOTONIC for wall, which also counts the
-- time the process waits for a CPU on a loaded machine) (or 4 standard
-- errors of the
-- independent draws, the signals, if larger: a cpu-clock or itimer signal
-- stands for ~4 ticks here, so those runs have ~1000 draws, the wall runs
-- ~4000). Clocks: cpu, wall, itimer; 1 ms; native
-- frames on and off. jit.p numbers are printed, never asserted.
-- Everything measured is printed (one line per workload/clock/native).
-- VERBOSE=1 prints the most frequent wrong paths of each run; ONLY=name
-- runs one workload; DUMP=1 prints each child's most frequent stacks (and
-- runs wall/native=on only). Stand-alone: LUA_PATH, LUA_CPATH and
-- LJPROF_CTEST as tests/meson.build sets them.
local t = require("t")

local LUAJIT = arg and arg[-1] or "luajit"
local CTEST = assert(os.getenv("LJPROF_CTEST"), "LJPROF_CTEST not set (run from meson)")
local VERBOSE = os.getenv("VERBOSE")
local MAX_WRONG = 0.5     -- percent of samples
local MIN_SAMPLES = 300
local SHARE_TOL = 3       -- percentage points (frame loop subsystems)

---------------------------------------------------------------------------
-- The checker: pure functions, self-checked below on hand-made stacks.

-- A workload's graph: {nodes = set, edges = set of "caller;callee"}.
local function graph(edges)
  local g = {nodes = {}, edges = {}}
  for _, e in ipairs(edges) do
    local a, b = e[1], e[2]
    g.nodes[a], g.nodes[b] = true, true
    g.edges[a .. ";" .. b] = true
  end
  return g
end

local function split(stack)
  local out = {}
  for f in stack:gmatch("[^;]+") do out[#out + 1] = f end
  return out
end

-- The stack's frames that are the workload's own (outermost first).
local function own_frames(g, stack)
  local out = {}
  for _, f in ipairs(split(stack)) do
    if g.nodes[f] then out[#out + 1] = f end
  end
  return out
end

-- The first edge of the stack the program never has, or nil.
local function bad_edge(g, stack)
  local fr = own_frames(g, stack)
  for i = 2, #fr do
    local e = fr[i - 1] .. ";" .. fr[i]
    if not g.edges[e] then return e end
  end
  return nil
end

-- {total, wrong, pct, bad = {edge -> count}, worst = {{stack, count}}}
local function measure(g, entries)
  local r = {total = 0, wrong = 0, bad = {}, worst = {}}
  for _, e in ipairs(entries) do
    r.total = r.total + e.count
    local b = bad_edge(g, e.stack)
    if b then
      r.wrong = r.wrong + e.count
      r.bad[b] = (r.bad[b] or 0) + e.count
      r.worst[#r.worst + 1] = e
    end
  end
  table.sort(r.worst, function(a, b) return a.count > b.count end)
  r.pct = r.total > 0 and 100 * r.wrong / r.total or 0
  return r
end

-- Self samples per Lua function of the workload (lua = set of names):
-- the innermost of the workload's Lua frames.
local function self_counts(lua, entries)
  local c = {}
  for _, e in ipairs(entries) do
    local fr, leaf = split(e.stack), nil
    for i = #fr, 1, -1 do
      if lua[fr[i]] then leaf = fr[i] break end
    end
    if leaf then c[leaf] = (c[leaf] or 0) + e.count end
  end
  return c
end

-- Samples whose path holds frame name (anywhere).
local function inclusive(name, entries)
  local n = 0
  for _, e in ipairs(entries) do
    for _, f in ipairs(split(e.stack)) do
      if f == name then n = n + e.count break end
    end
  end
  return n
end

t.case("checker self-check on hand-made stacks", function()
  local g = graph({{"main", "ai"}, {"main", "phys"}, {"main", "render"},
                   {"render", "string.format"}, {"rec", "rec"}, {"main", "rec"}})
  t.eq(bad_edge(g, "main;ai"), nil, "allowed edge")
  t.eq(bad_edge(g, "prog.lua:0;main;ai"), nil, "foreign outer frame dropped")
  t.eq(bad_edge(g, "main;phys;ai"), "phys;ai", "phys never calls ai")
  t.eq(bad_edge(g, "main;render;string.format;ljpt_inner;libc.so+0x10"), nil,
    "native frames on top dropped")
  t.eq(bad_edge(g, "main;string.format"), "main;string.format", "C function without its wrapper")
  t.eq(bad_edge(g, "main;rec;rec;rec;rec"), nil, "recursion")
  t.eq(bad_edge(g, "main;rec;rec;ai"), "rec;ai", "callee of the wrong caller")
  t.eq(bad_edge(g, "ai;main"), "ai;main", "reversed edge")
  t.eq(bad_edge(g, "main;[builtin#12];ai"), nil, "undeclared C frame between: dropped")
  t.eq(bad_edge(g, "ai"), nil, "one frame has no edge")
  t.eq(bad_edge(g, ""), nil, "empty stack")
  local m = measure(g, {{stack = "x;main;ai", count = 3}, {stack = "main;phys;ai", count = 1},
                        {stack = "main;ai;render", count = 4}, {stack = "main", count = 2}})
  t.eq(m.total, 10, "total")
  t.eq(m.wrong, 5, "wrong")
  t.eq(m.pct, 50, "share")
  t.eq(m.bad["phys;ai"], 1, "per edge")
  t.eq(m.bad["ai;render"], 4, "per edge")
  local s = self_counts({main = true, ai = true, phys = true, render = true},
    {{stack = "main;ai", count = 3}, {stack = "main;render;string.format;ljpt_inner", count = 2},
     {stack = "main", count = 1}, {stack = "other", count = 7}})
  t.eq(s.ai, 3, "self ai")
  t.eq(s.render, 2, "self render through a C leaf")
  t.eq(s.main, 1, "self main")
  t.eq(inclusive("render", {{stack = "main;render;x", count = 2}, {stack = "main", count = 1}}), 2,
    "inclusive")
end)

---------------------------------------------------------------------------
-- The child: HEAD, then the workload (which defines `local function
-- main(dur)` returning a truth table or nil, and `NAMES` = {name =
-- function} for the functions a frame may show as "chunk:line"), then
-- TAIL, which profiles main(DUR) and prints "S\t<count>\t<stack>" lines
-- and "T\t<name>\t<seconds>" truth lines.

local HEAD = [[
local MODE, CLOCK, NATIVE, DUR, CTEST = arg[1], arg[2], arg[3], tonumber(arg[4]), arg[5]
-- The truth's clock: the time the profiler samples (CPU time, or wall
-- time for the wall clock: a wait for a CPU on a loaded machine is then
-- in both).
local clock = os.clock
if CLOCK == "wall" then
  local ffi = require("ffi")
  ffi.cdef("struct ljp_test_ts { int64_t s, ns; }; int clock_gettime(int, struct ljp_test_ts *);")
  local ts, C = ffi.new("struct ljp_test_ts"), ffi.C
  clock = function()
    C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
    return tonumber(ts.s) + tonumber(ts.ns) * 1e-9
  end
end
]]

local TAIL = [[
-- Frames shown as "chunk:line" (no name known at the call site, e.g. a
-- coroutine's body or a function pcall called) get the workload's name.
local byline = {}
for name, fn in pairs(NAMES) do byline[debug.getinfo(fn, "S").linedefined] = name end
local function rename(stack)
  return (stack:gsub("[^;]+", function(f)
    local l = f:match("^[^;:]*%.lua:(%d+)$")
    return l and byline[tonumber(l)] or f
  end))
end

local counts, truth = {}, nil
if MODE == "ljprof" then
  local ljprof = require("ljprof")
  ljprof.record({clock = CLOCK, interval = 1, native = NATIVE == "on", fmt = "fZ;", depth = -100})
  truth = main(DUR)
  ljprof.stop()
  -- Independent draws: a cpu-clock signal stands for ~4 ticks here.
  if type(truth) == "table" then truth.signals = ljprof.stats().signals end
  for _, e in ipairs(ljprof.summary()) do
    local k = rename(e.stack)
    counts[k] = (counts[k] or 0) + e.count
  end
else
  local profile = require("jit.profile")
  local raw = {}
  profile.start("fi1", function(thread, samples)
    local k = profile.dumpstack(thread, "fZ;", -100)
    raw[k] = (raw[k] or 0) + samples
  end)
  truth = main(DUR)
  profile.stop()
  for k, n in pairs(raw) do
    local s = rename((k:gsub(";$", "")))
    counts[s] = (counts[s] or 0) + n
  end
end
for k, n in pairs(counts) do io.write("S\t", n, "\t", k, "\n") end
for k, v in pairs(truth or {}) do io.write("T\t", k, "\t", string.format("%.6f", v), "\n") end
]]

local W = {}

-- 1. Game frame loop: ai (math.sin/cos in a compiled loop), phys (small
-- tables allocated in a compiled loop), render (string.format and
-- table.concat), called in turn by a compiled frame loop; each whole call
-- timed with the sampled clock (the truth: HEAD's clock).
W[#W + 1] = {
  name = "game",
  lua = {"main", "ai", "phys", "render"},
  edges = {{"main", "ai"}, {"main", "phys"}, {"main", "render"},
           {"ai", "math.sin"}, {"ai", "math.cos"},
           {"render", "string.format"}, {"render", "table.concat"}},
  dur = 4,
  src = [[
local sin, cos, fmt, concat = math.sin, math.cos, string.format, table.concat
local function ai(n)
  local s = 0
  for i = 1, n do s = s + sin(i * 0.001) * cos(i * 0.0007) end
  return s
end
local pool = {}
local function phys(n)
  local e = 0
  for i = 1, n do
    local b = {x = i, y = i * 0.5, vx = 1, vy = -1}
    pool[i % 256 + 1] = b
    e = e + b.x * b.vx + b.y * b.vy
  end
  return e
end
local function render(n)
  local parts = {}
  for i = 1, n do parts[i] = fmt("%d:%.1f", i, i * 0.25) end
  return #concat(parts, ",")
end
local function main(dur)
  local ta, tp, tr, frames = 0, 0, 0, 0
  local start = clock()
  local now = start
  while now - start < dur or frames < 1500 do
    local t0 = clock()
    ai(8000)
    local t1 = clock()
    phys(1200)
    local t2 = clock()
    render(120)
    now = clock()
    ta, tp, tr = ta + (t1 - t0), tp + (t2 - t1), tr + (now - t2)
    frames = frames + 1
  end
  return {ai = ta, phys = tp, render = tr, main = now - start, frames = frames}
end
NAMES = {main = main, ai = ai, phys = phys, render = render}
]]}

-- 2. C library calls in compiled loops, from two functions called in turn.
W[#W + 1] = {
  name = "clib",
  lua = {"main", "a", "b"},
  edges = {{"main", "a"}, {"main", "b"},
           {"a", "math.sin"}, {"a", "string.rep"},
           {"b", "string.byte"}, {"b", "string.format"}},
  dur = 1.5,
  src = [[
local function a(n)
  local s = 0
  for i = 1, n do s = s + math.sin(i) + #string.rep("ab", 20 + i % 8) end
  return s
end
local function b(n)
  local s, str = 0, "hello, world"
  for i = 1, n do s = s + string.byte(str, i % 12 + 1) + #string.format("%d/%d", i, s % 97) end
  return s
end
local function main(dur)
  local start = clock()
  while clock() - start < dur do a(2000) b(2000) end
end
NAMES = {main = main, a = a, b = b}
]]}

-- 3. Allocation and GC in compiled loops: two sizes.
W[#W + 1] = {
  name = "alloc",
  lua = {"main", "small", "big"},
  edges = {{"main", "small"}, {"main", "big"}},
  dur = 1.5,
  src = [[
local keep = {}
local function small(n)
  for i = 1, n do keep[i % 512 + 1] = {i, i + 1} end
  return #keep
end
local function big(n)
  for i = 1, n do
    local x = {i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i}
    keep[i % 512 + 1] = x
  end
  return #keep
end
local function main(dur)
  local start = clock()
  while clock() - start < dur do small(20000) big(6000) end
end
NAMES = {main = main, small = small, big = big}
]]}

-- 4. A C module (ljp_ctest.run: run -> ljpt_middle -> ljpt_inner) behind
-- small Lua wrappers: main never calls ljp_ctest.run itself.
W[#W + 1] = {
  name = "cmodule",
  lua = {"main", "caller", "caller2", "mid2"},
  edges = {{"main", "caller"}, {"main", "caller2"}, {"caller", "ljp_ctest.run"},
           {"caller2", "mid2"}, {"mid2", "ljp_ctest.run"}},
  dur = 1.5,
  src = [[
local mod = package.loadlib(CTEST, "luaopen_ljp_ctest")()
package.loaded.ljp_ctest = mod  -- so that its functions are named
local function caller(n) local r = mod.run(n); return r end
local function mid2(n) local r = mod.run(n); return r + 1 end
local function caller2(n) local r = mid2(n); return r * 2 end
local function main(dur)
  local start, s = clock(), 0
  while clock() - start < dur do
    for i = 1, 20 do s = s + caller(3000 + i) + caller2(2000 + i) end
  end
  return nil
end
NAMES = {main = main, caller = caller, caller2 = caller2, mid2 = mid2}
]]}

-- 5. Deep recursion (depth 50) alternating with a shallow function.
W[#W + 1] = {
  name = "recursion",
  lua = {"main", "rec", "shallow"},
  edges = {{"main", "rec"}, {"rec", "rec"}, {"main", "shallow"}},
  dur = 1.5,
  src = [[
local function rec(d, n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  if d == 0 then return s end
  return rec(d - 1, n) + s
end
local function shallow(n)
  local s = 0
  for i = 1, n do s = s + i % 5 end
  return s
end
local function main(dur)
  local start, s = clock(), 0
  while clock() - start < dur do s = s + rec(50, 400) + shallow(20000) end
end
NAMES = {main = main, rec = rec, shallow = shallow}
]]}

-- 6. Coroutines: a producer (its own thread: its stack starts at its
-- body) and a consumer, each with a helper of its own.
W[#W + 1] = {
  name = "coroutine",
  lua = {"main", "consumer", "cwork", "producer", "pwork"},
  -- (a sample shows the running thread's stack; consumer;producer is
  -- allowed too, for a profiler that shows the resumer's frames below)
  edges = {{"main", "consumer"}, {"consumer", "cwork"}, {"producer", "pwork"},
           {"consumer", "producer"}},
  dur = 1.5,
  src = [[
local function pwork(n)
  local s = 0
  for i = 1, n do s = s + (i * 3) % 11 end
  return s
end
local function producer()
  local k = 0
  while true do k = k + 1; coroutine.yield(pwork(2000 + k % 3)) end
end
local function cwork(n, v)
  local s = v
  for i = 1, n do s = s + i % 13 end
  return s
end
local function consumer(gen, n)
  local s = 0
  for _ = 1, n do s = s + cwork(2000, gen()) end
  return s
end
local function main(dur)
  local gen = coroutine.wrap(producer)
  local start, s = clock(), 0
  while clock() - start < dur do s = s + consumer(gen, 100) end
end
NAMES = {main = main, consumer = consumer, cwork = cwork, producer = producer, pwork = pwork}
]]}

-- 7. Metamethods (__index, __add functions doing work) from a compiled loop.
W[#W + 1] = {
  name = "metamethod",
  lua = {"main", "driver", "index_mm", "add_mm", "plain"},
  edges = {{"main", "driver"}, {"main", "plain"},
           {"driver", "index_mm"}, {"driver", "add_mm"},
           {"driver", "__index"}, {"driver", "__add"}},
  dur = 1.5,
  src = [[
local V = {}
local function index_mm(t, k)
  local s = 0
  for i = 1, 60 do s = s + (i * k) % 7 end
  return s
end
local function add_mm(a, b)
  local s = 0
  for i = 1, 60 do s = s + (i + a.v) % 5 end
  return setmetatable({v = a.v + b.v + s * 0}, V)
end
V.__index, V.__add = index_mm, add_mm
local function driver(n)
  local o, p, s = setmetatable({v = 1}, V), setmetatable({v = 2}, V), 0
  for i = 1, n do
    s = s + o[i % 17]
    local q = o + p
    s = s + q.v
  end
  return s
end
local function plain(n)
  local s = 0
  for i = 1, n do s = s + i % 9 end
  return s
end
local function main(dur)
  local start, s = clock(), 0
  while clock() - start < dur do s = s + driver(2000) + plain(100000) end
end
NAMES = {main = main, driver = driver, index_mm = index_mm, add_mm = add_mm, plain = plain}
]]}

-- 8. pcall/error: a function that errors inside pcall from a compiled loop.
W[#W + 1] = {
  name = "pcall",
  lua = {"main", "driver", "thrower", "after"},
  edges = {{"main", "driver"}, {"driver", "thrower"}, {"driver", "after"},
           {"thrower", "error"}},
  dur = 1.5,
  src = [[
local function thrower(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  if s >= 0 then error("boom") end
  return s
end
local function after(n)
  local s = 0
  for i = 1, n do s = s + i % 3 end
  return s
end
local function driver(n)
  local bad = 0
  for i = 1, n do
    local ok = pcall(thrower, 3000 + i % 5)
    if not ok then bad = bad + 1 end
    bad = bad + after(2000) * 0
  end
  return bad
end
local function main(dur)
  local start, s = clock(), 0
  while clock() - start < dur do s = s + driver(50) end
end
NAMES = {main = main, driver = driver, thrower = thrower, after = after}
]]}

-- Run workload w in a child: mode "ljprof" (clock, native) or "jitp".
-- The itimer clock (process CPU time, SIGPROF) and jit.p tick on kernel
-- ticks (250 Hz here, not 1 kHz): those runs are longer.
local function run_child(w, mode, clock, native)
  local dur = (clock == "itimer" or mode == "jitp") and math.max(w.dur, 2.5) or w.dur
  local base = os.tmpname()
  local script = base .. ".lua"
  t.write(script, HEAD .. w.src .. TAIL)
  local cmd = string.format("%s %s %s %s %s %s %s 2>&1", LUAJIT, script, mode,
    clock or "-", native or "-", tostring(dur), CTEST)
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  os.remove(script)
  os.remove(base)
  local entries, truth = {}, {}
  for line in out:gmatch("[^\n]+") do
    local n, s = line:match("^S\t(%d+)\t(.*)$")
    if n then
      entries[#entries + 1] = {count = tonumber(n), stack = s}
    else
      local k, v = line:match("^T\t([^\t]+)\t(%S+)$")
      if k then truth[k] = tonumber(v) else io.stderr:write("  child: ", line, "\n") end
    end
  end
  if os.getenv("DUMP") then
    table.sort(entries, function(a, b) return a.count > b.count end)
    print(string.format("    %s %s %s %s: most frequent stacks", w.name, mode, clock or "", native or ""))
    for i = 1, math.min(8, #entries) do
      print(string.format("      %6d  %s", entries[i].count, entries[i].stack))
    end
  end
  return entries, truth
end

local function show_worst(r, k)
  for i = 1, math.min(k, #r.worst) do
    print(string.format("      %6d  %s", r.worst[i].count, r.worst[i].stack))
  end
end

local function top_edges(r)
  local l = {}
  for e, n in pairs(r.bad) do l[#l + 1] = {e, n} end
  table.sort(l, function(a, b) return a[2] > b[2] end)
  local out = {}
  for i = 1, math.min(3, #l) do out[#out + 1] = l[i][1] .. "=" .. l[i][2] end
  return table.concat(out, " ")
end

local RUNS = os.getenv("DUMP") and {{"wall", "on"}} or {{"cpu", "on"}, {"cpu", "off"}, {"wall", "on"}, {"wall", "off"},
              {"itimer", "on"}, {"itimer", "off"}}

local results = {}

print(string.format("%-11s %-6s %-6s %7s %9s %9s %8s  %s", "workload", "clock", "native",
  "samples", "wrong%", "jit.p%", "jit.p n", "ljprof's most frequent wrong edges"))

local ONLY = os.getenv("ONLY")  -- one workload by name (development)
for _, w in ipairs(W) do
  if ONLY and w.name ~= ONLY then goto next end
  local g = graph(w.edges)
  local jp_entries, jp_truth = run_child(w, "jitp")
  local jp = measure(g, jp_entries)
  if w.name == "game" then
    results[#results + 1] = {w = w, clock = "jit.p", native = "-", r = jp,
                             entries = jp_entries, truth = jp_truth, jitp = true}
  end
  if VERBOSE and jp.wrong > 0 then
    print(string.format("    jit.p %s: %d of %d wrong", w.name, jp.wrong, jp.total))
    show_worst(jp, 5)
  end
  for _, rc in ipairs(RUNS) do
    local clock, native = rc[1], rc[2]
    t.case(string.format("%s %s native=%s: no impossible edge", w.name, clock, native), function()
      local entries, truth = run_child(w, "ljprof", clock, native)
      local r = measure(g, entries)
      results[#results + 1] = {w = w, clock = clock, native = native, r = r, jp = jp,
                               entries = entries, truth = truth}
      print(string.format("%-11s %-6s %-6s %7d %8.2f%% %8.2f%% %8d  %s", w.name, clock, native,
        r.total, r.pct, jp.pct, jp.total, top_edges(r)))
      if VERBOSE and r.wrong > 0 then show_worst(r, 5) end
      t.ok(r.total >= MIN_SAMPLES, string.format("%s %s native=%s: enough samples: %d",
        w.name, clock, native, r.total))
      t.ok(r.pct <= MAX_WRONG, string.format(
        "%s %s native=%s: %.2f%% of %d samples on an impossible path (max %.1f%%): %s",
        w.name, clock, native, r.pct, r.total, MAX_WRONG, top_edges(r)))
    end)
  end
  ::next::
end

-- The game frame loop: ai the hottest function by self time; each
-- subsystem's inclusive share of main's samples against its os.clock
-- share of main's time.
print(string.format("\n%-6s %-6s %6s | %-20s | %-20s | %-20s | %s", "clock", "native", "frames",
  "ai meas/truth", "phys meas/truth", "render meas/truth", "top self"))
for _, res in ipairs(results) do
  if res.w.name == "game" and res.jitp then
    -- jit.p on the same workload, for comparison (not asserted)
    local tr, all = res.truth, inclusive("main", res.entries)
    local cells = {}
    for _, sub in ipairs({"ai", "phys", "render"}) do
      cells[#cells + 1] = string.format("%6.1f%% / %6.1f%%",
        all > 0 and 100 * inclusive(sub, res.entries) / all or 0,
        tr.main and 100 * tr[sub] / tr.main or 0)
    end
    print(string.format("%-6s %-6s %6d | %-20s | %-20s | %-20s | (not asserted)", "jit.p", "-",
      tr.frames or 0, cells[1], cells[2], cells[3]))
  elseif res.w.name == "game" then
    t.case(string.format("game %s native=%s: ai hottest, shares near truth", res.clock, res.native),
      function()
        local lua = {}
        for _, n in ipairs(res.w.lua) do lua[n] = true end
        local self = self_counts(lua, res.entries)
        local top, topn = nil, -1
        for n, c in pairs(self) do if c > topn then top, topn = n, c end end
        local tr, all = res.truth, inclusive("main", res.entries)
        local cells, checks = {}, {}
        for _, sub in ipairs({"ai", "phys", "render"}) do
          local meas = all > 0 and 100 * inclusive(sub, res.entries) / all or 0
          local truth = tr.main and 100 * tr[sub] / tr.main or 0
          cells[#cells + 1] = string.format("%6.1f%% / %6.1f%%", meas, truth)
          checks[#checks + 1] = {sub, meas, truth}
        end
        print(string.format("%-6s %-6s %6d | %-20s | %-20s | %-20s | %s (%d)", res.clock, res.native,
          tr.frames or 0, cells[1], cells[2], cells[3], tostring(top), topn))
        t.ok((tr.frames or 0) >= 1500, "frames: " .. tostring(tr.frames))
        t.eq(top, "ai", "hottest function by self samples")
        for _, c in ipairs(checks) do
          -- 3 points, or 4 standard errors of a share of `all` samples
          -- when there are too few for 3 points to be 4 of them (itimer)
          -- (independent samples: the signals, fewer than the weighted
          -- ticks on the tick-limited cpu clock)
          local p = c[3] / 100
          local draws = math.min(all, tr.signals or all)
          local tol = math.max(SHARE_TOL, 400 * math.sqrt(p * (1 - p) / math.max(draws, 1)))
          t.ok(math.abs(c[2] - c[3]) <= tol, string.format(
            "%s %s native=%s: %s share %.1f%% vs truth %.1f%% (tolerance %.1f points, %d samples, %d signals)",
            "game", res.clock, res.native, c[1], c[2], c[3], tol, all, draws))
        end
      end)
  end
end

t.done()
