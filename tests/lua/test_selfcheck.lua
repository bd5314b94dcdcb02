-- ljprof's own cross-checks (LJPROF_STACKS=check) on a trace-heavy
-- program: at every safe point the Lua frames read from LuaJIT's memory
-- are compared with lua_getstack's, and every trace start and abort line
-- read from the prototype (no jit.util.funcinfo table per trace event) is
-- compared with jit.util.funcinfo's. Both must agree everywhere; the
-- trace-event stage timer must have seen the events.
local t = require("t")

local LUAJIT = arg and arg[-1] or "luajit"

-- Compiled loops, side traces, aborts (NYI functions, a coroutine switch,
-- pcall and error), many small functions, at 2 kHz wall.
local PROGRAM = [[
local ljprof = require("ljprof")
ljprof.record{clock = "wall", rate = 2000}
local fns = {}
for k = 1, 60 do
  fns[k] = loadstring(("local a = ... local s = 0 for i = 1, a do s = s + (i %% %d) end return s")
                      :format(k + 1), "=gen" .. k)
end
local function branchy(n)
  local s = 0
  for i = 1, n do
    if i % 3 == 0 then s = s + 1 elseif i % 5 == 0 then s = s - 1 else s = s + 2 end
  end
  return s
end
local function nyi(n)  -- string.gsub with a function, pairs: aborts
  local s = 0
  for i = 1, n do
    local str = ("x"):rep(i % 7 + 1):gsub("x", function(c) return c .. "y" end)
    for _, v in pairs({i, i + 1}) do s = s + v end
    s = s + #str
  end
  return s
end
local co = coroutine.wrap(function()
  while true do for i = 1, 200 do coroutine.yield(i) end end
end)
local t0, total = os.clock(), 0
while os.clock() - t0 < 1.5 do
  for k = 1, #fns do total = total + fns[k](200) end
  total = total + branchy(3000) + nyi(200) + co()
  pcall(error, "x")
end
ljprof.stop()
local st = ljprof.stats()
print(string.format("checks %d mismatches %d events %d event_ns %d samples %d",
  st.stack_checks or -1, st.stack_mismatches or -1, st.trace_events, st.trace_event_ns,
  st.samples))
]]

t.case("frames and trace lines read from LuaJIT's memory agree with LuaJIT's API", function()
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PROGRAM)
  f:close()
  local p = io.popen("LJPROF_STACKS=check " .. LUAJIT .. " " .. path .. " 2>&1")
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local checks, mismatches, events, event_ns, samples =
    out:match("checks (%-?%d+) mismatches (%-?%d+) events (%d+) event_ns (%d+) samples (%d+)")
  t.ok(checks, "the program ran: " .. out)
  if not checks then return end
  print(string.format("  %s checks, %s mismatches, %s trace events (%.0f ns each in ljprof), %s samples",
                      checks, mismatches, events, tonumber(event_ns) / math.max(1, tonumber(events)),
                      samples))
  t.ok(tonumber(checks) > 100, "enough checks: " .. checks)
  t.eq(tonumber(mismatches), 0, "no mismatch")
  t.ok(tonumber(events) > 100, "trace events seen: " .. events)
  t.ok(tonumber(event_ns) > 0, "their time measured")
end)

t.done()
