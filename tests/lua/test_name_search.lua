-- Naming by value (names.c, ljp_lname_by_value) in a program whose
-- functions no variable holds: the searches for their names stop costing
-- a scan each (issue 29). After a few searches in a row that found
-- nothing, a search waits in a growing gap (at most 64 searches) and is
-- deferred, nothing read; a deferred prototype is asked again later and
-- never gets a wrong name.
local t = require("t")
local ljprof = require("ljprof")

-- N functions under integer keys (no by-value name finds them), each
-- with a hot loop, so that samples land in traces that start in each.
local function many(n, chunk)
  local src = {"local F = {}"}
  for i = 1, n do
    src[#src + 1] = string.format(
      "F[%d] = function(m) local s = %d for j = 1, m do s = s + j %% 7 end return s end", i, i)
  end
  src[#src + 1] = "return F"
  return assert(loadstring(table.concat(src, "\n"), chunk))()
end

t.case("name_search_deferred_after_misses: scans bounded, not one per function", function()
  local F = many(600, "=many600")
  ljprof.record({clock = "wall", interval = 1})
  local s = 0
  for k = 1, #F do s = s + F[k](60000) end
  -- then a function held by a local, run after the misses: still named
  local by_local = function(m) local x = 0 for j = 1, m do x = x + j % 5 end return x end
  local t0 = os.clock()
  while os.clock() - t0 < 0.3 do s = s + by_local(100000) end
  ljprof.stop()
  local st = ljprof.stats()
  local funcs = ljprof.summary()
  if os.getenv("VERBOSE") then
    print("searches", st.name_searches, "scans", st.name_scans, "signals", st.signals)
  end
  t.ok(type(st.name_searches) == "number" and type(st.name_scans) == "number",
       "stats() has name_searches and name_scans")
  t.ok(st.name_searches >= 40,
       string.format("enough searches to see the gap (%s)", tostring(st.name_searches)))
  -- 4 in a row, then gaps 1, 2, 4 .. 64: about 4 + 7 + searches / 64
  local bound = 4 + 7 + math.ceil(st.name_searches / 64) + 1
  t.ok(st.name_scans <= bound,
       string.format("scans %d <= %d (searches %d)", st.name_scans, bound, st.name_searches))
  -- never a wrong name: a function of the many chunk is named by its
  -- chunk and line only (nothing holds it under a name)
  local named_local, wrong = false, {}
  for _, f in ipairs(funcs) do
    for fr in f.stack:gmatch("[^;]+") do
      if fr:find("many600", 1, true) and not fr:match("^many600:%d+$") then
        wrong[#wrong + 1] = fr
      end
      if fr == "by_local" then named_local = true end
    end
  end
  if os.getenv("VERBOSE") then for _, f in ipairs(funcs) do if not f.stack:find("many600") then print(f.stack, f.count) end end end
  t.eq(#wrong, 0, "many600's functions by chunk:line only: " .. table.concat(wrong, ", "))
  t.ok(named_local, "the function a local holds is named after the misses")
  assert(s > 0)
end)

t.done()
