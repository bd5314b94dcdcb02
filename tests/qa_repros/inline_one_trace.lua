-- QA repro (issue 26, inline=recorded): a hot loop whose whole run is one call of one
-- trace gets no inlined frames at all: every sample is charged to update(), none to
-- the three helpers LuaJIT inlined into it.
--
--   luajit -jprof=f tests/qa_repros/inline_one_trace.lua        # ljprof: 100% update
--   luajit -jp=f    tests/qa_repros/inline_one_trace.lua        # built-in: ~48/24/19/9
--   luajit tests/qa_repros/inline_one_trace.lua record          # record(), prints stats
--
-- Truth (differential timing, each helper's chain removed in turn, 5 runs each):
-- heavy 47.8%, update's own 24.0%, medium 19.1%, light 9.0%.
-- Measured 2026-11-29: -jprof=f 5/5 runs 100% update (TVD 0.76); -jp=f TVD
-- 0.05-0.17. With update(10000) called in an outer loop instead ("outer" below),
-- -jprof=G at the default interval gave 100% update in 3 of 10 runs; at i1 10/10
-- good (TVD 0.010-0.066, -jp 0.028-0.058). With update(2e5) + a jit.off'd 50 ms
-- spin before the long call ("warm"), every run gets the helpers.
local function chain(n, v)
  local t = {}
  for _ = 1, n do t[#t + 1] = ("  %s = %s*1.0000001 + 1e-9"):format(v, v) end
  return table.concat(t, "\n")
end
local shape = arg and (arg[1] == "record" and arg[2] or arg[1]) or "one"
local src = ([[
local function heavy(x)
%s
  return x
end
local function medium(x)
%s
  return x
end
local function light(x)
%s
  return x
end
local function update(n)
  local a = 1.0
  for i = 1, n do
    a = heavy(a)
    a = medium(a)
    a = light(a)
    local d = a
%s
    a = d
  end
  return a
end
local shape = ...
local N = 1e7
if shape == "warm" then
  update(2e5)
  local function spin() local t = os.clock() while os.clock() - t < 0.05 do end end
  jit.off(spin) spin()
end
if shape == "outer" then
  local r = 0
  for k = 1, N / 10000 do r = r + update(10000) end
  return r
end
local r = update(N)
return r
]]):format(chain(20, "x"), chain(8, "x"), chain(4, "x"), chain(10, "d"))
local fn = assert(loadstring(src, "@inline_work.lua"))
if arg and arg[1] == "record" then
  local prof = require("ljprof")
  prof.record({clock = "cpu", interval = 1})
  fn(shape)
  prof.stop()
  local s = prof.stats()
  print("inline_samples", s.inline_samples, "record_events", s.record_events,
        "record_traces", s.record_traces, "ticks", s.ticks)
  for _, e in ipairs(prof.summary()) do print(e.count, e.vmstate, e.stack) end
  os.exit(s.inline_samples > 0 and 0 or 1)
else
  fn(shape)
end
