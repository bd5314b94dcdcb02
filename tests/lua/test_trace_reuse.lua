-- A trace's location text is made once per trace and kept with what ljprof
-- knows of it (luaframes.c trace_loc, ljp_trinfo.tloc): after jit.flush
-- the trace numbers are handed out again from 1, and a sample in the new
-- trace of a reused number must be reported at the new trace's start, not
-- at the old one's (the kept text goes with the trace, traces.c clears it
-- with the rest of its info when another trace has taken the number).
local t = require("t")
local ljprof = require("ljprof")

local SRC = debug.getinfo(1, "S").source:match("[^/@]+$")

local function loop_a(n)
  local s = 0
  for i = 1, n do s = s + i % 3 end
  return s
end

local function loop_b(n)
  local s = 0
  for i = 1, n do s = s + i % 5 end
  return s
end

local function run(fn, sec)
  local t0, s = os.clock(), 0
  while os.clock() - t0 < sec do s = s + fn(2e5) end
  return s
end

t.case("a reused trace number is reported at its new trace's start", function()
  local line_a = debug.getinfo(loop_a, "S").linedefined + 2
  local line_b = debug.getinfo(loop_b, "S").linedefined + 2
  jit.flush()
  ljprof.record({clock = "cpu", interval = 1, fmt = "fZ;"})
  run(loop_a, 0.4)
  jit.flush()
  run(loop_b, 0.4)
  ljprof.stop()
  local at = {}       -- trace number -> {start -> count}
  for _, e in ipairs(ljprof.traces()) do
    at[e.trace] = at[e.trace] or {}
    at[e.trace][e.start] = (at[e.trace][e.start] or 0) + e.count
  end
  local a, b = SRC .. ":" .. line_a, SRC .. ":" .. line_b
  local reused = false
  for tr, starts in pairs(at) do
    if starts[a] and starts[b] then reused = true end
  end
  local na, nb = 0, 0
  for _, starts in pairs(at) do
    na = na + (starts[a] or 0)
    nb = nb + (starts[b] or 0)
  end
  t.ok(na >= 100, "samples at loop_a's trace: " .. na)
  t.ok(nb >= 100, "samples at loop_b's trace: " .. nb)
  t.ok(reused, "one trace number started at both loops (the case)")
end)

os.exit(t.done())
