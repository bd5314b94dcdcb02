-- Workload "spectralnorm": numeric compiled loops with a small function
-- called (and inlined into the trace) in the innermost loop: the spectral
-- norm of the infinite matrix A(i,j) = 1/((i+j)(i+j+1)/2 + i + 1), by the
-- power method on an N x N section, ~0.7 s unprofiled.
local function A(i, j)
  local ij = i + j - 1
  return 1.0 / (ij * (ij - 1) * 0.5 + i)
end

local function Av(x, y, n)      -- y = A x
  for i = 1, n do
    local s = 0.0
    for j = 1, n do s = s + A(i, j) * x[j] end
    y[i] = s
  end
end

local function Atv(x, y, n)     -- y = A' x
  for i = 1, n do
    local s = 0.0
    for j = 1, n do s = s + A(j, i) * x[j] end
    y[i] = s
  end
end

local function AtAv(x, y, t, n)
  Av(x, t, n)
  Atv(t, y, n)
end

local n = 2500
local u, v, t = {}, {}, {}
for i = 1, n do u[i] = 1.0 end
for _ = 1, 25 do
  AtAv(u, v, t, n)
  AtAv(v, u, t, n)
end
local vBv, vv = 0.0, 0.0
for i = 1, n do
  vBv = vBv + u[i] * v[i]
  vv = vv + v[i] * v[i]
end
print(string.format("spectralnorm %.9f", math.sqrt(vBv / vv)))
