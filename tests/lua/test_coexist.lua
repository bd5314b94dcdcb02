-- ljprof next to LuaJIT's own tools in one process:
--   * the built-in profiler (jit.profile: SIGPROF + ITIMER_PROF) and
--     ljprof (default clock and signal: CPU timer, SIGRTMIN+4) at once;
--   * the program's own jit.attach("trace") handler, attached before or
--     after ljprof starts (jit.attach keeps one handler per event: ljprof
--     chains to the one it replaces, restores it at stop, and re-attaches
--     on top of a newcomer at its next aggregation);
--   * ljprof's itimer clock, which needs SIGPROF for itself;
--   * the VM state split between compiled and interpreted code.

local t = require "t"
local ljprof = require "ljprof"
local profile = require "jit.profile"

-- Interpreted CPU work (the caller decides about the JIT).
local function spin(sec) return t.burn(sec) end

-- Trace churn: n distinct small loop functions, each compiled on its own.
local gen = 0
local function make_traces(n)
  local h = 0
  for _ = 1, n do
    gen = gen + 1
    local f = assert(loadstring(string.format([[
      local s = 0
      for i = 1, 300 do s = s + (i * %d) %% 7 end
      return s]], gen)))
    h = h + f()
  end
  return h
end

-- The "trace" slot of the VM event table and what is in it.
local function trace_slot()
  local ev = debug.getregistry()._VMEVENTS
  local n, vals = 0, {}
  if ev then
    for k, v in pairs(ev) do n = n + 1; vals[#vals + 1] = v end
  end
  return n, vals
end

local function is_c_function(f)
  return type(f) == "function" and debug.getinfo(f, "S").what == "C"
end

local function counter()
  local c = {}
  return c, function(what) c[what] = (c[what] or 0) + 1 end
end

local function check_stats(what)
  local st = ljprof.stats()
  t.eq(st.pending, 0, what .. ": nothing pending after stop")
  t.eq(st.completed + st.dropped, st.ticks, what .. ": ticks == completed + dropped")
  t.ok(not ljprof.running(), what .. ": not running after stop")
  return st
end

t.case("jit.profile and ljprof sample the same program at once", function()
  jit.on()
  for _, cfg in ipairs {
    {jp = "i10", lj = nil, sec = 1.2},                               -- defaults
    {jp = "i1", lj = {clock = "wall", interval = 0.2}, sec = 0.8},  -- both fast
  } do
    local jn, jcalls, jvm = 0, 0, {}
    profile.start(cfg.jp, function(th, n, vm)
      jn = jn + n; jcalls = jcalls + 1; jvm[vm] = (jvm[vm] or 0) + n
      -- read the stack like a real tool does
      local _ = profile.dumpstack(th, "fl;", 5)
    end)
    local c0 = os.clock()
    ljprof.record(cfg.lj)
    local until_ = os.clock() + cfg.sec
    local h = 0
    while os.clock() < until_ do  -- interpreted, compiled and C work
      jit.off(); h = h + spin(0.05); jit.on()
      h = h + make_traces(5)
      local tt = {}
      for i = 1, 2000 do tt[i] = (i * 7919) % 1009 end
      table.sort(tt)
    end
    local ok = ljprof.stop()
    profile.stop()
    local cpu = os.clock() - c0
    local st = check_stats("with jit.profile")
    t.ok(ok, "ljprof stopped cleanly")
    print(string.format("  jit.profile %s: %d samples in %d callbacks; ljprof %s %.1f ms: %d ticks, %d completed; %.2f s CPU",
                        cfg.jp, jn, jcalls, st.clock, st.interval_us / 1000, st.ticks, st.completed, cpu))
    -- jit.profile: ITIMER_PROF, at most one tick per kernel tick (4 ms
    -- here), so expect at least cpu*100 * 0.3 at i10 and more at i1.
    t.ok(jn >= 0.3 * cpu * 100, "jit.profile received samples: " .. jn)
    if cfg.lj then
      t.ok(st.ticks + st.missed >= 0.3 * cpu / 0.0002,
           "ljprof (wall 0.2 ms) received samples: " .. st.ticks .. " (missed " .. st.missed .. ")")
    else
      t.eq(st.clock, "cpu", "default clock")
      t.ok(st.ticks >= 0.5 * cpu * 100 and st.ticks <= 1.5 * cpu * 100 + 2,
           "ljprof (cpu 10 ms) ticks ~ CPU time: " .. st.ticks)
    end
    -- Both are really stopped: no more callbacks, no more ticks.
    local jn1, tk1 = jn, ljprof.stats().ticks
    spin(0.1)
    t.eq(jn, jn1, "no jit.profile callbacks after its stop")
    t.eq(ljprof.stats().ticks, tk1, "no ljprof ticks after its stop")
  end
end)

t.case("by default the trace slot is not touched", function()
  jit.on()
  local before, h1 = counter()
  jit.attach(h1, "trace")
  ljprof.record {clock = "wall", interval = 0.5}
  local _, vals = trace_slot()
  -- (the other slot in use: inline=recorded's "record" handler, C)
  local has_h1, others = false, true
  for _, v in ipairs(vals) do
    if v == h1 then has_h1 = true elseif not is_c_function(v) then others = false end
  end
  t.ok(has_h1 and others, "the user's handler is the only one while profiling")
  make_traces(30)
  spin(0.05)
  t.ok(ljprof.stop(), "stop")
  t.eq(ljprof.stats().trace_events, 0, "no trace event handled by ljprof")
  local _, after = trace_slot()
  t.eq(#after, 1, "after stop, only the user's handler in _VMEVENTS")
  t.ok((before.stop or 0) >= 20, "the user's handler received the events")
  jit.attach(h1)  -- detach
end)

-- With aborts recorded, ljprof handles trace events: it shares the slot.
t.case("a trace handler attached before start is chained and restored", function()
  jit.on()
  local before, h1 = counter()
  jit.attach(h1, "trace")
  local n0, v0 = trace_slot()
  t.ok(n0 >= 1 and v0[#v0] ~= nil, "the handler is in _VMEVENTS")
  -- Unprofiled reference.
  make_traces(100)
  local ref = {start = before.start or 0, stop = before.stop or 0}
  for k in pairs(before) do before[k] = nil end

  ljprof.record {clock = "wall", interval = 0.5, aborts = true}
  local _, vals = trace_slot()
  local ours = false
  for _, v in ipairs(vals) do if v ~= h1 and is_c_function(v) then ours = true end end
  t.ok(ours, "ljprof's handler took the trace slot")
  make_traces(100)
  spin(0.05)
  t.ok(ljprof.stop(), "stop")
  check_stats("chained")
  print(string.format("  user handler saw %d starts, %d stops while profiled (unprofiled: %d, %d)",
                      before.start or 0, before.stop or 0, ref.start, ref.stop))
  t.ok((before.stop or 0) >= 0.75 * ref.stop and (before.stop or 0) <= 1.25 * ref.stop + 5,
       "user handler kept receiving trace events while ljprof ran")
  -- Restored as the sole handler.
  local n1, v1 = trace_slot()
  t.eq(n1, n0, "same number of VM event slots after stop")
  local all_h1 = true
  for _, v in ipairs(v1) do if v ~= h1 then all_h1 = false end end
  t.ok(all_h1, "the user's handler is back as the only handler")
  local s0 = before.stop or 0
  make_traces(20)
  t.ok((before.stop or 0) > s0, "the user's handler still receives events after stop")
  jit.attach(h1)  -- detach
end)

t.case("a trace handler attached after start: ljprof re-attaches on top", function()
  jit.on()
  -- A small ring aggregates often (every 8 completed samples), which is
  -- where ljprof checks that its handler is still installed.
  ljprof.record {clock = "wall", interval = 0.5, ring = 16, aborts = true}
  make_traces(10)
  local late, h2 = counter()
  jit.attach(h2, "trace")               -- replaces ljprof's handler
  local _, vals = trace_slot()
  local slot_is_h2 = false
  for _, v in ipairs(vals) do if v == h2 then slot_is_h2 = true end end
  t.ok(slot_is_h2, "the user's handler replaced ljprof's")
  jit.off(); spin(0.2); jit.on()         -- safe points and aggregations
  local _, vals2 = trace_slot()
  local back = false
  for _, v in ipairs(vals2) do if v ~= h2 and is_c_function(v) then back = true end end
  t.ok(back, "ljprof re-attached its handler on top")
  local s0 = late.stop or 0
  make_traces(50)
  t.ok((late.stop or 0) >= s0 + 25,
       string.format("the user's handler still receives events (%d stops)", (late.stop or 0) - s0))
  t.ok(ljprof.stop(), "stop")
  check_stats("re-attached")
  local n, v3 = trace_slot()
  local only_h2 = n > 0
  for _, v in ipairs(v3) do if v ~= h2 then only_h2 = false end end
  t.ok(only_h2, "after stop the user's handler is the only one")
  local s1 = late.stop or 0
  make_traces(10)
  t.ok((late.stop or 0) > s1, "the user's handler receives events after stop")
  jit.attach(h2)
end)

t.case("itimer clock: refused while jit.profile owns SIGPROF, works alone", function()
  jit.off()
  local jn = 0
  profile.start("i2", function(th, n) jn = jn + n end)
  local ok, err = pcall(ljprof.record, {clock = "itimer"})
  t.ok(not ok, "ljprof itimer refused while jit.profile runs")
  err = tostring(err)
  print("  error: " .. err)
  t.ok(err:find("SIGPROF", 1, true) ~= nil, "the error mentions SIGPROF")
  t.ok(not err:find("\n", 1, true), "the error is one line")
  t.ok(not ljprof.running(), "not running after the refusal")
  local j0 = jn
  spin(0.3)
  profile.stop()
  t.ok(jn > j0, "jit.profile kept sampling after ljprof's refusal")

  local c0 = os.clock()
  ljprof.record {clock = "itimer"}
  spin(1.0)
  t.ok(ljprof.stop(), "stop")
  local cpu = os.clock() - c0
  local st = check_stats("itimer")
  print(string.format("  itimer alone: %d ticks for %.2f s CPU", st.ticks, cpu))
  t.eq(st.clock, "itimer", "clock")
  t.ok(st.ticks >= 0.5 * cpu * 100 and st.ticks <= 1.5 * cpu * 100 + 2,
       "itimer ticks ~ CPU time at 10 ms")

  -- jit.profile can run again afterwards, and so can ljprof's itimer.
  jn = 0
  profile.start("i2", function(th, n) jn = jn + n end)
  spin(0.3)
  profile.stop()
  t.ok(jn > 0, "jit.profile works after ljprof's itimer run")
  ljprof.record {clock = "itimer"}
  spin(0.3)
  t.ok(ljprof.stop(), "stop")
  t.ok(ljprof.stats().ticks > 0, "ljprof itimer works again after jit.profile")
end)

t.case("vmstate: interpreted work is never 'N', a hot loop mostly is", function()
  jit.flush()
  jit.off()
  ljprof.record {clock = "wall", interval = 1}
  spin(0.6)
  t.ok(ljprof.stop(), "stop")
  local st = check_stats("interpreted")
  local vm = st.vmstate
  print(string.format("  jit.off: N %d I %d C %d G %d J %d", vm.N, vm.I, vm.C, vm.G, vm.J))
  t.ok(st.completed >= 100, "enough samples")
  t.eq(vm.N, 0, "no compiled-code samples with the JIT off")
  t.ok(vm.I >= 0.5 * st.completed, "mostly interpreter samples")

  jit.on()
  -- Pure floating-point arithmetic: the trace runs without calling out.
  -- (A trace that calls one of LuaJIT's own helpers spends that time at a
  -- PC inside LuaJIT, which ljprof classifies 'I' by design: e.g. an
  -- integer `i % 3` calls lj_vm_modi, and such a loop shows up as about
  -- half 'I'. Printed below for information, not checked.)
  local function hot(n)
    local s = 0
    for i = 1, n do s = s + i * 0.5 - s * 1e-9 end
    return s
  end
  local function hot_mod(n)
    local s = 0
    for i = 1, n do s = s + (i % 3) * 0.5 end
    return s
  end
  for _, case in ipairs {{"hot loop", hot, true}, {"hot loop with integer %", hot_mod, false}} do
    local name, fn, check = case[1], case[2], case[3]
    fn(1000)  -- compile it
    ljprof.record {clock = "wall", interval = 1}
    local until_ = os.clock() + 0.5
    local s = 0
    while os.clock() < until_ do s = s + fn(200000) end
    t.ok(ljprof.stop(), "stop")
    st = check_stats(name)
    vm = st.vmstate
    print(string.format("  %s: N %d I %d C %d G %d J %d", name, vm.N, vm.I, vm.C, vm.G, vm.J))
    if check then
      t.ok(st.completed >= 100, "enough samples")
      t.ok(vm.N > 0.5 * st.completed, "most samples in compiled code")
    end
  end
end)

t.done()
