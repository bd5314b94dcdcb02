/* The module of tests/embed/dlopen_host.c: a shared object linked with
** LuaJIT (DT_NEEDED libluajit-5.1.so.2) that calls it the ordinary way,
** as nginx's ngx_http_lua_module.so does once nginx's load_module has
** dlopen'ed it. It knows nothing of ljprof.
**
**   int ljp_dlmod_run(const char *chunk, char *out, size_t n)
**
** runs chunk in a new state (luaL_newstate, luaL_openlibs, lua_close) and
** copies what it returned (or the error) into out: 0, or 1 on error. */
#include <stdio.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int ljp_dlmod_run(const char *chunk, char *out, size_t n)
{
  int rc;
  lua_State *L = luaL_newstate();
  if (!L) {
    snprintf(out, n, "out of memory");
    return 1;
  }
  luaL_openlibs(L);
  rc = luaL_loadstring(L, chunk) != 0 || lua_pcall(L, 0, 1, 0) != 0;
  snprintf(out, n, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no result)");
  lua_close(L);
  return rc;
}
