-- game_loop.lua: a small simulated game for ljprof's zones. Each frame
-- runs three subsystems, each inside its own zone:
--   AI       entities pick targets and steer (table lookups, math)
--   PHYSICS  integrate positions, resolve collisions on a grid
--   RENDER   build a draw list: strings and tables (allocation, GC)
-- The zones are jit.zone's interface, so the same code runs with LuaJIT's
-- own jit.zone; under ljprof (luajit -jprof=z, or require "ljprof".zone)
-- each sample is charged to the zone active when its tick happened.
--
--   luajit -jprof=z examples/game_loop.lua        time per subsystem
--   luajit -jprof=zf examples/game_loop.lua       and the functions in each
--   build/ljprof -o game.svg examples/game_loop.lua   flame graph
local zone = require("jit.zone")

local FRAMES = tonumber(arg and arg[1]) or 5000
local N = 300                               -- entities

local entities = {}
for i = 1, N do
  entities[i] = {id = i, x = (i * 37) % 500, y = (i * 91) % 500,
                 vx = (i % 7) - 3, vy = (i % 5) - 2, target = nil, hp = 100}
end

-- AI: each entity looks at a few others and steers toward the nearest.
local function think(e)
  local best, bestd = nil, math.huge
  for k = 1, 24 do
    local o = entities[(e.id * 13 + k * 7) % N + 1]
    if o ~= e then
      local dx, dy = o.x - e.x, o.y - e.y
      local d = dx * dx + dy * dy
      if d < bestd then best, bestd = o, d end
    end
  end
  e.target = best
  if best then
    local dx, dy = best.x - e.x, best.y - e.y
    local len = math.sqrt(dx * dx + dy * dy) + 1e-9
    e.vx, e.vy = e.vx * 0.9 + dx / len * 0.3, e.vy * 0.9 + dy / len * 0.3
  end
end

local function update_ai()
  for i = 1, N do think(entities[i]) end
end

-- PHYSICS: move, then resolve collisions through a coarse grid.
local function integrate(dt)
  for i = 1, N do
    local e = entities[i]
    e.x, e.y = (e.x + e.vx * dt) % 500, (e.y + e.vy * dt) % 500
  end
end

local function collide()
  local grid = {}
  for i = 1, N do
    local e = entities[i]
    local key = math.floor(e.x / 25) * 32 + math.floor(e.y / 25)
    local cell = grid[key]
    if cell then
      for j = 1, #cell do
        local o = cell[j]
        local dx, dy = o.x - e.x, o.y - e.y
        if dx * dx + dy * dy < 16 then e.vx, o.vx = o.vx, e.vx; e.hp = e.hp - 1 end
      end
      cell[#cell + 1] = e
    else
      grid[key] = {e}
    end
  end
end

local function step_physics()
  for _ = 1, 4 do integrate(0.25) collide() end
end

-- RENDER: a draw list of strings, as a renderer's command buffer would be.
local function draw_entity(e, out)
  out[#out + 1] = string.format("sprite %d %.1f %.1f hp=%d", e.id, e.x, e.y, e.hp)
end

local function render(frame)
  local out = {}
  for i = 1, N do draw_entity(entities[i], out) end
  out[#out + 1] = "frame " .. frame
  return table.concat(out, "\n")
end

local checksum = 0
for frame = 1, FRAMES do
  zone("AI") update_ai() zone()
  zone("PHYSICS") step_physics() zone()
  zone("RENDER") checksum = checksum + #render(frame) zone()
end
print("game_loop: " .. FRAMES .. " frames, checksum " .. checksum)
