----------------------------------------------------------------------------
-- jit.prof.folded: folded stacks ("collapsed" format) for flame graph
-- tools (flamegraph.pl, inferno, speedscope, ...).
--
--   main.lua:0;main;work;string.rep 42
--
-- One line per unique stack: frames outermost first joined by ";", one
-- space, the integer sample count. Lines are sorted by count (most first),
-- then by stack. Frame labels are those of -jp's f view by default
-- (function name, else chunk:firstline; C functions and builtins by
-- name); meta.scope = "F" prefixes the chunk, "l" gives chunk:line, and
-- meta.fullpath keeps full chunk paths. A name two different Lua
-- functions share is qualified with the end of its file's path and its
-- first line ("run (check.lua:12)", model.names), so that the two stay
-- apart; a name used once stays bare. A ";" inside a label becomes ","
-- and a control character (CR, LF, TAB, ...) a space (model.folded_label,
-- also -jp's G view), so every line splits unambiguously. A sample
-- without any frame counts as "(no stack)".
--
-- render(p, meta): p from jit.prof.model.collect(), meta as for every
-- jit.prof.<format> module ({clock=, interval_us=, program=, samples=,
-- dropped=}; only scope and fullpath are read here). render_parts(p,
-- meta): the same as a list of strings.
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

local clean = model.folded_label

-- Lines are made without a table, string or hash entry per sample: the
-- samples are put in order of their label sequences (labels numbered,
-- compared number by number), equal neighbours merged into a group (its
-- first sample and its count); the groups sorted by count, then by their
-- text, compared label by label without joining it; each line's text made
-- once, as it is output, and joined 1024 lines at a time into the parts
-- written (render_parts; render joins them). A profile of 74,000
-- distinct stacks took 850 bytes per stack more to write with a table
-- per distinct prefix and every line kept apart to the end.
function M.render_parts(p, meta)
  meta = meta or {}
  local scope = meta.scope or "f"
  local fullpath = meta.fullpath and true or false
  local names = model.names(p, scope, fullpath)
  -- Every label first: the loops over the stacks then stay free of
  -- string patterns, which LuaJIT does not compile (a loop that aborts
  -- its traces again and again is left to the interpreter).
  local num, text, by = {}, {}, {}   -- frame id -> label number -> label
  for id in ipairs(p.frames) do
    local l = clean(names[id])
    local u = by[l]
    if not u then u = #text + 1 text[u] = l by[l] = u end
    num[id] = u
  end
  names = nil
  -- A sample without frames is the line "(no stack)": the stack of one
  -- label of that text.
  local nostack = by[model.NO_STACK]
  if not nostack then nostack = #text + 1 text[nostack] = model.NO_STACK end
  by = nil
  local NOSTACK = {0}
  num[0] = nostack
  local function labels_of(s)
    local st = s.stack
    return #st > 0 and st or NOSTACK
  end
  local order = {}
  for i, s in ipairs(p.samples) do order[i] = labels_of(s) end
  local cnt = {}
  for i, s in ipairs(p.samples) do cnt[i] = s.count end
  local rep, counts = model.group_stacks(order, cnt, function(id) return num[id] end)
  order, cnt = nil, nil
  -- The text order of two groups' lines ("a;b" against "a;bc"), label by
  -- label: where two labels differ, either one ends first (then the
  -- line goes on with ";", or ends, against the other's next byte; no
  -- label holds a ";") or they differ at a byte both have.
  local sub = string.sub
  local function text_lt(a, b)
    local na, nb = #a, #b
    for i = 1, na < nb and na or nb do
      local x, y = text[num[a[i]]], text[num[b[i]]]
      if x ~= y then
        local lx, ly = #x, #y
        if lx < ly and sub(y, 1, lx) == x then
          return i == na or ";" < sub(y, lx + 1, lx + 1)
        elseif ly < lx and sub(x, 1, ly) == y then
          return not (i == nb or ";" < sub(x, ly + 1, ly + 1))
        end
        return x < y
      end
    end
    return na < nb
  end
  local idx = {}
  for g = 1, #rep do idx[g] = g end
  table.sort(idx, function(a, b)
    if counts[a] ~= counts[b] then return counts[a] > counts[b] end
    return text_lt(rep[a], rep[b])
  end)
  local out, chunk, parts = {}, {}, {}
  local concat, format = table.concat, string.format
  for _, g in ipairs(idx) do
    local st = rep[g]
    for m = 1, #st do parts[m] = text[num[st[m]]] end
    chunk[#chunk + 1] = format("%s %d\n", concat(parts, ";", 1, #st), counts[g])
    if #chunk == 1024 then
      out[#out + 1] = concat(chunk)
      for x = #chunk, 1, -1 do chunk[x] = nil end
    end
  end
  out[#out + 1] = concat(chunk)
  return out
end

function M.render(p, meta)
  return table.concat(M.render_parts(p, meta))
end

return M
