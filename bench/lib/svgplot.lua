-- A small SVG chart writer for the benchmark report: side-by-side panels
-- sharing one y axis, a logarithmic x axis, series drawn as points (with
-- optional error bars) joined by lines, and target markers. No
-- dependencies; the output is a standalone .svg file.
--
--   svgplot.render{
--     title = "...", xlabel = "...", ylabel = "...",
--     panels = {{title = "fib", series = {
--       {name = "ljprof wall", color = "#1f77b4", marker = "circle", line = true,
--        points = {{x = 100, y = 0.4, lo = 0.1, hi = 0.9}, ...}}, ...}}, ...},
--     targets = {{x = 100, y = 1, label = "target"}, ...},  -- drawn in every panel
--     xidle = 25,  -- optional: points at this x are "no samples", drawn left
--                  -- of a dashed break in the x axis
--     yclip = 40,  -- optional: the y axis ends there; points above it are
--                  -- drawn on the top edge with their value written next to them
--   } -> string
local M = {}

local W, H = 330, 270            -- one panel
local ML, MR, MT, MB = 56, 12, 30, 44
local LEGEND_H = 24

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                                       ['"'] = "&quot;"}))
end

local function fmt(x) return string.format("%.1f", x) end

-- "Nice" tick step for a range, about n ticks.
local function nice_step(range, n)
  local raw = range / n
  local mag = 10 ^ math.floor(math.log10(raw))
  for _, m in ipairs({1, 2, 2.5, 5, 10}) do
    if m * mag >= raw then return m * mag end
  end
  return 10 * mag
end

local function marker(shape, x, y, color)
  if shape == "square" then
    return string.format('<rect x="%s" y="%s" width="7" height="7" fill="%s"/>',
                         fmt(x - 3.5), fmt(y - 3.5), color)
  elseif shape == "triangle" then
    return string.format('<path d="M%s %sL%s %sL%s %sZ" fill="%s"/>', fmt(x), fmt(y - 4.5),
                         fmt(x + 4.5), fmt(y + 3.5), fmt(x - 4.5), fmt(y + 3.5), color)
  elseif shape == "diamond" then
    return string.format('<path d="M%s %sL%s %sL%s %sL%s %sZ" fill="%s"/>', fmt(x), fmt(y - 5),
                         fmt(x + 5), fmt(y), fmt(x), fmt(y + 5), fmt(x - 5), fmt(y), color)
  end
  return string.format('<circle cx="%s" cy="%s" r="3.8" fill="%s"/>', fmt(x), fmt(y), color)
end

function M.render(spec)
  local panels = spec.panels
  local out = {}
  local function p(s) out[#out + 1] = s end

  -- Ranges over all panels: x (log) and y (linear, including 0 and targets).
  local xmin, xmax, ymin, ymax = math.huge, -math.huge, 0, 0
  local function see(x, y)
    if x and x > 0 then xmin, xmax = math.min(xmin, x), math.max(xmax, x) end
    if y then ymin, ymax = math.min(ymin, y), math.max(ymax, y) end
  end
  for _, pn in ipairs(panels) do
    for _, s in ipairs(pn.series) do
      for _, pt in ipairs(s.points) do
        see(pt.x, pt.y); see(nil, pt.lo); see(nil, pt.hi)
      end
    end
  end
  for _, t in ipairs(spec.targets or {}) do see(t.x, t.y) end
  if xmin == math.huge then xmin, xmax = 10, 10000 end
  if spec.xidle then xmin = math.min(xmin, spec.xidle) end
  local lx0 = math.floor(math.log10(xmin) * 2) / 2
  local lx1 = math.ceil(math.log10(xmax) * 2) / 2
  if spec.xidle then lx0 = math.log10(spec.xidle) - 0.25 end
  if lx1 - lx0 < 1 then lx1 = lx0 + 1 end
  if spec.yclip then ymax = math.min(ymax, spec.yclip) end
  local ystep = nice_step(math.max(ymax - ymin, 1), 8)
  ymin = math.floor(ymin / ystep) * ystep
  ymax = math.ceil(ymax / ystep) * ystep
  if ymax == ymin then ymax = ymin + ystep end

  -- Legend items, wrapped into lines as wide as the chart.
  local total_w = math.max(#panels * W, 680)
  local items = {}
  for _, s in ipairs(panels[1] and panels[1].series or {}) do
    items[#items + 1] = {series = s, w = 24 + #s.name * 6.2}
  end
  if spec.targets and #spec.targets > 0 then items[#items + 1] = {target = true, w = 70} end
  local lines, x = 1, 10
  for _, it in ipairs(items) do
    if x + it.w > total_w - 10 and x > 10 then lines, x = lines + 1, 10 end
    it.line, it.x = lines, x
    x = x + it.w
  end
  local total_h = H + 26 + lines * LEGEND_H
  p(string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" ' ..
    'viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">', total_w, total_h, total_w, total_h))
  p(string.format('<rect width="%d" height="%d" fill="white"/>', total_w, total_h))
  p(string.format('<text x="%d" y="16" font-size="12" font-weight="bold">%s</text>', 8, esc(spec.title or "")))

  for pi, pn in ipairs(panels) do
    local ox, oy = (pi - 1) * W, 22
    local pw, ph = W - ML - MR, H - MT - MB
    local function X(x) return ox + ML + (math.log10(x) - lx0) / (lx1 - lx0) * pw end
    local function Y(y) return oy + MT + (ymax - y) / (ymax - ymin) * ph end
    p(string.format('<text x="%s" y="%s" font-weight="bold" text-anchor="middle">%s</text>',
                    fmt(ox + ML + pw / 2), fmt(oy + MT - 10), esc(pn.title)))
    p(string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#888"/>',
                    fmt(ox + ML), fmt(oy + MT), fmt(pw), fmt(ph)))
    -- y grid and labels
    local y = ymin
    while y <= ymax + ystep / 2 do
      p(string.format('<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s"/>', fmt(ox + ML),
                      fmt(ox + ML + pw), fmt(Y(y)), fmt(Y(y)), math.abs(y) < 1e-9 and "#444" or "#e4e4e4"))
      if pi == 1 then
        p(string.format('<text x="%s" y="%s" text-anchor="end">%s</text>', fmt(ox + ML - 4),
                        fmt(Y(y) + 4), (ystep < 1 and string.format("%.1f", y) or string.format("%g", y))))
      end
      y = y + ystep
    end
    -- x grid: 1, 2, 5 per decade
    for d = math.floor(lx0), math.ceil(lx1) do
      for _, m in ipairs({1, 2, 5}) do
        local x = m * 10 ^ d
        local l = math.log10(x)
        if l >= lx0 - 1e-9 and l <= lx1 + 1e-9 and not (spec.xidle and x < spec.xidle * 2.5) then
          p(string.format('<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#eee"/>', fmt(X(x)), fmt(X(x)),
                          fmt(oy + MT), fmt(oy + MT + ph)))
          p(string.format('<text x="%s" y="%s" text-anchor="middle">%s</text>', fmt(X(x)),
                          fmt(oy + MT + ph + 14), x >= 1000 and string.format("%gk", x / 1000) or string.format("%g", x)))
        end
      end
    end
    if spec.xidle then
      local xb = X(spec.xidle * 1.6)
      p(string.format('<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#888" stroke-dasharray="3,3"/>',
                      fmt(xb), fmt(xb), fmt(oy + MT), fmt(oy + MT + ph)))
      p(string.format('<text x="%s" y="%s" text-anchor="middle">none</text>', fmt(X(spec.xidle)),
                      fmt(oy + MT + ph + 14)))
    end
    p(string.format('<text x="%s" y="%s" text-anchor="middle">%s</text>', fmt(ox + ML + pw / 2),
                    fmt(oy + MT + ph + 32), esc(spec.xlabel or "")))
    if pi == 1 then
      p(string.format('<text transform="translate(%s %s) rotate(-90)" text-anchor="middle">%s</text>',
                      fmt(ox + 14), fmt(oy + MT + ph / 2), esc(spec.ylabel or "")))
    end
    -- targets
    for _, t in ipairs(spec.targets or {}) do
      p(string.format('<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#2a2" stroke-width="2"/>',
                      fmt(X(t.x) - 9), fmt(X(t.x) + 9), fmt(Y(t.y)), fmt(Y(t.y))))
      p(string.format('<text x="%s" y="%s" fill="#2a2" font-size="9">%s</text>', fmt(X(t.x) + 11),
                      fmt(Y(t.y) + 3), esc(t.label or "")))
    end
    -- series
    for _, s in ipairs(pn.series) do
      local pts = {}
      for _, pt in ipairs(s.points) do
        if pt.x and pt.x > 0 and pt.y then pts[#pts + 1] = pt end
      end
      table.sort(pts, function(a, b) return a.x < b.x end)
      if s.line and #pts > 1 then
        local d = {}
        for i, pt in ipairs(pts) do
          d[i] = (i == 1 and "M" or "L") .. fmt(X(pt.x)) .. " " .. fmt(Y(math.min(pt.y, ymax)))
        end
        p(string.format('<path d="%s" fill="none" stroke="%s" stroke-width="1.6"/>', table.concat(d), s.color))
      end
      for _, pt in ipairs(pts) do
        local y = math.min(pt.y, ymax)
        if pt.lo and pt.hi then
          p(string.format('<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-opacity="0.6"/>',
                          fmt(X(pt.x)), fmt(X(pt.x)), fmt(Y(math.min(pt.lo, ymax))),
                          fmt(Y(math.min(pt.hi, ymax))), s.color))
        end
        p(marker(s.marker, X(pt.x), Y(y), s.color))
        if pt.y > ymax then  -- off the chart: say where
          p(string.format('<text x="%s" y="%s" text-anchor="end" font-size="10" fill="%s">%+.0f%% ↑</text>',
                          fmt(X(pt.x) - 7), fmt(Y(ymax) + 4), s.color, pt.y))
        end
      end
    end
  end

  -- legend (series of the first panel)
  for _, it in ipairs(items) do
    local lx, ly = it.x, H + 22 + 14 + (it.line - 1) * LEGEND_H
    if it.series then
      p(marker(it.series.marker, lx + 5, ly - 4, it.series.color))
      p(string.format('<text x="%s" y="%s">%s</text>', fmt(lx + 14), fmt(ly), esc(it.series.name)))
    else
      p(string.format('<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#2a2" stroke-width="2"/>',
                      fmt(lx), fmt(lx + 14), fmt(ly - 4), fmt(ly - 4)))
      p(string.format('<text x="%s" y="%s">targets</text>', fmt(lx + 18), fmt(ly)))
    end
  end
  p("</svg>")
  return table.concat(out, "\n") .. "\n"
end

return M
