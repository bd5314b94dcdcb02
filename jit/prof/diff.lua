----------------------------------------------------------------------------
-- jit.prof.diff: what changed between two profiles of one program
-- (`ljprof report --diff before.ljprof after.ljprof`).
--
--   local diff = require("jit.prof.diff")
--   local d = diff.compare(before, after)      -- p's of jit.prof.model
--   diff.text(d, {before = "a.ljprof", after = "b.ljprof"})  -- the report
--   diff.profile(d)     -- the after profile, each sample with .before:
--                       -- jit.prof.svg draws it as a differential graph
--
-- Normalized by total samples: every share is of its own profile's total,
-- and in the flame graph the before counts are scaled by after's total /
-- before's total, so that two runs of different lengths (or rates)
-- compare; the report says so in its header.
--
-- Rules:
-- - Frames of the two profiles are matched per function, as the report
--   matches them (below; a function's lines are one frame), C functions
--   and native frames by name. Their labels in the graph are
--   model.names' over both profiles (a name two functions share is
--   qualified in both).
-- - The report is per function: the innermost Lua frame of each sample
--   (native frames left out, as -jp's views do; a C function Lua called,
--   such as string.rep, is a function) for "self", every function on the
--   stack once for "total". A named Lua function is matched by file and
--   name, not by its first line (an edit above it moves that line), unless
--   its file has several functions of that name; unnamed ones by file and
--   first line. Rows: the functions whose self share grew most first, down
--   to those that shrank most; rows that moved less than 0.05 points in
--   self and total and hold under 0.5% are left out.
-- - The flame graph: width from the after profile (as flamegraph.pl draws
--   difffolded.pl's output); colour by each frame's change, after minus
--   scaled before (its samples with its callees'), red grew, blue shrank,
--   the deeper the more, relative to the largest change; white-grey
--   unchanged. A stack that only the before profile has has no width:
--   the report lists what vanished.
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

local format = string.format

-- The function key of a frame (and whether it holds the first line): a
-- named Lua function by file and name, unless one of the profiles has
-- two first lines for that name in that file.
local function keyer(a, b)
  local ambiguous = {}
  for _, q in ipairs({a, b}) do
    local seen = {}
    for _, fr in ipairs(q.frames) do
      if fr.lua and fr.name then
        local k = fr.file .. "\0" .. fr.name
        local ld = tostring(fr.linedefined)
        if seen[k] and seen[k] ~= ld then ambiguous[k] = true end
        seen[k] = seen[k] or ld
      end
    end
  end
  return function(fr)
    if not fr.lua then return "C\0" .. tostring(fr.name), false end
    if fr.name then
      local k = fr.file .. "\0" .. fr.name
      if ambiguous[k] then return "L\0" .. k .. "\0" .. tostring(fr.linedefined), true end
      return "L\0" .. k, false
    end
    return "U\0" .. fr.file .. "\0" .. tostring(fr.linedefined), true
  end
end

-- compare(before, after) -> d: {p = the merged profile (after samples
-- with .before, scaled; before-only stacks with count 0), a = before, b =
-- after, scale = after total / before total}.
function M.compare(a, b)
  -- One name per function over both profiles (a function named in one
  -- run and unnamed in the other is one function).
  model.unify_names_all({a, b})
  local p = {frames = {}, samples = {}, total = 0}
  local index = {}
  local keyof = keyer(a, b)
  local function merge_frames(src)
    local of = {}
    for id, fr in ipairs(src.frames) do
      local k = fr.native and ("N\0" .. tostring(fr.name)) or keyof(fr)
      local nid = index[k]
      if not nid then
        nid = #p.frames + 1
        local c = {}
        for f, v in pairs(fr) do c[f] = v end
        c.id = nid
        p.frames[nid] = c
        index[k] = nid
      end
      of[id] = nid
    end
    return of
  end
  local of_a, of_b = merge_frames(a), merge_frames(b)
  local scale = a.total > 0 and b.total / a.total or 0
  local by = {}
  local function sample(s, of, field, mul)
    local stack = {}
    for i, id in ipairs(s.stack) do stack[i] = of[id] end
    local k = table.concat(stack, ",") .. "\0" .. tostring(s.vmstate)
    local e = by[k]
    if not e then
      e = {stack = stack, vmstate = s.vmstate, zone = s.zone, count = 0, before = 0}
      by[k] = e
      p.samples[#p.samples + 1] = e
    end
    e[field] = e[field] + s.count * mul
  end
  for _, s in ipairs(b.samples) do sample(s, of_b, "count", 1) end
  for _, s in ipairs(a.samples) do sample(s, of_a, "before", scale) end
  p.total = b.total
  p.diff = true
  return {p = p, a = a, b = b, scale = scale}
end

-- The differential profile for jit.prof.svg.
function M.profile(d)
  return d.p
end

-- Per function of profile q: self and total counts by function key;
-- funcs[key] = {fr = a frame of it, line = whether the key has its first
-- line}.
local function per_function(q, keyof, funcs)
  local self, total = {}, {}
  for _, s in ipairs(q.samples) do
    local stack = model.lua_stack(q, s.stack)
    local leaf
    if #stack == 0 then
      leaf = "[" .. (model.VMNAMES[s.vmstate] or tostring(s.vmstate)) .. "]"
      funcs[leaf] = funcs[leaf] or {fr = {lua = false, name = leaf}}
      total[leaf] = (total[leaf] or 0) + s.count
    else
      local seen = {}
      for _, id in ipairs(stack) do
        local fr = q.frames[id]
        local k, line = keyof(fr)
        funcs[k] = funcs[k] or {fr = fr, line = line}
        if not seen[k] then
          seen[k] = true
          total[k] = (total[k] or 0) + s.count
        end
      end
      leaf = keyof(q.frames[stack[#stack]])
    end
    self[leaf] = (self[leaf] or 0) + s.count
  end
  return self, total
end

local function pct(n, total) return total > 0 and n * 100 / total or 0 end

-- rows(d) -> list of {name=, self_a=, self_b=, delta=, total_a=,
-- total_b=, tdelta=} (shares in percent of each profile's total), the
-- self share that grew most first.
function M.rows(d)
  local keyof = keyer(d.a, d.b)
  local funcs = {}
  local sa, ta = per_function(d.a, keyof, funcs)
  local sb, tb = per_function(d.b, keyof, funcs)
  -- Display names: one frame per function, qualified where two share a
  -- name (model.names); functions matched without their first line are
  -- shown without it.
  local keys, shown = {}, {frames = {}}
  for k in pairs(funcs) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do
    local f = funcs[k]
    if f.fr.lua then
      shown.frames[i] = {lua = true, file = f.fr.file, name = f.fr.name,
                         linedefined = f.line and f.fr.linedefined or nil}
    else
      shown.frames[i] = {lua = false, name = f.fr.name}
    end
  end
  local names = model.names(shown, "f")
  local rows = {}
  for i, k in ipairs(keys) do
    local r = {
      name = names[i],
      self_a = pct(sa[k] or 0, d.a.total), self_b = pct(sb[k] or 0, d.b.total),
      total_a = pct(ta[k] or 0, d.a.total), total_b = pct(tb[k] or 0, d.b.total),
    }
    r.delta = r.self_b - r.self_a
    r.tdelta = r.total_b - r.total_a
    if math.abs(r.delta) >= 0.05 or math.abs(r.tdelta) >= 0.05 or
       math.max(r.self_a, r.self_b) >= 0.5 then
      rows[#rows + 1] = r
    end
  end
  table.sort(rows, function(x, y)
    if x.delta ~= y.delta then return x.delta > y.delta end
    if x.tdelta ~= y.tdelta then return x.tdelta > y.tdelta end
    return x.name < y.name
  end)
  return rows
end

-- The text report. names: {before =, after =} (shown in the header);
-- max: rows at most (default 40: the 30 that grew most and the 10 that
-- shrank most when there are more).
function M.text(d, names, max)
  names = names or {}
  max = max or 40
  local rows = M.rows(d)
  local cut = #rows > max
  local out = {
    format("Diff: %s (%d samples) -> %s (%d samples)\n", names.before or "before",
           d.a.total, names.after or "after", d.b.total),
    "Shares are of each profile's own total samples (normalized, so runs of different\n" ..
    "lengths compare); the functions whose self share grew most first.\n\n",
    format("%26s  %26s\n", "------------ self", "----------- total"),
    format("%8s %8s %8s  %8s %8s %8s  %s\n", "before", "after", "delta", "before", "after",
           "delta", "function"),
  }
  local function row(r)
    out[#out + 1] = format("%7.1f%% %7.1f%% %+7.1f%%  %7.1f%% %7.1f%% %+7.1f%%  %s\n",
      r.self_a, r.self_b, r.delta, r.total_a, r.total_b, r.tdelta, r.name)
  end
  for i, r in ipairs(rows) do
    if not cut or i <= max - 10 then row(r)
    elseif i == max - 9 then out[#out + 1] = format("  ... %d more\n", #rows - max)
    end
    if cut and i > #rows - 10 then row(r) end
  end
  if #rows == 0 then out[#out + 1] = "(no function changed)\n" end
  return table.concat(out)
end

return M
