/*
** ljprof's own Lua states (ownstate.h): made here so that the LD_PRELOAD
** interposer of luaL_openlibs (preload.c) can tell them from the host's
** and never profiles them (no recursion: a helper state that profiled
** itself would start helpers of its own). A thread-local mark, set while
** the libraries are opened. luaL_openlibs is the process's, looked up at
** run time (with libljprof preloaded that is the interposer, which the
** mark keeps out). The writers' states load their writer here, and their
** views (registry -> the context they read) are kept here: one small
** table for all threads, set and cleared by whoever makes the state.
** This file names no other file of ljprof: the module's opener is given
** to it (ljp_own_set_opener). Normal context.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "os.h"
#include "ownstate.h"

static __thread int opening;
static _Atomic(lua_CFunction) opener;  /* luaopen_ljprof of this library */

lua_State *ljp_own_newstate(const char *path, const char *cpath)
{
  static void (*_Atomic openlibs)(lua_State *L);
  void (*open)(lua_State *L) = atomic_load(&openlibs);
  lua_State *L;
  if (!open) {
    if (!(open = (void (*)(lua_State *))ljp_os_lua_symbol("luaL_openlibs")))
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

/* The base, package and jit libraries only, by their openers (looked up
** once; as luaL_openlibs opens them, in its order): what the layout
** probes run needs. luaL_openlibs opens eleven (ffi, io, string...), and
** the state frees them at its close: 0.1 M instructions more for the
** snapshot layouts' state (callgrind). No interposer sees these calls. */
lua_State *ljp_own_newstate_jit(void)
{
  static const char *const sym[3] = {"luaopen_base", "luaopen_package",
                                     "luaopen_jit"};
  static const char *const name[3] = {"", LUA_LOADLIBNAME, LUA_JITLIBNAME};
  static _Atomic(lua_CFunction) fn[3];
  lua_CFunction f[3];
  lua_State *L;
  int i;
  for (i = 0; i < 3; i++) {
    if (!(f[i] = atomic_load(&fn[i]))) {
      if (!(f[i] = (lua_CFunction)ljp_os_lua_symbol(sym[i])))
        return ljp_own_newstate(NULL, NULL);
      atomic_store(&fn[i], f[i]);
    }
  }
  if (!(L = luaL_newstate())) return NULL;
  for (i = 0; i < 3; i++) {
    lua_pushcfunction(L, f[i]);
    lua_pushstring(L, name[i]);
    lua_call(L, 1, 0);
  }
  return L;
}

int ljp_own_opening(void)
{
  return opening;
}

void ljp_own_set_opener(lua_CFunction open)
{
  atomic_store(&opener, open);
}

lua_State *ljp_own_writer(const char *path, const char *cpath,
                          const char *module, const char *func,
                          char *err, size_t errlen)
{
  lua_State *HL = ljp_own_newstate(path, cpath);
  lua_CFunction open;
  const char *why = NULL;
  if (!HL) {
    snprintf(err, errlen, "%s.%s: out of memory", module, func);
    return NULL;
  }
  if ((open = atomic_load(&opener))) {
    lua_getglobal(HL, "package");
    lua_getfield(HL, -1, "preload");  /* this library, not another copy */
    lua_pushcfunction(HL, open);
    lua_setfield(HL, -2, "ljprof");
    lua_settop(HL, 0);
  }
  lua_getglobal(HL, "require");
  lua_pushstring(HL, module);
  if (lua_pcall(HL, 1, 1, 0) != 0) {
    why = lua_tostring(HL, -1);
    if (!why) why = "an error that is not a string";
  } else {
    lua_getfield(HL, -1, func);
    lua_remove(HL, -2);
    if (!lua_isfunction(HL, -1)) why = "no such function";
  }
  if (why) {
    snprintf(err, errlen, "%s.%s: %.*s", module, func,
             (int)strcspn(why, "\n"), why);
    lua_close(HL);
    return NULL;
  }
  return HL;
}

int ljp_own_write(const char *path, const char *cpath, const char *module,
                  const char *func, void *ctx, const char *arg, size_t arglen,
                  char *err, size_t errlen)
{
  lua_State *HL = ljp_own_writer(path, cpath, module, func, err, errlen);
  const void *reg;
  int rc = 0;
  if (!HL) return -1;
  reg = lua_topointer(HL, LUA_REGISTRYINDEX);
  if (ljp_own_view_set(reg, ctx) != 0) {
    snprintf(err, errlen, "%s.%s: too many writers at once", module, func);
    rc = -1;
  } else {
    lua_pushlstring(HL, arg, arglen);
    if (lua_pcall(HL, 1, 0, 0) != 0) {
      const char *m = lua_tostring(HL, -1);
      if (!m) m = "an error that is not a string";
      snprintf(err, errlen, "%.*s", (int)strcspn(m, "\n"), m);
      rc = -1;
    }
    ljp_own_view_clear(reg);
  }
  lua_close(HL);
  return rc;
}

/* -- Views ------------------------------------------------------------------ */

static struct {
  _Atomic(const void *) reg;
  _Atomic(void *) ctx;
} views[LJP_OWN_VIEWS];
static _Atomic int nviews;        /* set now: 0 skips the scan */
static pthread_mutex_t views_mu = PTHREAD_MUTEX_INITIALIZER;

int ljp_own_view_set(const void *registry, void *ctx)
{
  int i, rc = -1;
  pthread_mutex_lock(&views_mu);
  for (i = 0; i < LJP_OWN_VIEWS; i++) {
    if (atomic_load_explicit(&views[i].reg, memory_order_relaxed)) continue;
    atomic_store_explicit(&views[i].ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&views[i].reg, registry, memory_order_release);
    atomic_fetch_add(&nviews, 1);
    rc = 0;
    break;
  }
  pthread_mutex_unlock(&views_mu);
  return rc;
}

void ljp_own_view_clear(const void *registry)
{
  int i;
  pthread_mutex_lock(&views_mu);
  for (i = 0; i < LJP_OWN_VIEWS; i++) {
    if (atomic_load_explicit(&views[i].reg, memory_order_relaxed) != registry)
      continue;
    atomic_store_explicit(&views[i].reg, NULL, memory_order_release);
    atomic_store_explicit(&views[i].ctx, NULL, memory_order_relaxed);
    atomic_fetch_sub(&nviews, 1);
    break;
  }
  pthread_mutex_unlock(&views_mu);
}

/* A view is read only by the thread running in its state, between the set
** and the clear that its maker does around that: a registry found here
** has the ctx stored before it. */
void *ljp_own_view(const void *registry)
{
  int i;
  if (!registry || !atomic_load_explicit(&nviews, memory_order_acquire))
    return NULL;
  for (i = 0; i < LJP_OWN_VIEWS; i++)
    if (atomic_load_explicit(&views[i].reg, memory_order_acquire) == registry)
      return atomic_load_explicit(&views[i].ctx, memory_order_relaxed);
  return NULL;
}
