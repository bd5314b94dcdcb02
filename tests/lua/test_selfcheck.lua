-- ljprof's own cross-checks (LJPROF_STACKS=check) on a trace-heavy
-- program: at every safe point the Lua frames read from LuaJIT's memory
-- are compared with lua_getstack's. With aborts recorded (a trace-event
-- handler), every trace is also read from its object at its "stop" event
-- and compared with the event (start prototype and bytecode, side or
-- root) and jit.util.tracemc (machine code address and size), and every
-- trace start and abort line read from the prototype (no
-- jit.util.funcinfo table per trace event) with jit.util.funcinfo's. All
-- must agree everywhere; the trace-event stage timer must have seen the
-- events. By default no trace event is handled at all.
local t = require("t")

local LUAJIT = arg and arg[-1] or "luajit"

-- Compiled loops, side traces, aborts (NYI functions, a coroutine switch,
-- pcall and error), many small functions, at 2 kHz wall.
local PROGRAM = [[
local ljprof = require("ljprof")
ljprof.record{clock = "wall", rate = 2000, aborts = arg[1] == "aborts"}
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
print(string.format("checks %d mismatches %d events %d event_ns %d samples %d source %s",
  st.stack_checks or -1, st.stack_mismatches or -1, st.trace_events, st.trace_event_ns,
  st.samples, st.trace_source))
]]

local function run(args)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PROGRAM)
  f:close()
  local p = io.popen("LJPROF_STACKS=check " .. LUAJIT .. " " .. path .. " " .. args .. " 2>&1")
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local checks, mismatches, events, event_ns, samples, source =
    out:match("checks (%-?%d+) mismatches (%-?%d+) events (%d+) event_ns (%d+) samples (%d+) source (%a+)")
  t.ok(checks, "the program ran: " .. out)
  if not checks then return end
  print(string.format("  %s: %s checks, %s mismatches, %s trace events (%.0f ns each in ljprof), %s samples",
                      args, checks, mismatches, events, tonumber(event_ns) / math.max(1, tonumber(events)),
                      samples))
  t.ok(tonumber(checks) > 100, "enough checks: " .. checks)
  local said = {}
  for line in out:gmatch("ljprof: check mismatch: [^\n]*") do said[#said + 1] = line end
  t.eq(tonumber(mismatches), 0, "no mismatch\n" .. table.concat(said, "\n"))
  t.eq(source, "memory", "traces read from memory")
  return tonumber(events), tonumber(event_ns)
end

t.case("frames, traces and trace lines read from LuaJIT's memory agree with LuaJIT's API", function()
  local events, event_ns = run("aborts")
  if not events then return end
  t.ok(events > 100, "trace events seen: " .. events)
  t.ok(event_ns > 0, "their time measured")
end)

t.case("by default: no trace event handled, frames agree", function()
  local events = run("default")
  if events then t.eq(events, 0, "trace events handled") end
end)

t.done()
