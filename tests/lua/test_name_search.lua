-- Naming by value (names.c) in a program whose functions no variable
-- holds, and in one whose functions a global table holds but no call site
-- names (issue 29). A function that no live level, call site or index
-- names (a trace's start function, a live frame called through a list) is
-- not searched for in the program's tables at a safe point: it waits for
-- the run's end, where one search names those a variable or field holds
-- (names_late, names_late_found), and their frames in the profile take
-- the name.
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

t.case("name_search_bounded: live scans bounded, the walk at the run's end", function()
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
    print("searches", st.name_searches, "scans", st.name_scans, "late", st.names_late,
          st.names_late_found, "signals", st.signals)
  end
  t.ok(type(st.name_searches) == "number" and type(st.name_scans) == "number",
       "stats() has name_searches and name_scans")
  t.ok(st.names_late >= 40,
       string.format("functions left to the end (%s)", tostring(st.names_late)))
  -- 4 scans in a row, then gaps 1, 2, 4 .. 64: about 4 + 7 + searches / 64
  t.ok(st.name_scans <= 4 + 7 + math.ceil(st.name_searches / 64) + 1,
       string.format("scans %d (searches %d)", st.name_scans, st.name_searches))
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
  t.eq(#wrong, 0, "many600's functions by chunk:line only: " .. table.concat(wrong, ", "))
  t.ok(named_local, "the function a local holds is named")
  assert(s > 0)
end)

-- Functions a global table holds under string keys, called through a
-- list (the call site names nothing), in a chunk with no file (the
-- writers cannot read a name from its source): named at the run's end,
-- in every view, the same as a search at the safe point named them.
t.case("name_late: functions a global holds are named at the end, in the profile", function()
  local src = {"LATEFN = {}", "local A = {}"}
  for i = 1, 60 do
    src[#src + 1] = string.format(
      "function LATEFN.work%d(m) local s = %d for j = 1, m do s = s + j %% 7 end return s end A[%d] = LATEFN.work%d",
      i, i, i, i)
  end
  src[#src + 1] = "return A"
  local A = assert(loadstring(table.concat(src, "\n"), "=latechunk"))()
  ljprof.record({clock = "wall", interval = 1})
  local s = 0
  for r = 1, 2 do
    for k = 1, #A do s = s + A[k](60000) end
  end
  ljprof.stop()
  local st = ljprof.stats()
  if os.getenv("VERBOSE") then
    print("late", st.names_late, st.names_late_found, "searches", st.name_searches)
  end
  t.ok(st.names_late >= 20 and st.names_late_found >= 20,
       string.format("left to the end: %d, found there: %d", st.names_late, st.names_late_found))
  -- every frame of the chunk is named, by the field that holds it
  local named, unnamed, wrong = 0, {}, {}
  for _, f in ipairs(ljprof.summary()) do
    for fr in f.stack:gmatch("[^;]+") do
      local i = fr:match("^work(%d+)$")
      if i then named = named + 1
      elseif fr:find("latechunk", 1, true) then unnamed[#unnamed + 1] = fr end
    end
  end
  t.ok(named >= 20, string.format("frames named workN: %d", named))
  t.eq(#unnamed, 0, "frames left as chunk:line: " .. table.concat(unnamed, ", "))
  -- the structured profile (every writer's) carries the names too, each
  -- on its own prototype's first line
  local p = ljprof.profile()
  for _, fr in ipairs(p.frames) do
    if fr.kind == "lua" and fr.file == "latechunk" then
      local i = tonumber((fr.name or ""):match("^work(%d+)$"))
      if not i or fr.linedefined ~= i + 2 then wrong[#wrong + 1] = tostring(fr.name) .. "@" .. fr.linedefined end
    end
  end
  t.eq(#wrong, 0, "profile() frames named by their own function: " .. table.concat(wrong, ", "))
  LATEFN = nil
  assert(s > 0)
end)

t.done()
