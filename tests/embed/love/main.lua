-- main.lua of a LÖVE game profiled with ljprof: every sample carries the
-- zone of the callback it was taken in (update, draw), each callback's
-- wall time is measured exactly (ljprof.wrap), and at quit the game
-- prints both and writes folded stacks with the zone as the root frame.
local ljprof = require("ljprof")

local balls = {}

function love.load()
  for i = 1, 3000 do balls[i] = {x = i % 800, y = i % 600, vx = 40, vy = 0} end
  ljprof.record{interval = 1}           -- sample every 1 ms of CPU time
end

function love.update(dt)
  for _, b in ipairs(balls) do
    b.vy = b.vy + 981 * dt
    b.x, b.y = (b.x + b.vx * dt) % 800, b.y + b.vy * dt
    if b.y > 600 then b.y, b.vy = 600, -0.9 * b.vy end
  end
end

function love.draw()
  for _, b in ipairs(balls) do love.graphics.circle("fill", b.x, b.y, 3) end
end

-- Each callback runs in a zone of its name while ljprof records.
love.update = ljprof.wrap(love.update, "update")
love.draw = ljprof.wrap(love.draw, "draw")

function love.quit()
  ljprof.stop()
  local per_zone, total = {}, 0
  local out = io.open(love.filesystem.getSaveDirectory() .. "/profile.folded", "w")
  for _, e in ipairs(ljprof.summary()) do
    local zone = e.zone ~= "" and e.zone or "(none)"
    per_zone[zone] = (per_zone[zone] or 0) + e.count
    total = total + e.count
    out:write("[zone ", zone, "];", e.stack, " ", e.count, "\n")
  end
  out:close()
  for zone, n in pairs(per_zone) do
    print(("%-8s %5.1f%% of %d samples"):format(zone, 100 * n / total, total))
  end
  for _, w in ipairs(ljprof.wrapped()) do
    print(("%-8s %d calls, mean %.3f ms, p99 %.3f ms"):format(
      w.name, w.count, w.mean / 1e6, w.p99 / 1e6))
  end
end
