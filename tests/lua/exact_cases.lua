-- The exact-stacks workloads and their checker, shared by the Linux test
-- (tests/lua/test_exact_stacks.lua: every clock, native frames on and
-- off, jit.p for comparison) and the Windows one under Wine
-- (tests/windows/test_exact.lua: ljprof.dll in luajit.exe). Each
-- workload declares its static call graph; a sample whose path, reduced
-- to the workload's own frames, holds an edge the program never has is
-- impossible. The child script is HEAD .. w.src .. TAIL, run as
--   luajit script MODE CLOCK NATIVE DUR CTEST [INTERVAL_MS]
-- (MODE ljprof or jitp; INTERVAL_MS ljprof's interval, default 1).
local M = {}

---------------------------------------------------------------------------
-- The checker: pure functions, self-checked on hand-made stacks in
-- test_exact_stacks.lua.

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


---------------------------------------------------------------------------
-- The child: HEAD, then the workload (which defines `local function
-- main(dur)` returning a truth table or nil, and `NAMES` = {name =
-- function} for the functions a frame may show as "chunk:line"), then
-- TAIL, which profiles main(DUR) and prints "S\t<count>\t<stack>" lines
-- and "T\t<name>\t<seconds>" truth lines.

local HEAD = [[
local MODE, CLOCK, NATIVE, DUR, CTEST = arg[1], arg[2], arg[3], tonumber(arg[4]), arg[5]
local INTERVAL = tonumber(arg[6]) or 1  -- ms
-- The truth's clock: the time the profiler samples (CPU time, or wall
-- time for the wall clock: a wait for a CPU on a loaded machine is then
-- in both). On Windows os.clock (the C runtime's clock()) is wall time.
local clock = os.clock
if CLOCK == "wall" and jit.os ~= "Windows" then
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
  ljprof.record({clock = CLOCK, interval = INTERVAL, native = NATIVE == "on", fmt = "fZ;", depth = -100})
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


M.graph, M.split, M.own_frames, M.bad_edge = graph, split, own_frames, bad_edge
M.measure, M.self_counts, M.inclusive = measure, self_counts, inclusive
M.HEAD, M.TAIL, M.W = HEAD, TAIL, W
return M
