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
-- dropped=}; only scope and fullpath are read here).
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

local clean = model.folded_label

function M.render(p, meta)
  meta = meta or {}
  local scope = meta.scope or "f"
  local fullpath = meta.fullpath and true or false
  local counts, labels = {}, {}
  local names = model.names(p, scope, fullpath)
  -- Every label first: the loop over the stacks then stays free of
  -- string patterns, which LuaJIT does not compile (a loop that aborts
  -- its traces again and again is left to the interpreter).
  for id in ipairs(p.frames) do labels[id] = clean(names[id]) end
  local key = model.keyer(labels, ";")
  for _, s in ipairs(p.samples) do
    local stack = s.stack
    local k = #stack > 0 and key(stack, 1, #stack, 1) or model.NO_STACK
    counts[k] = (counts[k] or 0) + s.count
  end
  local keys = {}
  for k in pairs(counts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if counts[a] ~= counts[b] then return counts[a] > counts[b] end
    return a < b
  end)
  local out = {}
  for i, k in ipairs(keys) do
    out[i] = string.format("%s %d\n", k, counts[k])
  end
  return table.concat(out)
end

return M
