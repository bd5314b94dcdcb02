-- Naming by value (names.c, ljp_lname_by_value) through the test hook
-- ljprof._name_by_value: a table held in several places is looked
-- through once per search, so a table it holds twice does not spend the
-- search's budget (256 entries over the live levels) before the table
-- that names the function (issue 29: the searches' cost).
local t = require("t")
local ljprof = require("ljprof")

t.case("name_byval_seen_once: a table two locals hold is looked through once", function()
  -- one table of 200 named entries under three locals: walked three
  -- times it spends the live levels' budget before `holder`
  local big = {}
  for i = 1, 200 do big["k" .. i] = i end
  local a, b = big, big
  local holder = {target_fn = function(m) return m + 1 end}
  local name = ljprof._name_by_value(holder.target_fn)
  t.eq(name, "target_fn", "the function holder keeps is named")
  assert(a and b)
end)

t.case("name_byval: a function nothing names is not named", function()
  local list = {function() end}
  t.eq(ljprof._name_by_value(list[1]), nil, "no name under an integer key")
end)

t.done()
