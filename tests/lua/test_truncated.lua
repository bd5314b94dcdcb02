-- Cut-off stacks (issue 27). The handler captures the 20 innermost Lua
-- frames; a deep recursion whose returns are compiled (one trace runs
-- back through many levels before it exits) reaches its safe point after
-- all of them returned. Their callers must still show, joined through the
-- frames recorded below the captured ones (the spine, ring.h), with
-- "[truncated]" where frames were skipped: no sample of the recursion may
-- stand as a root without its caller main_work.
local t = require "t"
local ljprof = require "ljprof"

local tab = {}
for i = 0, 9 do tab[i] = i * 0.5 end
local function rec(n)
  if n == 0 then return 1 end
  local x = n * 1.5 + tab[n % 10]
  local r = rec(n - 1)
  return r * 1.0000001 + x * 0.5 + tab[(n * 7) % 10]
end
local function main_work(sec)
  local s, t0 = 0, os.clock()
  while os.clock() - t0 < sec do
    for _ = 1, 200 do s = s + rec(300) end
  end
  return s
end

t.case("deep compiled returns: every sample under its caller", function()
  ljprof.record{interval = 1, clock = "cpu", depth = -1000}
  main_work(0.6)
  ljprof.stop()
  local all, cut, stray, trunc, deep = 0, 0, 0, 0, 0
  for _, e in ipairs(ljprof.summary()) do
    all = all + e.count
    local _, recs = e.stack:gsub("rec", "")
    if recs >= 20 then deep = deep + e.count end
    if e.stack:find("[truncated]", 1, true) then trunc = trunc + e.count end
    if not e.stack:find("main_work", 1, true) and e.stack ~= "[ljprof]" then
      -- (a tick whose records wait for stop's safe point, when main_work
      -- has returned: joined to the live caller there, [truncated] marks
      -- main_work's place; anything else is a stray root)
      cut = cut + e.count
      if not e.stack:find("[truncated]", 1, true) then stray = stray + e.count end
      if cut - e.count < 3 then io.stderr:write("  cut: ", e.stack:sub(1, 160), "\n") end
    end
  end
  print(string.format("  %d samples, %d with 20+ rec frames, %d not under main_work, %d [truncated]",
                      all, deep, cut, trunc))
  t.ok(all >= 100, "enough samples")
  t.ok(deep >= all / 4, "the recursion is sampled deep")
  t.eq(stray, 0, "samples neither under main_work nor joined by [truncated]")
  t.ok(cut <= all * 0.05, "samples joined below main_work (completed after it returned): " .. cut)
  t.ok(trunc > 0, "skipped frames are marked [truncated]")
end)

t.done()
