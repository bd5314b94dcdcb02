/*
** The exit writer (exit_write.h): the spec, the writer's own state, the
** write. Shared by the exit helpers of Linux (exit_signals.c) and
** Windows (exit_win.c). Normal context, on the writing thread.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"
#include "exit_signals.h"   /* ljp_package_paths */
#include "exit_write.h"
#include "ownstate.h"

void ljp_exit_spec_free(ljp_exit_spec *s)
{
  free(s->module);
  free(s->func);
  free(s->arg);
  free(s->path);
  free(s->cpath);
  s->module = s->func = s->arg = s->path = s->cpath = NULL;
  s->arglen = 0;
}

static char *dup_n(const char *s, size_t n)
{
  char *d = s ? malloc(n + 1) : NULL;
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

int ljp_exit_spec_copy(ljp_exit_spec *s, lua_State *L, const char *module,
                       const char *func, const char *arg, size_t arglen)
{
  ljp_exit_spec_free(s);
  s->module = dup_n(module, strlen(module));
  s->func = dup_n(func, strlen(func));
  s->arg = dup_n(arg, arglen);
  s->arglen = arglen;
  ljp_package_paths(L, &s->path, &s->cpath);
  if (s->module && s->func && s->arg) return 0;
  ljp_exit_spec_free(s);
  return -1;
}

lua_State *ljp_exit_writer(const ljp_exit_spec *s, ljp_ctx *ctx,
                           lua_State **empty, char *err, size_t errlen)
{
  lua_State *HL = ljp_own_writer(s->path, s->cpath, s->module, s->func,
                                 err, errlen);
  if (HL && ljp_own_view_set(lua_topointer(HL, LUA_REGISTRYINDEX), ctx)) {
    lua_close(HL);
    snprintf(err, errlen, "too many writers at once");
    return NULL;
  }
  if (!HL) return NULL;
  lua_pushlstring(HL, s->arg, s->arglen);
  *empty = lua_newthread(HL);
  luaL_ref(HL, LUA_REGISTRYINDEX);
  return HL;
}

int ljp_exit_write(lua_State *HL, lua_State *empty, ljp_ctx *ctx,
                   const char *name, char *err, size_t errlen)
{
  ljp_complete_offline(ctx, empty);
  lua_pushvalue(HL, 1);           /* the writer */
  lua_pushvalue(HL, 2);           /* its argument */
  lua_pushstring(HL, name);
  if (lua_pcall(HL, 2, 0, 0) != 0) {
    const char *m = lua_tostring(HL, -1);
    snprintf(err, errlen, "%s", m ? m : "?");
    lua_pop(HL, 1);
    return -1;
  }
  return 0;
}

void ljp_exit_writer_close(lua_State *HL)
{
  if (!HL) return;
  ljp_own_view_clear(lua_topointer(HL, LUA_REGISTRYINDEX));
  lua_close(HL);
}
