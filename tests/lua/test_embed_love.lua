-- docs/embedding.md's LÖVE example (tests/embed/love/main.lua), driven
-- by a stand-in for LÖVE: a `love` table with the few functions the game
-- uses, and love.run's order of callbacks (load, then update(dt) and draw
-- each frame, quit at the end). LÖVE itself is not installed here. Also
-- run under Wine with the Windows build (tests/windows/meson.build,
-- win-love).
local t = require("t")

local dir = t.tmpdir()
local drawn = 0
love = {
  graphics = {circle = function(mode, x, y, r) drawn = drawn + 1 end},
  filesystem = {getSaveDirectory = function() return dir end},
}

t.case("love callbacks in zones", function()
  dofile(t.SRC .. "/tests/embed/love/main.lua")
  love.load()
  local frames, t0 = 0, os.clock()
  while os.clock() - t0 < 0.6 do          -- love.run's frame loop
    love.update(1 / 60)
    love.draw()
    frames = frames + 1
  end
  local printed = {}
  local print0 = print
  print = function(s) printed[#printed + 1] = s end
  love.quit()
  print = print0
  io.write(table.concat(printed, "\n"), "\n")

  local w = {}
  for _, x in ipairs(require("ljprof").wrapped()) do w[x.name] = x end
  t.eq(w.update and w.update.count, frames, "update calls timed")
  t.eq(w.draw and w.draw.count, frames, "draw calls timed")
  t.eq(drawn, frames * 3000, "circles drawn")

  local per, total, bad = {}, 0, {}
  for line in io.lines(dir .. "/profile.folded") do
    local zone, n = line:match("^%[zone ([^%]]+)%];.* (%d+)$")
    if zone then
      per[zone] = (per[zone] or 0) + tonumber(n)
      total = total + tonumber(n)
    else
      bad[#bad + 1] = line
    end
  end
  t.eq(#bad, 0, "folded lines: " .. table.concat(bad, " | "))
  t.ok(total >= 50, "samples: " .. total)
  t.ok((per.update or 0) > 0 and (per.draw or 0) > 0,
    ("samples in update %d, draw %d"):format(per.update or 0, per.draw or 0))
  t.ok((per.update or 0) + (per.draw or 0) >= total / 2,
    ("samples in the callbacks: %d of %d"):format((per.update or 0) + (per.draw or 0), total))
  local text = table.concat(printed, "\n")
  t.ok(text:find("update%s+%d+%.%d%% of") and text:find("draw%s+%d+%.%d%% of"), "zone shares printed")
  t.ok(text:find("update%s+%d+ calls, mean") and text:find("draw%s+%d+ calls, mean"), "timings printed")
end)

t.rmdir(dir)
t.done()
