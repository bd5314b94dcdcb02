/*
** ljprof's own Lua states (ownstate.h): made here so that the LD_PRELOAD
** interposer of luaL_openlibs (preload.c) can tell them from the host's
** and never profiles them (no recursion: a helper state that profiled
** itself would start helpers of its own). A thread-local mark, set while
** the libraries are opened. luaL_openlibs is the process's, looked up at
** run time (with libljprof preloaded that is the interposer, which the
** mark keeps out), so this file names no other file of ljprof. Normal
** context.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ownstate.h"

static __thread int opening;

lua_State *ljp_own_newstate(const char *path, const char *cpath)
{
  static void (*_Atomic openlibs)(lua_State *L);
  void (*open)(lua_State *L) = atomic_load(&openlibs);
  lua_State *L;
  if (!open) {
    if (!(open = (void (*)(lua_State *))dlsym(RTLD_DEFAULT, "luaL_openlibs")))
      return NULL;
    atomic_store(&openlibs, open);
  }
  if (!(L = luaL_newstate())) return NULL;
  opening++;
  open(L);
  opening--;
  lua_getglobal(L, "package");
  if (path) {
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
  }
  if (cpath) {
    lua_pushstring(L, cpath);
    lua_setfield(L, -2, "cpath");
  }
  lua_pop(L, 1);
  return L;
}

int ljp_own_opening(void)
{
  return opening;
}
