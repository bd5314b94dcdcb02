/* A C program that loads LuaJIT with dlopen after it started, as nginx's
** load_module does (ngx_dlopen: dlopen(path, RTLD_NOW | RTLD_GLOBAL) of
** ngx_http_lua_module.so, which links libluajit). It links neither LuaJIT
** nor ljprof: test_auto.lua profiles it from the outside with
** LD_PRELOAD=libljprof.so and LJPROF, where the library is loaded before
** LuaJIT is.
**
**   dlopen_host MODE PATH CHUNK
**
** MODE:
**   module-global  dlopen PATH (tests/embed/dlopen_module.c) RTLD_NOW |
**                  RTLD_GLOBAL, call its ljp_dlmod_run (nginx's way)
**   module-local   the same with RTLD_NOW | RTLD_LOCAL
**   lib-global     dlopen PATH (libluajit) RTLD_NOW | RTLD_GLOBAL, the API
**                  from dlsym(RTLD_DEFAULT, ...): the process's definitions
**   lib-local      dlopen PATH RTLD_NOW | RTLD_LOCAL, the API from
**                  dlsym(handle, ...): LuaJIT's own definitions
** runs CHUNK (Lua source) in one state and prints "dlopen host: <what it
** returned>". Exit status 0, 1 when the chunk failed, 2 on a usage or
** loading error. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct lua_State lua_State;

static void *sym(void *h, const char *name)
{
  void *f = dlsym(h, name);
  if (!f) fprintf(stderr, "dlopen host: %s: %s\n", name, dlerror());
  return f;
}

/* The API by dlsym, as a host that loads libluajit itself. */
static int run_lib(void *from, const char *chunk, char *out, size_t n)
{
  lua_State *(*newstate)(void) = (lua_State *(*)(void))sym(from, "luaL_newstate");
  void (*openlibs)(lua_State *) = (void (*)(lua_State *))sym(from, "luaL_openlibs");
  int (*loadstring)(lua_State *, const char *) =
    (int (*)(lua_State *, const char *))sym(from, "luaL_loadstring");
  int (*pcall)(lua_State *, int, int, int) =
    (int (*)(lua_State *, int, int, int))sym(from, "lua_pcall");
  const char *(*tolstring)(lua_State *, int, size_t *) =
    (const char *(*)(lua_State *, int, size_t *))sym(from, "lua_tolstring");
  void (*close)(lua_State *) = (void (*)(lua_State *))sym(from, "lua_close");
  lua_State *L;
  const char *s;
  int rc;
  if (!newstate || !openlibs || !loadstring || !pcall || !tolstring || !close)
    return 2;
  if (!(L = newstate())) return 2;
  openlibs(L);
  rc = loadstring(L, chunk) != 0 || pcall(L, 0, 1, 0) != 0;
  s = tolstring(L, -1, NULL);
  snprintf(out, n, "%s", s ? s : "(no result)");
  close(L);
  return rc;
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  int global = strstr(mode, "-global") != NULL;
  int module = !strncmp(mode, "module-", 7);
  char out[512];
  void *h;
  int rc;
  if (argc != 4 || (!module && strncmp(mode, "lib-", 4)) ||
      (!global && !strstr(mode, "-local"))) {
    fprintf(stderr, "usage: dlopen_host module-global|module-local|"
            "lib-global|lib-local PATH CHUNK\n");
    return 2;
  }
  if (!(h = dlopen(argv[2], RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL)))) {
    fprintf(stderr, "dlopen host: %s\n", dlerror());
    return 2;
  }
  if (module) {
    int (*run)(const char *, char *, size_t) =
      (int (*)(const char *, char *, size_t))sym(h, "ljp_dlmod_run");
    rc = run ? run(argv[3], out, sizeof(out)) : 2;
  } else {
    rc = run_lib(global ? RTLD_DEFAULT : h, argv[3], out, sizeof(out));
  }
  if (rc != 2) printf("dlopen host: %s\n", out);
  fflush(stdout);
  dlclose(h);
  return rc;
}
