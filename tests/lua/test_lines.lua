-- Lines of samples in compiled code (src/tracesnap.c: ljp_ts_code_pc;
-- src/luaframes.c): a sample in a trace gets the line of the bytecode its
-- machine code was recorded from (inline=recorded: the record map's, per
-- IR instruction) or else the line of its snapshot's bytecode, corrected
-- where a snapshot's PC is not that of the code that follows it: a
-- comparison's snapshot holds the branch NOT taken (lj_record.c,
-- rec_comp_fixup), a for loop's check the loop's other way (rec_for), a
-- function's entry (LuaJIT's profiling mode) its header line. Before,
-- such code went to the branch that did not run, and wherever the safe
-- point came inside the loop's frame (or with inline=off) compiled time
-- piled up on the line the trace starts at, the loop's first line.
--
-- The workload is one compiled loop whose body has lines of known cost:
-- sin calls and sqrt steps chained through one variable (so that nothing
-- overlaps: the costs add up, checked below against the run's own time),
-- an if/elseif/else whose branches differ in cost, an elseif branch that
-- never runs, and an inlined helper with two lines of its own. The truth
-- is by construction: each line's number of chained sin calls and sqrt
-- steps times their unit costs, measured here in the same shape. Each run
-- is a child luajit under ljprof record (wall clock, 1 ms, key "l;"), the
-- line of a sample the innermost "work:N" frame; the rounds' loop calls an
-- interpreted function after each call of the loop (5 ms), so that a safe
-- point comes before the ring fills (a full ring merges a tick into a
-- record of its snapshot's eighth, line and all: recorded's TVD 0.04-0.14
-- over runs, the helper's sqrt line at 8.5% in one). Bounds are loose
-- (shares over thousands of samples, not exact values).
local t = require("t")

local LUAJIT = arg and arg[-1] or "luajit"

local function rep(s, n, sep) local o = {} for i = 1, n do o[i] = s:format(i) end return table.concat(o, sep or " ") end
local WORK = table.concat({
  "local sin, sqrt = math.sin, math.sqrt",                                  -- 1
  "local function helper(x, y)",                                            -- 2
  "  local b = y + sin(x + y * 1e-12) b = b + sin(x + b * 2e-12)",           -- 3: 2 sin
  "  " .. rep("b = sqrt(b + x)", 6),                                        -- 4: 6 sqrt
  "  return b",                                                             -- 5
  "end",                                                                    -- 6
  "local function work(n)",                                                 -- 7
  "  local y = 1",                                                          -- 8
  "  for i = 1, n do",                                                      -- 9
  "    local x = 100 + i * 1e-5",                                           -- 10
  "    y = y + sin(x + y * 1e-12)",                                         -- 11: 1 sin
  "    " .. rep("y = sqrt(y + x)", 8),                                      -- 12: 8 sqrt
  "    if i % 4 == 0 then",                                                 -- 13
  "      " .. rep("y = y + sin(x + y * %de-13)", 8),                        -- 14: 8 sin, 1/4
  "    elseif y < 0 then",                                                  -- 15
  "      y = -y + sin(x) + sin(x + 1)",                                     -- 16: never
  "    else",                                                               -- 17
  "      " .. rep("y = sqrt(y + x)", 4),                                    -- 18: 4 sqrt, 3/4
  "    end",                                                                -- 19
  "    y = helper(x, y)",                                                   -- 20
  "  end",                                                                  -- 21
  "  return y",                                                             -- 22
  "end",                                                                    -- 23
  "local t, pause = 0, function() end jit.off(pause)",                      -- 24
  "for r = 1, (...) do t = t + work(20000) pause() end",                    -- 25
  "return t", ""}, "\n")
local FOR, NEVER, HEADER = 9, 16, 2

-- Chained sin calls and sqrt steps per 4 iterations, by line.
local SIN = {[11] = 4, [14] = 8, [3] = 8}
local SQRT = {[12] = 32, [18] = 12, [4] = 24}

-- The unit costs (ns), in the workload's shape: a sin call whose
-- argument depends on the last result, a sqrt step y = sqrt(y + x).
local function unit_costs()
  local function time(code)
    local best = math.huge
    for _ = 1, 3 do
      local f = assert(loadstring(code))
      local c = os.clock()
      f()
      best = math.min(best, os.clock() - c)
    end
    return best
  end
  local N = 4e6
  local base = time(([[local y = 1 for i = 1, %d do local x = 100 + i * 1e-5 y = y * 0.5 + x end]]):format(N))
  local s = time(([[local sin = math.sin local y = 1 for i = 1, %d do local x = 100 + i * 1e-5 y = y * 0.5 + x
    y = y + sin(x + y * 1e-12) y = y + sin(x + y * 2e-12) y = y + sin(x + y * 3e-12) y = y + sin(x + y * 4e-12) end]]):format(N))
  local q = time(([[local sqrt = math.sqrt local y = 1 for i = 1, %d do local x = 100 + i * 1e-5 y = y * 0.5 + x
    y = sqrt(y + x) y = sqrt(y + x) y = sqrt(y + x) y = sqrt(y + x) end]]):format(N))
  return (s - base) / (4 * N) * 1e9, (q - base) / (4 * N) * 1e9
end

local sin_ns, sqrt_ns = unit_costs()
local TRUTH, total = {}, 0
for l, n in pairs(SIN) do TRUTH[l] = n * sin_ns end
for l, n in pairs(SQRT) do TRUTH[l] = n * sqrt_ns end
for _, v in pairs(TRUTH) do total = total + v end
for l, v in pairs(TRUTH) do TRUTH[l] = v / total end

-- The child: records the workload, prints "count<TAB>stack".
local CHILD = [[
local src = io.read("*a")
if os.getenv("HOTEXIT") then jit.opt.start("hotexit=" .. os.getenv("HOTEXIT")) end
local prof = require("ljprof")
prof.record({clock = "wall", interval = 1, fmt = "l;", depth = -100,
             inline = os.getenv("INLINE")})
local c = os.clock()
assert(loadstring(src, "=work"))(tonumber(os.getenv("REPS")))
c = os.clock() - c
prof.stop()
print("cpu", c)
print("mode", prof.stats().inline_frames)
for _, e in ipairs(prof.summary()) do print(e.count, e.stack) end
]]

-- Shares by line of one run (env: the child's environment).
local function run(env, reps)
  local dir = t.tmpdir()
  t.write(dir .. "/work.lua", WORK)
  t.write(dir .. "/child.lua", CHILD)
  local f = assert(io.popen(env .. " REPS=" .. reps .. " " .. t.q(LUAJIT) .. " " ..
                            t.q(dir .. "/child.lua") .. " < " .. t.q(dir .. "/work.lua")))
  local out = f:read("*a")
  f:close()
  t.rmdir(dir)
  local r = {lines = {}, total = 0}
  for line in out:gmatch("[^\n]+") do
    local n, st = line:match("^(%d+)\t(.*)$")
    if n then
      local l
      for w in st:gmatch("work:(%d+)") do l = tonumber(w) end
      r.total = r.total + tonumber(n)
      if l then r.lines[l] = (r.lines[l] or 0) + tonumber(n) end
    else
      local k, v = line:match("^(%a+)\t(.*)$")
      if k then r[k] = v end
    end
  end
  local inwork = 0
  for _, n in pairs(r.lines) do inwork = inwork + n end
  r.inwork = inwork
  function r.share(l) return inwork > 0 and (r.lines[l] or 0) / inwork or 0 end
  local keys = {}
  for l in pairs(r.lines) do keys[#keys + 1] = l end
  table.sort(keys, function(a, b) return r.lines[a] > r.lines[b] end)
  local txt = {}
  for i = 1, math.min(8, #keys) do txt[i] = string.format("%d %.1f%%", keys[i], 100 * r.share(keys[i])) end
  r.text = table.concat(txt, ", ")
  return r
end

-- Total variation distance between a run's line shares and the truth.
local function tvd(r)
  local d, seen = 0, {}
  for l, p in pairs(TRUTH) do d = d + math.abs(r.share(l) - p) seen[l] = true end
  for l in pairs(r.lines) do if not seen[l] then d = d + r.share(l) end end
  return d / 2
end

do
  local ks = {}
  for _, l in ipairs({11, 12, 14, 18, 3, 4}) do ks[#ks + 1] = string.format("%d %.1f%%", l, 100 * TRUTH[l]) end
  print(string.format("  truth (sin %.1f ns, sqrt step %.1f ns): %s", sin_ns, sqrt_ns, table.concat(ks, ", ")))
end

local function common(r, what)
  print(string.format("  %s: %d samples (%d in work), %s; TVD %.3f", what, r.total, r.inwork,
                      r.text, tvd(r)))
  t.ok(r.inwork >= 1000, what .. ": samples in the workload: " .. r.inwork)
  t.ok(r.share(NEVER) <= 0.01, what .. ": the branch that never runs, line " .. NEVER .. ": " ..
       r.share(NEVER))
end

t.case("default mode: each line of a compiled loop gets its own time", function()
  local r = run("", 500)
  common(r, "recorded")
  t.eq(r.mode, "recorded", "inline frames source")
  t.ok(r.share(FOR) <= 0.08, "the loop's first line: " .. r.share(FOR))
  t.ok(tvd(r) <= 0.15, "TVD against the truth: " .. tvd(r))
end)

t.case("default mode, side exits to the interpreter: not on the loop's first line", function()
  -- The exits of the if/else are never compiled (as when a branch's side
  -- trace cannot be): the safe points come inside work's frame, where the
  -- trace's own frame is live. Before: the for line took 35% (its start).
  local r = run("HOTEXIT=1000", 300)
  common(r, "recorded, exits interpreted")
  t.ok(r.share(FOR) <= 0.10, "the loop's first line: " .. r.share(FOR))
  t.ok(r.share(12) >= 0.08, "line 12 (8 sqrt steps, always compiled): " .. r.share(12))
  t.ok(r.share(11) >= 0.03, "line 11 (a sin call, always compiled): " .. r.share(11))
end)

t.case("inline=snapshots: the code after a comparison is the taken branch's", function()
  local r = run("INLINE=snapshots", 500)
  common(r, "snapshots")
  t.eq(r.mode, "snapshots", "inline frames source")
  t.ok(r.share(FOR) <= 0.08, "the loop's first line: " .. r.share(FOR))
end)

t.case("inline=off: the snapshot's line, not the trace's start", function()
  local r = run("INLINE=off", 500)
  common(r, "off")
  t.eq(r.mode, "off", "inline frames source")
  t.ok(r.share(FOR) <= 0.08, "the loop's first line: " .. r.share(FOR))
  t.ok(r.share(10) + r.share(11) + r.share(12) >= 0.15,
       "lines 10-12 (the loop's start: its first snapshot): " ..
       (r.share(10) + r.share(11) + r.share(12)))
end)

t.case("inline=exact: an inlined function's code is not on its header line", function()
  local r = run("INLINE=exact", 500)
  common(r, "exact")
  t.eq(r.mode, "exact", "inline frames source")
  t.ok(r.share(HEADER) <= 0.03, "helper's header line: " .. r.share(HEADER))
  t.ok(r.share(3) + r.share(4) >= 0.20, "helper's lines 3-4: " .. (r.share(3) + r.share(4)))
end)

t.done()
