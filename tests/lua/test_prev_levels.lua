-- A safe point takes the frame ids of the outer levels of its live stack
-- from the safe point before, where both stacks agree from the bottom up
-- (luaframes.c: reuse_prev, issue 29): a level is reused only when it and
-- every level below it are the same function at the same slot (a Lua
-- frame at the same PC). Here one function is called from two call sites
-- of one caller, by two local names, at the same depth and slot, the
-- call sites alternating call by call: every sample in it must show the
-- name of its own call site and its caller the line of that call. Taking
-- the caller's level from the safe point before without its PC gives
-- the other call's line and name (checked by breaking it on purpose:
-- hundreds of mismatches).
local t = require("t")
local ljprof = require("ljprof")

local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
jit.off(work)
local WORK_LINE = debug.getinfo(work, "S").linedefined
local LINE_A, LINE_B
local function caller(i)
  if i % 2 == 0 then
    local alpha = work
    LINE_A = LINE_A or debug.getinfo(1, "l").currentline + 1
    return alpha(2e4) + 0
  else
    local beta = work
    LINE_B = LINE_B or debug.getinfo(1, "l").currentline + 1
    return beta(2e4) + 0
  end
end
jit.off(caller)
local function down(d, i) if d == 0 then return caller(i) end return down(d - 1, i) + 0 end
jit.off(down)

t.case("one function from two call sites at one depth: each sample its own call's name and line", function()
  ljprof.record({clock = "cpu", interval = 1, native = false})
  local c0, i = os.clock(), 0
  while os.clock() - c0 < 1.5 do
    i = i + 1
    down(12, i)
  end
  ljprof.stop()
  local p = ljprof.profile()
  local seen, bad, example = {alpha = 0, beta = 0}, 0, nil
  for _, s in ipairs(p.samples) do
    local n = #s
    local leaf, below = p.frames[s[n]], p.frames[s[n - 1]]
    if leaf and leaf.kind == "lua" and leaf.linedefined == WORK_LINE and below then
      local want = below.line == LINE_A and "alpha" or below.line == LINE_B and "beta" or nil
      if want and leaf.name == want then
        seen[want] = seen[want] + s.count
      else
        bad = bad + s.count
        example = example or string.format("%s called at line %s", tostring(leaf.name),
                                           tostring(below.line))
      end
    end
  end
  print(string.format("  alpha %d, beta %d, mismatched %d samples (calls %d)",
                      seen.alpha, seen.beta, bad, i))
  t.ok(seen.alpha >= 50 and seen.beta >= 50,
       string.format("both call sites sampled (alpha %d, beta %d)", seen.alpha, seen.beta))
  t.eq(bad, 0, "samples whose name or caller line is another call's (" .. tostring(example) .. ")")
end)

t.done()
