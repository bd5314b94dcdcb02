----------------------------------------------------------------------------
-- jit.prof.label: labels on samples, scoped like zones (also reachable as
-- require("ljprof").label):
--
--   local label = require("ljprof").label
--   label{endpoint = "/api"}       push: merged onto the current labels
--   label()                        pop (error on an empty stack); returns
--                                  the id of the set that was current
--   label({endpoint = "/api"}, fn, ...)
--                                  run fn(...) under the labels, pop after
--                                  (also when fn raises); fn's results
--   label:get()                    the current labels ({key = value}) or nil
--   label:flush()                  empty the stack
--   local API = label.set{endpoint = "/api"}   a set made once: its id
--   label(API) ... label()         the hot path: push and pop by id
--   label.push(API) ... label.pop()   the same without label()'s checks
--
-- Each sample records the label set active when its tick happened; the
-- pprof output carries it as sample labels (go tool pprof -tags,
-- -tagfocus=endpoint=/api), summary() entries as a labels table. A push
-- merges its pairs onto the current set (a key pushed again takes the new
-- value; a pop restores the old one). Keys are strings, values strings or
-- numbers (kept as strings). Keys ljprof sets on every sample itself
-- (vmstate, zone, thread, thread_id, state) are refused. Every distinct
-- set is kept for the state's life (65535 at most): label with a few
-- values (an endpoint, a request kind), not a request id.
--
-- Like zones, the stack is the Lua state's: all coroutines share it. A
-- coroutine that yields while its labels are pushed (a request handler
-- waiting on a socket in OpenResty) lends them to whatever runs until it
-- resumes: push and pop around work that does not yield.
--
-- Pushes and pops by id go through the FFI to the library (a hash lookup
-- and a few stores), as zones do; a table is turned into its set id
-- through a cache keyed by its sorted pairs (a table iteration, a sort
-- and a concatenation per push: label.set once for hot code).
----------------------------------------------------------------------------

local ljprof = require("ljprof")

local label = {}
local cache = {}          -- "k\0v\0..." of a table's pairs -> set id
local lib, handle = require("jit.prof.zone").ffi_library([[
  int ljprof_label_push_h(void *handle, int id);
  int ljprof_label_pop_h(void *handle);
]])

local push, pop
if lib then
  push = function(id) return lib.ljprof_label_push_h(handle, id) end
  pop = function() return lib.ljprof_label_pop_h(handle) end
else
  push, pop = ljprof.label_push_id, ljprof.label_pop_id
end

local keys = {}
-- The set id of table t (made once per distinct content).
local function id_of(t, level)
  local k1, v1 = next(t)
  if k1 ~= nil and next(t, k1) == nil and type(k1) == "string" and
     type(v1) == "string" then             -- one pair: no sort
    local id = cache[k1 .. "\0" .. v1]
    if id then return id end
  end
  local n = 0
  for k in pairs(t) do
    n = n + 1
    keys[n] = k
  end
  for i = n + 1, #keys do keys[i] = nil end
  local ok_sort = pcall(table.sort, keys)   -- keys of mixed types: set() says
  local parts = {}
  if ok_sort then
    for i = 1, n do
      local k = keys[i]
      local v = t[k]
      v = type(v) == "number" and tostring(v) or v
      if type(k) ~= "string" or type(v) ~= "string" or k:find("\0", 1, true) or
         v:find("\0", 1, true) then
        parts = nil  -- label_set names what is wrong
        break
      end
      parts[#parts + 1] = k
      parts[#parts + 1] = v
    end
  else
    parts = nil
  end
  local ck = parts and table.concat(parts, "\0")
  local id = ck and cache[ck]
  if id then return id end
  local sok, res = pcall(ljprof.label_set, t)
  if not sok then error(tostring(res), level + 1) end
  if ck then cache[ck] = res end
  return res
end

-- Push set id (merged onto the current set); errors name what is wrong.
local function push_id(id, level)
  local rc = push(id)
  if rc ~= 0 then
    error("ljprof.label: cannot push (accepted: " .. ljprof.label_error(rc) .. ")", level + 1)
  end
end

local function finish(ok2, ...)
  pop()
  if not ok2 then error((...), 0) end
  return ...
end

setmetatable(label, {
  __call = function(_, t, fn, ...)
    local tt = type(t)
    if tt == "number" then
      push_id(t, 2)
    elseif tt == "table" then
      push_id(id_of(t, 2), 2)
    elseif t == nil then
      local id = pop()
      if id < 0 then error("ljprof.label: pop from an empty label stack", 2) end
      return id
    else
      error("ljprof.label: bad labels (a table of key = value pairs or a set id " ..
            "from label.set expected, got " .. tt .. ")", 2)
    end
    if fn ~= nil then
      if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
        pop()
        error("ljprof.label: bad function to run under the labels (got " .. type(fn) .. ")", 2)
      end
      return finish(pcall(fn, ...))
    end
  end,
})

-- The hottest path: push set id and pop, without label()'s checks of
-- its argument (push raises on a bad id; pop returns -1 when empty).
function label.push(id)
  local rc = push(id)
  if rc ~= 0 then
    error("ljprof.label.push: cannot push (accepted: " .. ljprof.label_error(rc) .. ")", 2)
  end
end
label.pop = pop

-- The id of the set of t's pairs, made once: label(id) pushes it.
function label.set(t)
  if type(t) ~= "table" then
    error("ljprof.label.set: bad labels (a table of key = value pairs expected, got " ..
          type(t) .. ")", 2)
  end
  return id_of(t, 2)
end

-- The pairs of set id ({} for 0).
function label.pairs(id)
  return ljprof.label_pairs(id)
end

-- The current labels as a table, or nil.
function label:get()
  local id = ljprof.label_current()
  if id == 0 then return nil end
  return ljprof.label_pairs(id)
end

function label:flush()
  ljprof.label_flush()
end

return label
