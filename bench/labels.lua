-- What labels cost (docs/performance.md; docs/decisions.md, "Labels: a
-- 24-bit tag, not a 128-bit key"):
--   1. a push and pop pair on the hot path, by set id (label(id),
--      label.push/pop), nested (a merge remembered), by table, and a
--      zone's pair for reference; compiled (JIT on) and interpreted;
--   2. the signal handler with a label set pushed against without: its
--      own time per signal (stats().handler_ns / signals) at 5 kHz wall,
--      ROUNDS alternating runs, medians;
--   3. aggregation per record (stats().aggregate_ns / aggregated), where
--      a sample with labels takes its (zone, label set) tag.
-- Run from the source tree after a build:
--   LUA_PATH="$PWD/?.lua;$PWD/jit/?.lua;;" LUA_CPATH="$PWD/build/lib?.so;;" \
--     luajit bench/labels.lua [ROUNDS]
local ljprof = require("ljprof")
local label, zone = ljprof.label, ljprof.zone

local ROUNDS = tonumber(arg and arg[1]) or 15

local function median(t)
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

-- 1. push and pop pairs
local N = 10000000
local function pair_cost(f, n)
  local best = math.huge
  for _ = 1, 5 do
    local t0 = os.clock()
    f(n)
    local dt = (os.clock() - t0) / n * 1e9
    if dt < best then best = dt end
  end
  return best
end
local API = label.set{endpoint = "/api"}
local T = {endpoint = "/api"}
local push, pop = label.push, label.pop
local cases = {
  {"empty loop", function(n) for _ = 1, n do end end},
  {"zone(\"AI\"); zone()", function(n) for _ = 1, n do zone("AI"); zone() end end},
  {"label(id); label()", function(n) for _ = 1, n do label(API); label() end end},
  {"label.push(id); label.pop()", function(n) for _ = 1, n do push(API); pop() end end},
  {"label(id); label() nested", function(n)
    label{region = "eu"}
    for _ = 1, n do label(API); label() end
    label()
  end},
  {"label(t); label() by table", function(n) for _ = 1, n do label(T); label() end end},
}
local on, off = {}, {}
for i, c in ipairs(cases) do on[i] = pair_cost(c[2], N) end
jit.off()
jit.flush()                    -- every case in the interpreter
for i, c in ipairs(cases) do off[i] = pair_cost(c[2], N / 20) end
jit.on()
print("push+pop pair, best of 5 (ns)        compiled  interpreted")
for i, c in ipairs(cases) do
  print(string.format("  %-34s %8.2f %12.2f", c[1], on[i], off[i]))
end

-- 2 and 3. handler and aggregation, with and without a set pushed.
jit.off()  -- interpreted: a safe point per tick, so each tick is a record
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function run(with)
  if with then label{endpoint = "/api", method = "GET"} end
  ljprof.record({clock = "wall", rate = 5000})
  work(30000000)
  ljprof.stop()
  if with then label() end
  local st = ljprof.stats()
  return st.handler_ns / math.max(1, st.signals), st.aggregate_ns / math.max(1, st.aggregated),
         st.signals
end
local h0, h1, a0, a1, n0, n1 = {}, {}, {}, {}, 0, 0
for _ = 1, ROUNDS do
  local h, a, n = run(false)
  h0[#h0 + 1], a0[#a0 + 1], n0 = h, a, n0 + n
  h, a, n = run(true)
  h1[#h1 + 1], a1[#a1 + 1], n1 = h, a, n1 + n
end
jit.on()
print(string.format("handler per signal, median of %d runs at 5 kHz wall (%d and %d signals):",
  ROUNDS, n0, n1))
print(string.format("  without labels %7.1f ns   with a set pushed %7.1f ns   (range %.0f-%.0f / %.0f-%.0f)",
  median(h0), median(h1), h0[1], h0[#h0], h1[1], h1[#h1]))
print(string.format("aggregation per record: without %6.1f ns   with %6.1f ns",
  median(a0), median(a1)))
