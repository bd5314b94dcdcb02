-- Reads a callgrind output file (positions: line, events: Ir) and returns
-- ljprof's own instructions, inclusive: what ljprof makes LuaJIT, libc or
-- libunwind do for it (lua_next, malloc) counts as its own. Own is
--   the inclusive cost of every call into ljprof's object (obj_pattern)
--   from code outside it (LuaJIT calling the hook or a Lua API function,
--   ld.so calling a constructor, a thread's start), except callbacks
--   (`*_cmp`, `*_cb`: qsort and dl_iterate_phdr calling back into ljprof,
--   already inside a call from ljprof) and the C functions ljprof hands
--   LuaJIT to call while ljprof's own code runs (NESTED: the probes' C
--   functions, called by the probe chunks l_record runs in ljprof's own
--   state; a sort comparator; a protected call). Callgrind's data says
--   who called a function, not whether ljprof's code is further up the
--   stack: counted as entries, each of these was counted twice (the probe
--   callbacks: 0.77 M of a 4.59 M start until 2026-11-28). A callback of
--   this kind added later must be named here (or `*_cb`).
-- + for an ljprof function no call arc enters (the signal handler: the
--   kernel's delivery is no call), its own instructions and its calls.
-- split: names of ljprof functions whose inclusive cost (from any caller)
-- is also returned, e.g. one-time work.
local M = {}

local NESTED = {
  probe_jit = true, probe_frames = true,             -- luastack.c
  probe_cfunc = true, probe_other = true, probe_hook = true,
  cframe_cf = true,                                  -- vmprobe.c
  tm_snap = true,                                    -- tracemem.c
  probe_event = true,                                -- irmap.c
  interp_probe = true,                               -- unwind.c
  by_field = true,                                   -- lua_ljprof.c
  setmode_cp = true,                                 -- calls.c
}
M.NESTED = NESTED

local function callback(fn)
  return fn:find("_cmp$") or fn:find("_cb$") or NESTED[fn:match("^[%w_]+")]
end

function M.own(path, obj_pattern, split)
  local f = assert(io.open(path))
  local obnames, fnnames = {}, {}
  local function name(tab, v)
    local id, rest = v:match("^%((%d+)%)%s*(.*)$")
    if not id then return v end
    if rest ~= "" then tab[id] = rest end
    return tab[id] or ("?" .. id)
  end
  local ob, fn, cob, cfn, pending = "", "", nil, nil, false
  local excl, out, incoming, mine = {}, {}, {}, {}
  local own, by_fn, split_cost = 0, {}, {}
  for _, s in ipairs(split or {}) do split_cost[s] = 0 end
  for line in f:lines() do
    local k, v = line:match("^(%a+)=(.*)$")
    if k == "ob" then ob = name(obnames, v)
    elseif k == "fn" then
      fn = name(fnnames, v)
      if ob:find(obj_pattern) then mine[fn] = true end
    elseif k == "cob" then cob = name(obnames, v)
    elseif k == "cfn" then cfn = name(fnnames, v)
    elseif k == "calls" then pending = true
    elseif k then -- fl, fi, fe, cfi, cfl: files, not needed
    elseif line:match("^[%d%+%-%*]") then
      local ir = tonumber(line:match("^%S+%s+(%d+)")) or 0
      if pending then
        local callee_mine = (cob or ob):find(obj_pattern) ~= nil
        local caller_mine = ob:find(obj_pattern) ~= nil
        if callee_mine then incoming[cfn] = true end
        if caller_mine then out[fn] = (out[fn] or 0) + ir end
        if callee_mine and not caller_mine and not callback(cfn) then
          own = own + ir
          by_fn[cfn] = (by_fn[cfn] or 0) + ir
        end
        if split_cost[cfn] then split_cost[cfn] = split_cost[cfn] + ir end
        pending, cob, cfn = false, nil, nil
      elseif ob:find(obj_pattern) then
        excl[fn] = (excl[fn] or 0) + ir
      end
    end
  end
  f:close()
  for fname in pairs(mine) do
    if not incoming[fname] then
      local c = (excl[fname] or 0) + (out[fname] or 0)
      own = own + c
      by_fn[fname] = (by_fn[fname] or 0) + c
    end
  end
  return own, by_fn, split_cost
end

return M
