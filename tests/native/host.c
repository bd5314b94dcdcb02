/*
** A C host embedding LuaJIT, linked with -rdynamic and stripped
** (tests/lua/test_native_names.lua): runs the Lua file argv[1] with the
** rest as its arguments. Lua calls the exported ljph_work through the
** FFI; ljph_work -> host_middle -> host_inner are the host's own code, the
** two static ones without a symbol once stripped (they must be named
** "ljp_host+0x<start>", never after the nearest exported symbol). The
** chunk runs inside lua_cpcall(host_pmain): a C function without a Lua
** name at the root of every stack, as luajit's own main has.
*/
#include <stdio.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#define NOINLINE __attribute__((noinline))

static volatile double sink;

static NOINLINE double host_inner(long n)
{
  double x = 0.0;
  long i;
  for (i = 0; i < n; i++) x += (double)(i % 3) * 0.75;
  return x;
}

static NOINLINE double host_middle(long n)
{
  double x = host_inner(n);
  sink = x;
  return x + 2.0;
}

double ljph_work(long n)
{
  double x = host_middle(n);
  sink = x;
  return x + 1.0;
}

static int argc_;
static char **argv_;

static int host_pmain(lua_State *L)
{
  int i;
  luaL_openlibs(L);
  if (luaL_loadfile(L, argv_[1]) != 0) return lua_error(L);
  for (i = 2; i < argc_; i++) lua_pushstring(L, argv_[i]);
  lua_call(L, argc_ - 2, 0);
  return 0;
}

int main(int argc, char **argv)
{
  lua_State *L;
  int rc;
  if (argc < 2) {
    fprintf(stderr, "usage: %s script.lua [args]\n", argv[0]);
    return 2;
  }
  argc_ = argc;
  argv_ = argv;
  if (!(L = luaL_newstate())) return 1;
  rc = lua_cpcall(L, host_pmain, NULL);
  if (rc != 0) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  lua_close(L);
  return rc != 0;
}
