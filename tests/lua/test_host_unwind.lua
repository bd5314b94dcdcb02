-- Host detection while an error unwinds out of a coroutine (issue 27):
-- LuaJIT clears the coroutine's L->cframe while g->cur_L still names it,
-- and the unwinding runs outside the interpreter (lj_err.c, libgcc's
-- unwinder). The whole program is Lua, so no tick may be taken for a host
-- tick (stats host_ticks, the "[host]" frame), with native capture off
-- (where only the VM's own fields decide) and on, and in callback mode no
-- call is the host ticks' (dumpstack "[host]"). Before the main-thread
-- check (vmprobe.c, learn_mainth) every native-off and callback case
-- failed in each run.
local t = require("t")
local ljprof = require("ljprof")

local cwrap, ccreate, cresume = coroutine.wrap, coroutine.create, coroutine.resume

-- One round of errors out of coroutines: a string error out of a wrapped
-- coroutine, a table error out of a resumed one, an error raised by a C
-- function, and nested coroutines whose inner error is thrown on out of
-- the outer one.
local function round(i)
  pcall(cwrap(function() error("plain " .. i) end))
  cresume(ccreate(function() error({code = i}) end))
  pcall(cwrap(function() return ("x"):rep(-1, {}) .. nil end))
  local outer = cwrap(function()
    local ok, e = cresume(ccreate(function()
      cresume(ccreate(function() error(setmetatable({i}, {})) end))
      error({nested = i})
    end))
    error(e, 0)
  end)
  local ok, e = pcall(outer)
  return ok or type(e) == "table"
end

local function run(opts, secs)
  ljprof.record(opts)
  local t0, n = os.clock(), 0
  while os.clock() - t0 < secs do
    for i = 1, 200 do if round(i) then n = n + 1 end end
  end
  ljprof.stop()
  local host = 0
  for _, e in ipairs(ljprof.summary()) do
    if e.stack:find("[host]", 1, true) then host = host + e.count end
  end
  return ljprof.stats(), host, n
end

for _, c in ipairs({
  {"wall 0.5 ms, native off", {clock = "wall", interval = 0.5, native = false}},
  {"cpu 0.5 ms, native off", {clock = "cpu", interval = 0.5, native = false}},
  {"wall 0.5 ms, native on", {clock = "wall", interval = 0.5, native = true}},
}) do
  t.case("errors out of coroutines are not host ticks: " .. c[1], function()
    local st, host, n = run(c[2], 2.0)
    print(string.format("  %d samples, %d host ticks, %d [host] samples, %d rounds",
                        st.samples or -1, st.host_ticks, host, n))
    t.ok(st.samples > 500, "enough samples: " .. tostring(st.samples))
    t.eq(st.host_main, true, "the main thread's call is checked (g->mainthref learnt)")
    t.eq(st.host_ticks, 0, "host ticks in a program that is all Lua")
    t.eq(host, 0, "[host] samples in a program that is all Lua")
  end)
end

-- Callback mode (jit.profile's API; no native capture) hands host ticks
-- to a call of their own whose dumpstack is "[host]": in a program that is
-- all Lua there must be none. Besides the unwinding above, the callback
-- itself runs by lua_pcall on a thread of its own: g->cur_L names that idle
-- thread for the rest of the hook, until LuaJIT's hook dispatch sets it
-- back (lj_dispatch.c). The callback calls C functions (dumpstack) too.
for _, clock in ipairs({"wall", "cpu"}) do
  t.case("callback mode: no [host] call in a program that is all Lua, " .. clock, function()
    local total, host, calls = 0, 0, 0
    ljprof.start("i0.5", function(th, samples, vm)
      calls = calls + 1
      total = total + samples
      if ljprof.dumpstack(th, "f", 1) == "[host]" then host = host + samples end
      for d = 1, 3 do ljprof.dumpstack(th, "pF|lZ; ", -100 * d) end
    end, {clock = clock})
    local t0 = os.clock()
    while os.clock() - t0 < 2.0 do
      for i = 1, 200 do round(i) end
    end
    local ok, err = ljprof.stop()
    print(string.format("  %d samples in %d callback calls, %d in [host] calls", total, calls, host))
    t.eq(ok, true, "stop: " .. tostring(err))
    t.ok(total > 500, "enough samples: " .. total)
    t.eq(host, 0, "samples in [host] calls in a program that is all Lua")
  end)
end

t.done()
