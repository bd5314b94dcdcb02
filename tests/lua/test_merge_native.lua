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

-- Merged ticks keep their own native frames (issue 27): one C function
-- (ljp_ctest.two, called through a Lua wrapper from a compiled loop) runs
-- first below ljpt_alpha, then below ljpt_beta, both ending in the same
-- leaf, with no safe point between. When the second phase starts, the
-- full ring holds only records of the first: before, a tick below
-- ljpt_beta joined one of them (the same C function, outermost and leaf
-- functions) and was shown below ljpt_alpha. Now it joins a record that
-- shows only its own frames (ljp_ctest.two, then "[merged]"), or is
-- dropped: ljpt_alpha's share stays within 0.05 of the first phase's timed
-- share, and ljpt_beta's no higher than the second's.
t.case("full ring, native on: merged ticks keep their own native frames (one C function, two native stacks)", function()
  local clock, two = os.clock, ctest.two
  local function work(k) return two(20000, k) end  -- the Lua wrapper
  local function loop(t1, t2)
    local s, ta, tb, c0 = 0, 0, 0, clock()
    local c = c0
    while c - c0 < t1 + t2 do
      local k = c - c0 < t1 and 1 or 2
      s = s + work(k)
      local c2 = clock()
      if k == 1 then ta = ta + (c2 - c) else tb = tb + (c2 - c) end
      c = c2
    end
    return s, ta, tb
  end
  loop(0.1, 0.1)  -- compiled before the run
  local A, B, M, O, N, ta, tb, st = 0, 0, 0, 0, 0, 0, 0, nil
  local rounds = 0
  repeat
    rounds = rounds + 1
    ljprof.record({clock = "wall", rate = 1000, ring = 64, native = true, fmt = "fZ;", depth = -100})
    local _, a, b = loop(0.4, 1.2)
    ljprof.stop()
    ta, tb = ta + a, tb + b
    st = ljprof.stats()
    N = N + st.merged
    for _, x in ipairs(ljprof.summary()) do
      local ha, hb = x.stack:find("ljpt_alpha", 1, true), x.stack:find("ljpt_beta", 1, true)
      t.ok(not (ha and hb), "one stack, one of the two native paths: " .. x.stack)
      if ha then A = A + x.count
      elseif hb then B = B + x.count
      elseif x.stack:find("[merged]", 1, true) then
        M = M + x.count
        -- right above the C function Lua called (the loop's os.clock too)
        t.ok(x.stack:find(";ljp_ctest.two;[merged]", 1, true) or x.stack:find(";os.clock;[merged]", 1, true),
             "[merged] right above its C function: " .. x.stack)
      else O = O + x.count end
    end
  until rounds == 3
  local all = math.max(1, A + B + M)
  local truth = ta / (ta + tb)
  print(string.format("  timed: alpha phase %.2f s, beta phase %.2f s (alpha %.3f); profile: alpha %d, beta %d, " ..
                      "[merged] %d, other %d (alpha %.3f, beta %.3f); %d merged, last run %d dropped, %d safe points",
                      ta, tb, truth, A, B, M, O, A / all, B / all, N, st.dropped, st.safepoints))
  t.ok(N > 1000, "the ring was full and ticks merged: " .. N)
  t.ok(A + B + M >= 2000, "enough samples: " .. (A + B + M))
  t.ok(A / all <= truth + 0.05, string.format("ljpt_alpha's share %.3f within 0.05 of its phase's %.3f", A / all, truth))
  t.ok(B / all <= 1 - truth + 0.05, string.format("ljpt_beta's share %.3f at most its phase's %.3f + 0.05", B / all, 1 - truth))
end)

t.done()
