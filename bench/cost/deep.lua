-- Cost gate workload: samples at depth DEPTH (default 20) with a Lua
-- leaf, interpreted (jit.off) and compiled (the leaf's loop), REPS times.
-- MODE "interp": the interpreted leaf only (2 x REPS calls), where each
-- safe point serves about one signal (in the compiled loop no safe point
-- comes until the loop ends: a safe point there serves the 3-6 signals
-- that came meanwhile), so a safe point's figure is one sample's.
local DEPTH, REPS = tonumber((...)) or 20, tonumber(select(2, ...) or 20)
local MODE = select(3, ...)
local function leaf(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function leafi(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
jit.off(leafi)
local function down(d, n, f) if d == 0 then return f(n) end return down(d - 1, n, f) + 0 end
jit.off(down)
local s = 0
if MODE == "interp" then
  for _ = 1, 2 * REPS do s = s + down(DEPTH - 2, 2e4, leafi) end
else
  for _ = 1, REPS do s = s + down(DEPTH - 2, 2e5, leaf) + down(DEPTH - 2, 2e4, leafi) end
end
print("deep", s)
