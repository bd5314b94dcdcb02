-- Host detection while an error unwinds out of a coroutine (issue 27):
-- LuaJIT clears the coroutine's L->cframe while g->cur_L still names it,
-- and the unwinding runs outside the interpreter (lj_err.c, libgcc's
-- unwinder). The whole program is Lua, so no tick may be taken for a host
-- tick (stats host_ticks, the "[host]" frame), with native capture off
-- (where only the VM's own fields decide) and on.
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
    t.eq(st.host_ticks, 0, "host ticks in a program that is all Lua")
    t.eq(host, 0, "[host] samples in a program that is all Lua")
  end)
end

t.done()
