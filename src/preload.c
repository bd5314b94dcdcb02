/*
** Start without code changes in a host that links LuaJIT dynamically:
**
**   LJPROF="rate=99,output=/var/tmp/%p-%t.pb.gz" LD_PRELOAD=libljprof.so host
**
** ENTRY (called by the host): luaL_openlibs, interposed. The host's call
** binds here because LD_PRELOAD puts this library before libluajit; the
** real function is found after this library (dlsym RTLD_NEXT, else in
** each loaded object) and called first. Then, only when LJPROF is set
** and non-empty, the new state requires "ljprof.auto" (jit/prof/auto.lua,
** through a pcall: a failure is one line and the host goes on), which
** reads LJPROF and starts jit.prof in it; the run is written at the
** state's lua_close (jit.prof's exit proxy), os.exit and the exit
** signals. package.preload.ljprof is this library, so that the state
** uses this copy even if package.cpath finds another.
**
** LuaJIT may be loaded after start (nginx's load_module dlopens
** ngx_http_lua_module.so, which links libluajit, RTLD_NOW | RTLD_GLOBAL):
** the module's call binds here all the same, since this library comes
** first in the global scope, and ljprof finds LuaJIT's code at run time
** (objects.c). Loaded RTLD_LOCAL, LuaJIT is out of reach of ljprof's own
** calls: one line (reachable), not started.
**
** Not started: states of ljprof's own helpers (ownstate.c marks them), a
** host that opens the libraries one by one (luaopen_base, ...) instead of
** with luaL_openlibs, a host that calls luaL_openlibs through
** dlsym(handle, ...) on its own handle of libluajit (that is LuaJIT's
** definition, not the process's: nothing to interpose; silent), a LuaJIT
** loaded RTLD_LOCAL (above), a host with LuaJIT linked into its executable
** (calls inside it cannot be interposed). For the last, the luajit
** executable among them, the constructor below uses the executable's own
** hook instead: LUA_INIT (luajit.c runs it after luaL_openlibs, before the
** script): it is set to a chunk that loads ljprof_lua_init from this
** library, which puts LUA_INIT back as it was, starts, and runs the
** original LUA_INIT, if any.
**
** Without LJPROF nothing here does anything but call the real function:
** LD_PRELOAD alone changes nothing. Normal context only.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "../include/ljprof.h"
#include "ownstate.h"

#define INIT_MARK "--[[ljprof LD_PRELOAD]]"

typedef void (*openlibs_fn)(lua_State *L);
static _Atomic(openlibs_fn) real_openlibs;

static void say(const char *a, const char *b)
{
  ssize_t r = write(2, a, strlen(a));
  if (b) r = write(2, b, strlen(b));
  r = write(2, "\n", 1);
  (void)r;
}

/* Is p in this library? */
static int ours(const void *p)
{
  Dl_info a, b;
  return dladdr(p, &a) && dladdr((void *)ours, &b) &&
         a.dli_fbase == b.dli_fbase;
}

/* LuaJIT's luaL_openlibs: the next definition after this library, else
** one in any loaded object (a host that dlopen'ed libluajit locally). */
static openlibs_fn find_real(void)
{
  void *f = dlsym(RTLD_NEXT, "luaL_openlibs");
  struct link_map *lm = NULL;
  void *main_h;
  if (f && !ours(f)) return (openlibs_fn)f;
  if (!(main_h = dlopen(NULL, RTLD_LAZY))) return NULL;
  if (dlinfo(main_h, RTLD_DI_LINKMAP, &lm) != 0) lm = NULL;
  for (; lm; lm = lm->l_next) {
    void *h;
    if (!lm->l_name || !lm->l_name[0]) continue;
    if (!(h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD))) continue;
    f = dlsym(h, "luaL_openlibs");
    dlclose(h);
    if (f && !ours(f)) return (openlibs_fn)f;
  }
  return NULL;
}

/* Start profiling state L as LJPROF says: require "ljprof.auto" with this
** library as the ljprof module; one line on failure. */
static void boot(lua_State *L)
{
  static _Atomic int said;
  int top = lua_gettop(L);
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "preload");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "ljprof");
      if (lua_isnil(L, -1)) {
        lua_pushcfunction(L, luaopen_ljprof);
        lua_setfield(L, -3, "ljprof");
      }
    }
  }
  lua_settop(L, top);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ljprof.auto");
  if (lua_pcall(L, 1, 0, 0) != 0) {
    const char *m = lua_tostring(L, -1);
    if (!atomic_exchange(&said, 1)) {
      char line[512];
      snprintf(line, sizeof(line), "ljprof: LJPROF is set but profiling "
               "cannot start: %.*s (ljprof's Lua files must be on "
               "LUA_PATH; not profiling)", m ? (int)strcspn(m, "\n") : 1,
               m ? m : "?");
      say(line, NULL);
    }
  }
  lua_settop(L, top);
}

static int wanted(void)
{
  const char *e = getenv("LJPROF");
  return e && *e;
}

/* Can ljprof's own calls reach the LuaJIT whose luaL_openlibs is real?
** They are bound in the process's global scope (libljprof names no
** library), as dlsym RTLD_DEFAULT finds. A LuaJIT loaded RTLD_LOCAL (by a
** module that links it, dlopen'ed RTLD_LOCAL) is not there: the first
** call would end the process ("symbol lookup error"). Then one line,
** naming it, and no profiling. */
static int reachable(openlibs_fn real)
{
  static _Atomic int said;
  void *g = dlsym(RTLD_DEFAULT, "lua_gettop");
  Dl_info a, b;
  if (!dladdr((void *)real, &b)) return 0;
  if (g && dladdr(g, &a) && a.dli_fbase == b.dli_fbase) return 1;
  if (!atomic_exchange(&said, 1)) {
    char line[PATH_MAX + 128];
    snprintf(line, sizeof(line), "ljprof: LD_PRELOAD: LuaJIT (%s) was "
             "loaded RTLD_LOCAL, out of ljprof's reach; not profiling",
             b.dli_fname ? b.dli_fname : "?");
    say(line, NULL);
  }
  return 0;
}

/* The interposer (ENTRY: the host calls it). */
LJPROF_API void luaL_openlibs(lua_State *L)
{
  openlibs_fn real = atomic_load(&real_openlibs);
  if (!real) {
    if (!(real = find_real())) {
      say("ljprof: LD_PRELOAD: LuaJIT's luaL_openlibs not found", NULL);
      return;
    }
    atomic_store(&real_openlibs, real);
  }
  real(L);
  if (ljp_own_opening() || !wanted() || !reachable(real)) return;
  boot(L);
}

/* -- The luajit executable (LuaJIT linked in): LUA_INIT --------------------- */

static char *saved_init;   /* LUA_INIT before ours (NULL: unset) */
static int injected;

/* Was this library loaded by LD_PRELOAD (not linked, not required)? */
static int preloaded(const char *self, const char *loaded)
{
  const char *p = getenv("LD_PRELOAD");
  char want[PATH_MAX];
  if (!p || !realpath(self, want)) return 0;
  while (*p) {
    char item[PATH_MAX], real[PATH_MAX];
    size_t n = strcspn(p, ": \t");
    if (n && n < sizeof(item)) {
      memcpy(item, p, n);
      item[n] = '\0';
      if (realpath(item, real) && !strcmp(real, want)) return 1;
      /* a bare name, found by the loader's search: by the name */
      if (!strchr(item, '/') && !strcmp(item, strrchr(loaded, '/') ?
                                         strrchr(loaded, '/') + 1 : loaded))
        return 1;
    }
    p += n;
    while (*p == ':' || *p == ' ' || *p == '\t') p++;
  }
  return 0;
}

__attribute__((constructor)) static void ljp_preload_init(void)
{
  Dl_info di;
  void *f;
  char self[PATH_MAX], code[PATH_MAX + 256];
  const char *init;
  if (!wanted() || !dladdr((void *)ours, &di) || !di.dli_fname ||
      !realpath(di.dli_fname, self) || !preloaded(self, di.dli_fname))
    return;
  f = dlsym(RTLD_DEFAULT, "luaL_openlibs");
  if (!f || ours(f)) return;   /* a dynamic host: the interposer starts */
  if (strstr(self, "]==]")) return;
  init = getenv("LUA_INIT");
  if (init && !strstr(init, INIT_MARK) && !(saved_init = strdup(init)))
    return;
  snprintf(code, sizeof(code), INIT_MARK " local f = package.loadlib("
           "[==[%s]==], 'ljprof_lua_init') if f then return f() end", self);
  if (setenv("LUA_INIT", code, 1) == 0) injected = 1;
}

/* LUA_INIT's chunk calls it (luajit, after luaL_openlibs): LUA_INIT back
** as it was (children see the program's), start, then the original. */
LJPROF_API int ljprof_lua_init(lua_State *L)
{
  if (injected) {
    injected = 0;
    if (saved_init) setenv("LUA_INIT", saved_init, 1);
    else unsetenv("LUA_INIT");
    boot(L);
  }
  if (saved_init) {
    int rc = saved_init[0] == '@'
             ? luaL_loadfile(L, saved_init + 1)
             : luaL_loadbuffer(L, saved_init, strlen(saved_init), "=LUA_INIT");
    if (rc != 0) return lua_error(L);
    lua_call(L, 0, 0);
  }
  return 0;
}
