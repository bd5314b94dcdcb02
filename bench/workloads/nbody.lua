-- Workload "nbody": a numeric compiled loop over objects (an n-body
-- gravitational simulation of five bodies in the style of the Benchmarks
-- Game, leapfrog steps, field access on small tables), ~0.7 s unprofiled.
-- Almost all time is in two traces; the energy printed is the check value.
local sqrt = math.sqrt

local PI = 3.141592653589793
local SOLAR_MASS = 4 * PI * PI
local DAYS = 365.24

local function body(x, y, z, vx, vy, vz, mass)
  return {x = x, y = y, z = z, vx = vx * DAYS, vy = vy * DAYS, vz = vz * DAYS,
          mass = mass * SOLAR_MASS}
end

-- A sun and four outer planets (orbital elements rounded; any values do).
local bodies = {
  body(0, 0, 0, 0, 0, 0, 1),
  body(4.84, -1.16, -0.10, 1.66e-3, 7.70e-3, -6.90e-5, 9.55e-4),
  body(8.34, 4.12, -0.40, -2.77e-3, 4.99e-3, 2.30e-5, 2.86e-4),
  body(12.89, -15.11, -0.22, 2.96e-3, 2.38e-3, -2.96e-5, 4.37e-5),
  body(15.38, -25.92, 0.18, 2.68e-3, 1.63e-3, -9.51e-5, 5.15e-5),
}

-- Give the sun the momentum that makes the total zero.
local function offset(b)
  local px, py, pz = 0, 0, 0
  for i = 1, #b do
    px = px + b[i].vx * b[i].mass
    py = py + b[i].vy * b[i].mass
    pz = pz + b[i].vz * b[i].mass
  end
  b[1].vx = -px / SOLAR_MASS
  b[1].vy = -py / SOLAR_MASS
  b[1].vz = -pz / SOLAR_MASS
end

local function advance(b, n, dt)
  for i = 1, n do
    local bi = b[i]
    local x, y, z, mi = bi.x, bi.y, bi.z, bi.mass
    local vx, vy, vz = bi.vx, bi.vy, bi.vz
    for j = i + 1, n do
      local bj = b[j]
      local dx, dy, dz = x - bj.x, y - bj.y, z - bj.z
      local d2 = dx * dx + dy * dy + dz * dz
      local mag = dt / (d2 * sqrt(d2))
      local mj = bj.mass * mag
      vx, vy, vz = vx - dx * mj, vy - dy * mj, vz - dz * mj
      local m = mi * mag
      bj.vx, bj.vy, bj.vz = bj.vx + dx * m, bj.vy + dy * m, bj.vz + dz * m
    end
    bi.vx, bi.vy, bi.vz = vx, vy, vz
    bi.x, bi.y, bi.z = x + dt * vx, y + dt * vy, z + dt * vz
  end
end

local function energy(b)
  local e = 0
  for i = 1, #b do
    local bi = b[i]
    e = e + 0.5 * bi.mass * (bi.vx * bi.vx + bi.vy * bi.vy + bi.vz * bi.vz)
    for j = i + 1, #b do
      local bj = b[j]
      local dx, dy, dz = bi.x - bj.x, bi.y - bj.y, bi.z - bj.z
      e = e - bi.mass * bj.mass / sqrt(dx * dx + dy * dy + dz * dz)
    end
  end
  return e
end

offset(bodies)
local e0 = energy(bodies)
for _ = 1, 6000000 do advance(bodies, #bodies, 0.01) end
print(string.format("nbody %.9f %.9f", e0, energy(bodies)))
