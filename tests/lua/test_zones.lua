-- Zones: the zone of a sample is the one active when its tick happened;
-- the jit.zone interface (push, pop, get, flush) with one-line errors;
-- code written for jit.zone runs unchanged under -jprof; the cost of a
-- push+pop from compiled code (printed, never asserted).
local t = require("t")
local ljprof = require("ljprof")
local zone = ljprof.zone

local LUAJIT = arg and arg[-1] or "luajit"

local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end

t.case("samples carry the zone active at the tick (vs timed truth)", function()
  local clock = os.clock
  local spent = {AI = 0, PHYS = 0}
  ljprof.record({clock = "wall", interval = 0.5})
  local t0 = clock()
  while clock() - t0 < 1.2 do
    local a = clock()
    zone("AI") work(3e5) zone()
    local b = clock()
    zone("PHYS") work(1e5) zone()
    local c = clock()
    spent.AI, spent.PHYS = spent.AI + (b - a), spent.PHYS + (c - b)
  end
  ljprof.stop()
  local z, total = {}, 0
  for _, e in ipairs(ljprof.summary()) do
    z[e.zone] = (z[e.zone] or 0) + e.count
    total = total + e.count
  end
  local ai = (z.AI or 0) / total
  local truth = spent.AI / (spent.AI + spent.PHYS)
  print(string.format("  %d samples: AI %.1f%% (timed %.1f%%), PHYS %.1f%%, none %.1f%%",
                      total, ai * 100, truth * 100, (z.PHYS or 0) / total * 100,
                      (z[""] or 0) / total * 100))
  t.ok(total >= 1000, "enough samples: " .. total)
  -- ~2400 samples: the share's noise is about 1 point; 8 points is far out
  t.ok(math.abs(ai - truth) < 0.08, string.format("AI share %.3f vs timed %.3f", ai, truth))
  t.ok((z[""] or 0) / total < 0.05, "little time outside zones")
end)

t.case("jit.zone interface: push, pop, get, flush, errors", function()
  t.eq(zone:get(), nil, "empty")
  zone("A"); zone("B")
  t.eq(zone:get(), "B", "innermost")
  t.eq(zone(), "B", "pop returns the name")
  t.eq(zone:get(), "A", "back to A")
  zone:flush()
  t.eq(zone:get(), nil, "flushed")
  t.raises(function() zone() end, "pop from an empty zone stack")
  t.raises(function() zone(42) end, "bad zone name")
  for i = 1, 64 do zone("deep" .. i) end
  t.raises(function() zone("one too many") end, "zone stack full (64 levels)")
  zone:flush()
  t.ok(require("jit.prof.zone") == zone, "ljprof.zone is jit.prof.zone")
end)

t.case("code written for jit.zone, under -jprof=z", function()
  local tmp = os.tmpname()
  local f = assert(io.open(tmp, "w"))
  f:write([[
local zone = require("jit.zone")
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local t0 = os.clock()
while os.clock() - t0 < 0.5 do
  zone("AI") work(3e5) zone()
  zone("RENDER") work(1e5) zone()
end
]])
  f:close()
  local p = io.popen(LUAJIT .. " -jprof=z/clock=wall/rate=1000 " .. tmp .. " 2>&1")
  local out = p:read("*a")
  p:close()
  os.remove(tmp)
  local ai = tonumber(out:match("(%d+)%%%s+AI"))
  local render = tonumber(out:match("(%d+)%%%s+RENDER"))
  t.ok(ai and render, "zones in the report:\n" .. out)
  if ai and render then t.ok(ai > render, "AI heavier than RENDER:\n" .. out) end
end)

t.case("zones as root frames in stack formats (/zones=root)", function()
  local tmp, out = os.tmpname(), t.tmpname(".folded")
  local f = assert(io.open(tmp, "w"))
  f:write([[
local zone = require("jit.zone")
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local t0 = os.clock()
while os.clock() - t0 < 0.3 do zone("AI") work(3e5) zone() work(1e5) end
]])
  f:close()
  local p = io.popen(LUAJIT .. " -jprof=f/zones=root/clock=wall/rate=1000," .. out .. " " .. tmp .. " 2>&1")
  local msg = p:read("*a")
  p:close()
  local g = io.open(out, "r")
  local data = g and g:read("*a") or ""
  if g then g:close() end
  os.remove(tmp)
  os.remove(out)
  local zoned, plain = 0, 0
  for line in data:gmatch("[^\n]+") do
    if line:find("^%[zone AI%];") then zoned = zoned + 1
    elseif not line:find("zone") then plain = plain + 1 end
  end
  t.ok(zoned > 0, "stacks under [zone AI]:\n" .. data .. msg)
  t.ok(plain > 0, "stacks outside any zone stay as they are")
  local p2 = io.popen(LUAJIT .. " -jprof=f/zones=sideways " .. tmp .. " 2>&1")
  local err = p2:read("*a")
  p2:close()
  t.ok(err:find("bad zones 'sideways' (accepted: root, off)", 1, true) ~= nil, "one line: " .. err)
end)

t.case("wrap: per-call wall time inside a zone, cheap when off", function()
  local function spin_us(us)
    local t0 = os.clock() while os.clock() - t0 < us * 1e-6 do end return us
  end
  local f = ljprof.wrap(spin_us, "SPIN")
  t.eq(f(10), 10, "off: passes through")
  t.eq(#ljprof.wrapped(), 0, "off: nothing recorded")
  ljprof.record({clock = "wall", interval = 1})
  for i = 1, 200 do f(i % 10 == 0 and 2000 or 500) end
  local bad = ljprof.wrap(function() error("boom") end, "ERR")
  local ok, err = pcall(bad)
  t.ok(not ok and tostring(err):find("boom", 1, true), "error passed on: " .. tostring(err))
  t.eq(zone:get(), nil, "zone popped after the error")
  ljprof.stop()
  local w
  for _, x in ipairs(ljprof.wrapped()) do if x.name == "SPIN" then w = x end end
  t.ok(w and w.count == 200, "200 calls counted")
  if w then
    -- CPU-time spins: each call takes at least its time; mean ~650 us
    t.ok(w.mean >= 600e3 and w.max >= 2000e3, string.format("mean %.0f ns, max %.0f ns", w.mean, w.max))
    t.ok(w.p99 >= 1800e3 and w.p99 <= w.max, "p99 among the 2 ms calls: " .. w.p99)
  end
  local z = 0
  for _, e in ipairs(ljprof.summary()) do if e.zone == "SPIN" then z = z + e.count end end
  t.ok(z >= 50, "samples in zone SPIN: " .. z)
  t.raises(function() ljprof.wrap(42, "x") end, "bad function")
end)

t.case("cost of a push+pop pair from compiled code (printed)", function()
  local n = 1e7
  local t0 = os.clock()
  for _ = 1, n do zone("AI") zone() end
  local ns = (os.clock() - t0) / n * 1e9
  print(string.format("  %.1f ns per push+pop pair", ns))
  t.ok(ns > 0, "measured")
end)

t.done()
