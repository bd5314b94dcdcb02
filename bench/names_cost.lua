-- ljprof's side of docs/decisions.md's "Why not elfutils" table: the first
-- name of an address in libc (the registry, libc's symbols from its debug
-- file when libc6-dbg is installed, the IFUNC pass) and later names, through
-- ljprof.code_name. The elfutils side: bench/dwfl_names.c.
--   LUA_CPATH='build/lib?.so;;' luajit bench/names_cost.lua [hex offset in libc]
local ljprof = require("ljprof")
local ffi = require("ffi")
ffi.cdef([[
typedef struct { const char *fname; void *fbase; const char *sname; void *saddr; } nc_dlinfo;
int dladdr(const void *, nc_dlinfo *);
void qsort(void *, size_t, size_t, void *);
struct nc_ts { long s, ns; };
int clock_gettime(int, struct nc_ts *);
]])
local ts = ffi.new("struct nc_ts")
local function now() ffi.C.clock_gettime(1, ts) return tonumber(ts.s) * 1e3 + tonumber(ts.ns) / 1e6 end
local di = ffi.new("nc_dlinfo")
ffi.C.dladdr(ffi.cast("void *", ffi.C.qsort), di)
local a = tonumber(ffi.cast("uintptr_t", di.fbase)) + tonumber(arg[1] or "3f960", 16) + 5
local t0 = now()
local name = ljprof.code_name(a)
local t1 = now()
for i = 1, 100000 do ljprof.code_name(a + i % 64) end
local t2 = now()
print(string.format("first name in libc %.2f ms (%s); %.2f us per later name",
  t1 - t0, name, (t2 - t1) * 1e3 / 1e5))
