-- Small statistics and formatting helpers for the benchmark reports:
-- medians, quartiles and the table cells built from them.
local M = {}

function M.sorted(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s
end

-- Quantile q (0..1) of t, linear interpolation between order statistics.
function M.quantile(t, q)
  local s = M.sorted(t)
  local n = #s
  if n == 0 then return nil end
  local pos = 1 + (n - 1) * q
  local lo = math.floor(pos)
  local frac = pos - lo
  if lo >= n then return s[n] end
  return s[lo] + (s[lo + 1] - s[lo]) * frac
end

function M.median(t) return M.quantile(t, 0.5) end

-- A distribution-free confidence interval for the median of the
-- population t was drawn from (order statistics): [s[k], s[n+1-k]] for the
-- largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least
-- conf. Returns lo, hi, the coverage; nil when n is too small for conf.
function M.median_ci(t, conf)
  local s = M.sorted(t)
  local n = #s
  local best, cover
  local below, pk = 0, 0.5 ^ n   -- P(B < k), P(B = k - 1)
  for k = 1, math.floor((n + 1) / 2) do
    below = below + pk
    pk = pk * (n - k + 1) / k
    if 1 - 2 * below < conf then break end
    best, cover = k, 1 - 2 * below
  end
  if not best then return nil end
  return s[best], s[n + 1 - best], cover
end

function M.minmax(t)
  local s = M.sorted(t)
  return s[1], s[#s]
end

function M.sum(t)
  local x = 0
  for _, v in ipairs(t) do x = x + v end
  return x
end

-- "1.023 (0.99-1.05)": median and interquartile range of ratios; marks
-- how many rounds it is made of when fewer than expected.
function M.ratio_cell(t, expect)
  if #t == 0 then return "(no data)" end
  local s = string.format("%.3f (%.3f-%.3f)", M.median(t), M.quantile(t, 0.25),
                          M.quantile(t, 0.75))
  if expect and #t < expect then s = s .. string.format(" [n=%d]", #t) end
  return s
end

-- "+1.2%": a median ratio as a percentage over 1.
function M.pct(r)
  if not r then return "(no data)" end
  return string.format("%+.1f%%", (r - 1) * 100)
end

function M.num(x, f)
  if x == nil then return "" end
  return string.format(f or "%.0f", x)
end

-- Nanoseconds as "850 ns" or "2.31 us".
function M.ns(x)
  if x == nil then return "" end
  if x >= 10000 then return string.format("%.1f us", x / 1000) end
  if x >= 1000 then return string.format("%.2f us", x / 1000) end
  return string.format("%.0f ns", x)
end

return M
