/*
** Test C module for native stacks (tests/lua/test_native.lua): a known
** call chain three C functions deep below a Lua call, the innermost one
** burning most of the time, plus loader traffic (dlopen, dlsym, dladdr)
** for the unwind-safety test; one C function with two native stacks
** below it (two). Built with symbols; the chain's functions
** are static, so only the full symbol table names them. On Windows (the
** exact-stacks test under Wine, tests/windows/test_exact.lua): run only.
*/
#define _GNU_SOURCE
#ifndef _WIN32
#include <dlfcn.h>
#endif
#include <lauxlib.h>
#include <lua.h>

#define NOINLINE __attribute__((noinline))

static volatile double sink;

/* Burns about n iterations of floating-point work. */
static NOINLINE double ljpt_inner(long n)
{
  double x = 0.0;
  long i;
  for (i = 0; i < n; i++) x += (double)(i % 7) * 0.5;
  return x;
}

static NOINLINE double ljpt_middle(long n)
{
  double x = ljpt_inner(n);
  long i;
  for (i = 0; i < n / 20; i++) x -= (double)(i % 3);  /* a little here */
  sink = x;
  return x + 1.0;
}

static int ljpt_run(lua_State *L)
{
  long n = (long)luaL_checknumber(L, 1);
  double x = ljpt_middle(n);
  sink = x;
  lua_pushnumber(L, x);
  return 1;
}

/* two(n, k): one C function with two native stacks below it, both ending
** in the same leaf: ljpt_two -> ljpt_alpha -> ljpt_inner when k is 1,
** ljpt_two -> ljpt_beta -> ljpt_inner otherwise (test_merge_native:
** merged ticks keep their own native frames). */
static NOINLINE double ljpt_alpha(long n)
{
  double x = ljpt_inner(n);
  sink = x;
  return x + 2.0;
}

static NOINLINE double ljpt_beta(long n)
{
  double x = ljpt_inner(n);
  sink = x;
  return x + 3.0;
}

static int ljpt_two(lua_State *L)
{
  long n = (long)luaL_checknumber(L, 1);
  double x = luaL_checkinteger(L, 2) == 1 ? ljpt_alpha(n) : ljpt_beta(n);
  sink = x;
  lua_pushnumber(L, x);
  return 1;
}

#ifndef _WIN32
/* dlopen/dlsym/dladdr/dlclose n times (of the library at path, default
** libm): the loader's lock is taken again and again while signals
** arrive, and a library not loaded otherwise is mapped and unmapped. */
static int ljpt_loader(lua_State *L)
{
  long n = (long)luaL_checknumber(L, 1), i, found = 0;
  const char *path = luaL_optstring(L, 2, "libm.so.6");
  const char *sym = lua_isnoneornil(L, 2) ? "cos" : "ljpf_outer";
  for (i = 0; i < n; i++) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    Dl_info di;
    void *f = h ? dlsym(h, sym) : NULL;
    if (f && dladdr(f, &di)) found++;
    if (h) dlclose(h);
  }
  lua_pushnumber(L, (lua_Number)found);
  return 1;
}
#endif

#ifdef _WIN32
__declspec(dllexport)
#endif
int luaopen_ljp_ctest(lua_State *L)
{
  lua_newtable(L);
  lua_pushcfunction(L, ljpt_run);
  lua_setfield(L, -2, "run");
  lua_pushcfunction(L, ljpt_two);
  lua_setfield(L, -2, "two");
#ifndef _WIN32
  lua_pushcfunction(L, ljpt_loader);
  lua_setfield(L, -2, "loader");
#endif
  return 1;
}
