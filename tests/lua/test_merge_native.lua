-- A full ring with native capture on (issue 27): a compiled loop that
-- calls two C functions through stitched traces reaches no safe point, so
-- its ticks merge into pending records. A tick must merge only into a
-- record of its own C function (and its own stack, or at least its leaf
-- function), else be dropped: before, every C tick joined the newest C
-- record, whatever its function (cjson.encode 47% against 24% timed).
local t = require("t")
local ljprof = require("ljprof")

local CTEST = assert(os.getenv("LJPROF_CTEST"), "LJPROF_CTEST not set (run from meson)")
local ctest = package.loadlib(CTEST, "luaopen_ljp_ctest")()
package.loaded.ljp_ctest = ctest  -- so that its functions are named
local ok_cjson, cjson = pcall(require, "cjson")

t.case("full ring, native on: C ticks keep their own function (compiled loop, two C functions)", function()
  if not t.ok(ok_cjson, "lua-cjson is installed (Debian lua-cjson): " .. tostring(cjson)) then return end
  local doc = {}
  for i = 1, 40 do doc[i] = {id = i, name = "item" .. i, tags = {"a", "b", "c"}, v = i * 1.5} end
  local clock, encode, run = os.clock, cjson.encode, ctest.run
  -- The truth: each part timed by os.clock around it, in the same loop
  -- (the same moments, the same load), outside the profiler.
  local ta, tb = 0, 0
  local function loop(n)
    local s = 0
    for _ = 1, n do
      local c0 = clock()
      s = s + #encode(doc)
      local c1 = clock()
      s = s + run(60000)
      local c2 = clock()
      ta, tb = ta + (c1 - c0), tb + (c2 - c1)
    end
    return s
  end
  loop(300)  -- compiled before the run
  ta, tb = 0, 0
  ljprof.record({clock = "wall", rate = 1000, ring = 64, native = true, fmt = "fZ;", depth = -100})
  local t0 = clock()
  while clock() - t0 < 5 do loop(4000) end
  ljprof.stop()
  local e, st = ljprof.summary(), ljprof.stats()
  local A, B, O = 0, 0, 0
  for _, x in ipairs(e) do
    local ha, hb = x.stack:find("cjson.encode", 1, true), x.stack:find("ljp_ctest.run", 1, true)
    t.ok(not (ha and hb), "one stack, one of the two C functions: " .. x.stack)
    if ha then A = A + x.count elseif hb then B = B + x.count else O = O + x.count end
  end
  local truth, share = ta / (ta + tb), A / math.max(1, A + B)
  local tvd = math.abs(share - truth)  -- two functions: TVD = |difference|
  print(string.format("  timed: encode %.2f s, run %.2f s (encode %.3f); profile: encode %d, run %d, other %d " ..
                      "(encode %.3f), TVD %.3f; %d merged, %d dropped, %d safe points",
                      ta, tb, truth, A, B, O, share, tvd, st.merged, st.dropped, st.safepoints))
  t.ok(st.merged > 1000, "the ring was full and ticks merged: " .. st.merged)
  t.ok(A + B >= 2000, "enough samples: " .. (A + B))
  t.ok(tvd <= 0.05, string.format("function shares within TVD 0.05 of the timed ones: %.3f", tvd))
end)

t.done()
