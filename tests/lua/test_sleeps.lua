-- Sleeps through the FFI under the clocks that leave them alone (issue 28,
-- docs/operators.md "What each clock does to the program's system calls"):
-- usleep, nanosleep, poll and epoll_wait at 1 kHz on the cpu clock (and
-- itimer, one thread) return what they return unprofiled (0, no EINTR)
-- and last at least what they asked for (never an upper bound: the
-- machine may be slow). The wall and thread clocks interrupt them in this
-- version (documented there).
local t = require "t"
local ffi = require "ffi"
local ljprof = require "ljprof"

ffi.cdef[[
struct ljt_ts { long s, ns; };
int clock_gettime(int, struct ljt_ts *);
int usleep(unsigned);
int nanosleep(const struct ljt_ts *, struct ljt_ts *);
int poll(void *, unsigned long, int);
int epoll_create1(int);
int epoll_wait(int, void *, int, int);
int close(int);
]]
local C = ffi.C
local ts = ffi.new("struct ljt_ts")
local function now()
  C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.s) + tonumber(ts.ns) * 1e-9
end

local ep = C.epoll_create1(0)
local evbuf = ffi.new("uint8_t[64]")
local req = ffi.new("struct ljt_ts", {0, 20000000})
local CALLS = {
  {"usleep", function() return C.usleep(20000) end},
  {"nanosleep", function() return C.nanosleep(req, nil) end},
  {"poll", function() return C.poll(nil, 0, 20) end},
  {"epoll_wait", function() return C.epoll_wait(ep, evbuf, 1, 20) end},
}

-- Each call 5 times; returns {name = {rc..}}, eintr, the shortest sleep.
local function sleeps()
  local eintr, shortest, rcs = 0, math.huge, {}
  for _, c in ipairs(CALLS) do
    rcs[c[1]] = {}
    for _ = 1, 5 do
      local t0 = now()
      local rc = c[2]()
      local dt = now() - t0
      if rc < 0 and ffi.errno() == 4 then eintr = eintr + 1 end
      table.insert(rcs[c[1]], rc)
      if dt < shortest then shortest = dt end
    end
  end
  return rcs, eintr, shortest
end

local plain = sleeps()
for _, clock in ipairs({"cpu", "itimer"}) do
  t.case("FFI sleeps on the " .. clock .. " clock at 1 kHz: not interrupted, not shortened", function()
    ljprof.record{clock = clock, interval = 1}
    local rcs, eintr, shortest = sleeps()
    ljprof.stop()
    t.eq(eintr, 0, clock .. ": calls that returned EINTR")
    t.ok(shortest >= 0.0199, clock .. ": the shortest 20 ms sleep took " .. shortest .. " s")
    for _, c in ipairs(CALLS) do
      t.eq(table.concat(rcs[c[1]], " "), table.concat(plain[c[1]], " "),
           clock .. ": " .. c[1] .. " returns as unprofiled")
    end
  end)
end
C.close(ep)
t.done()
