-- Workload "mandelbrot": a numeric compiled loop (floating-point Mandelbrot
-- set, as in the Benchmarks Game, but counting points instead of writing a
-- bitmap), ~0.7 s unprofiled. Almost all time is in one hot trace.
local function mandel(size, iter)
  local inside = 0
  local limit2 = 4.0
  for y = 0, size - 1 do
    local ci = 2.0 * y / size - 1.0
    for x = 0, size - 1 do
      local cr = 2.0 * x / size - 1.5
      local zr, zi = 0.0, 0.0
      local escaped = false
      for _ = 1, iter do
        local zr2, zi2 = zr * zr, zi * zi
        if zr2 + zi2 > limit2 then escaped = true; break end
        zi = 2.0 * zr * zi + ci
        zr = zr2 - zi2 + cr
      end
      if not escaped then inside = inside + 1 end
    end
  end
  return inside
end

print("mandelbrot", mandel(2700, 100))
