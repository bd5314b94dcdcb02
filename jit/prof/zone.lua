----------------------------------------------------------------------------
-- jit.prof.zone: ljprof's zones, with the interface of LuaJIT's jit.zone
-- (also reachable as require("ljprof").zone):
--
--   local zone = require("jit.prof.zone")
--   zone("AI")        push a zone
--   zone()            pop it; returns its name (error on an empty stack)
--   zone:get()        the current zone's name, or nil
--   zone:flush()      empty the stack
--
-- Unlike jit.zone, the stack lives in the ljprof library: each sample
-- records the zone that was active when its tick happened, not when the
-- profiler's callback ran. To make code written for jit.zone use it,
-- install it before that code requires jit.zone:
--   package.loaded["jit.zone"] = require("jit.prof.zone")
-- (luajit -jprof does this when it starts.)
--
-- Pushes and pops go through the FFI to the library (a few stores each),
-- with names interned to ids once per name; without the FFI they use the
-- module's C functions.
----------------------------------------------------------------------------

local ljprof = require("ljprof")

local zone = {}
local names, ids = {}, {}      -- id -> name, name -> id
local push, pop                -- by id

-- The library this module was loaded from (package.cpath finds it),
-- through the FFI with cdecls declared, and the state's handle (a cdata
-- pointer: a lightuserdata argument is not compiled); nothing without
-- the FFI. Shared with jit.prof.label.
function zone.ffi_library(cdecls)
  local ok, ffi = pcall(require, "ffi")
  if not ok then return nil end
  pcall(ffi.cdef, cdecls)
  local path = package.searchpath and package.searchpath("ljprof", package.cpath)
  local lok, l = pcall(ffi.load, path or "ljprof")
  if not lok then return nil end
  return l, ffi.cast("void *", ljprof.zone_handle())
end

local lib, handle = zone.ffi_library([[
  int ljprof_zone_intern(void *handle, const char *name);
  int ljprof_zone_push_h(void *handle, int id);
  int ljprof_zone_pop_h(void *handle);
  int ljprof_zone_active_h(void *handle);
]])

local function id_of(name)
  local id = ids[name]
  if id then return id end
  if lib then
    id = lib.ljprof_zone_intern(handle, name)
  else
    id = ljprof.zone_intern(name)
  end
  if id == 0 then error("ljprof.zone: too many zone names (65535)", 3) end
  ids[name], names[id] = id, name
  return id
end

if lib then
  push = function(id) return lib.ljprof_zone_push_h(handle, id) end
  pop = function() return lib.ljprof_zone_pop_h(handle) end
else
  push, pop = ljprof.zone_push_id, ljprof.zone_pop_id
end

setmetatable(zone, {
  __call = function(_, name)
    if name ~= nil then
      if type(name) ~= "string" then
        error("ljprof.zone: bad zone name (a string expected, got " .. type(name) .. ")", 2)
      end
      if push(id_of(name)) ~= 0 then
        error("ljprof.zone: zone stack full (64 levels) pushing '" .. name .. "'", 2)
      end
    else
      local id = pop()
      if id == 0 then error("ljprof.zone: pop from an empty zone stack", 2) end
      return names[id] or ljprof.zone_name(id)
    end
  end,
})

function zone:get()
  local id = ljprof.zone_current()
  if id == 0 then return nil end
  return names[id] or ljprof.zone_name(id)
end

function zone:flush()
  ljprof.zone_flush()
end

-- Is ljprof recording this state now? (cheap: jit.prof.wrap asks it on
-- every call)
if lib then
  function zone.recording() return lib.ljprof_zone_active_h(handle) ~= 0 end
else
  function zone.recording() return ljprof.running() end
end

return zone
