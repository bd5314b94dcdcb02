-- A full ring with native capture on (issue 27): a compiled loop that
-- calls C functions through the FFI stays in its trace (the calls are
-- compiled) and reaches no safe point, so its ticks merge into pending
-- records. A tick must merge only into a record of its own C function (and
-- its own stack, or at least its leaf function), else be dropped: before,
-- every C tick joined the newest C record, whatever its function
-- (cjson.encode 47% against 24% timed).
--
-- (These cases called Lua C functions through stitched traces until the
-- safe point was armed with the call bit too: such a loop now reaches a
-- safe point per tick and its ring no longer fills,
-- test_stitched_safepoints.lua. A loop that never leaves its trace still
-- fills it.) The truth is timed with libc's clock() through the FFI: an
-- os.clock call would be a stitched C call, a safe point.
local t = require("t")
local ljprof = require("ljprof")
local ffi = require("ffi")

local FFITEST = assert(os.getenv("LJPROF_FFITEST"), "LJPROF_FFITEST not set (run from meson)")
ffi.cdef[[
double ljpf_outer(long n);
double ljpf_two(long n, int k);
long clock(void);
]]
local lib = ffi.load(FFITEST)
local C = ffi.C
local CPS = 1e6  -- CLOCKS_PER_SEC (POSIX)

t.case("full ring, native on: C ticks keep their own function (compiled loop, two C functions)", function()
  local outer, two, clock = lib.ljpf_outer, lib.ljpf_two, C.clock
  -- The truth: each part timed by clock() around it, in the same loop
  -- (the same moments, the same load), outside the profiler.
  local function loop(secs)
    local s, ta, tb = 0, 0, 0
    local c0 = clock()
    local c, lim = c0, secs * CPS
    while tonumber(c - c0) < lim do
      s = s + outer(40000)
      local c1 = clock()
      s = s + two(80000, 1)
      local c2 = clock()
      ta, tb = ta + tonumber(c1 - c), tb + tonumber(c2 - c1)
      c = c2
    end
    return s, ta / CPS, tb / CPS
  end
  loop(0.2)  -- compiled before the run
  ljprof.record({clock = "wall", rate = 1000, ring = 64, native = true, fmt = "fZ;", depth = -100})
  local _, ta, tb = loop(5)
  ljprof.stop()
  local e, st = ljprof.summary(), ljprof.stats()
  local A, B, O = 0, 0, 0
  for _, x in ipairs(e) do
    local ha, hb = x.stack:find("ljpf_outer", 1, true), x.stack:find("ljpf_two", 1, true)
    t.ok(not (ha and hb), "one stack, one of the two C functions: " .. x.stack)
    if ha then A = A + x.count elseif hb then B = B + x.count else O = O + x.count end
  end
  local truth, share = ta / (ta + tb), A / math.max(1, A + B)
  local tvd = math.abs(share - truth)  -- two functions: TVD = |difference|
  print(string.format("  timed: outer %.2f s, two %.2f s (outer %.3f); profile: outer %d, two %d, other %d " ..
                      "(outer %.3f), TVD %.3f; %d signals, %d merged, %d dropped, %d safe points",
                      ta, tb, truth, A, B, O, share, tvd, st.signals, st.merged, st.dropped, st.safepoints))
  t.ok(st.merged > 1000, "the ring was full and ticks merged: " .. st.merged)
  t.ok(A + B >= 2000, "enough samples: " .. (A + B))
  t.ok(tvd <= 0.05, string.format("function shares within TVD 0.05 of the timed ones: %.3f", tvd))
end)

-- Merged ticks keep their own native frames (issue 27): one C function
-- (ljpf_two, called through a Lua wrapper from a compiled loop) runs first
-- below ljpf_alpha, then below ljpf_beta, both ending in the same leaf,
-- with no safe point between. When the second phase starts, the full ring
-- holds only records of the first: before, a tick below ljpf_beta joined
-- one of them (the same C function, outermost and leaf functions) and was
-- shown below ljpf_alpha. Now it joins a record that shows only its own
-- frames (ljpf_two, then "[merged]"), or is dropped: ljpf_alpha's share
-- stays within 0.05 of the first phase's timed share, and ljpf_beta's no
-- higher than the second's.
t.case("full ring, native on: merged ticks keep their own native frames (one C function, two native stacks)", function()
  local two, clock = lib.ljpf_two, C.clock
  local function work(k) return two(20000, k) end  -- the Lua wrapper
  local function loop(t1, t2)
    local s, ta, tb, c0 = 0, 0, 0, clock()
    local c, l1, l2 = c0, t1 * CPS, (t1 + t2) * CPS
    while tonumber(c - c0) < l2 do
      local k = tonumber(c - c0) < l1 and 1 or 2
      s = s + work(k)
      local c2 = clock()
      if k == 1 then ta = ta + tonumber(c2 - c) else tb = tb + tonumber(c2 - c) end
      c = c2
    end
    return s, ta / CPS, tb / CPS
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
      local ha, hb = x.stack:find("ljpf_alpha", 1, true), x.stack:find("ljpf_beta", 1, true)
      t.ok(not (ha and hb), "one stack, one of the two native paths: " .. x.stack)
      if ha then A = A + x.count
      elseif hb then B = B + x.count
      elseif x.stack:find("[merged]", 1, true) then
        M = M + x.count
        -- right above the C function the trace called (the loop's clock too)
        t.ok(x.stack:find(";ljpf_two;[merged]", 1, true) or x.stack:find(";loop;clock;[merged]", 1, true),
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
  t.ok(A / all <= truth + 0.05, string.format("ljpf_alpha's share %.3f within 0.05 of its phase's %.3f", A / all, truth))
  t.ok(B / all <= 1 - truth + 0.05, string.format("ljpf_beta's share %.3f at most its phase's %.3f + 0.05", B / all, 1 - truth))
end)

t.done()
