/* ljprof's own states (src/ownstate.c): the writer loader and the views
** from a writer state's registry to the context it reads.
** - views: up to LJP_OWN_VIEWS at once, the next refused; each registry
**   finds its own context, an unknown or NULL registry none; a cleared
**   entry is free again; threads setting, reading and clearing their own
**   views at once never see another's (run under TSan/ASan as well);
** - write: the writer reads the context given, through a view set for
**   the call only; its error is one line;
** - writer: module.func on the top of a fresh state; a missing module or
**   function, or a module raising a non-string, is one line naming
**   module.func; with an opener given, `ljprof` in the writer's state is
**   that opener's module, not what package.cpath would find. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "../../src/ownstate.h"
#include "check.h"

static int fake_marker(lua_State *L)
{
  lua_pushliteral(L, "this library");
  return 1;
}

static char write_ctx;   /* the context ljp_own_write is given */
static int probe_saw;     /* what its writer found */

/* ljprof.probe(arg) in a writer's state: does its registry read
** write_ctx? "fail" raises a two-line error. */
static int fake_probe(lua_State *L)
{
  probe_saw = ljp_own_view(lua_topointer(L, LUA_REGISTRYINDEX)) == &write_ctx;
  if (!strcmp(luaL_checkstring(L, 1), "fail"))
    return luaL_error(L, "probe failed\nsecond line");
  return 0;
}

static int fake_opener(lua_State *L)
{
  lua_newtable(L);
  lua_pushcfunction(L, fake_marker);
  lua_setfield(L, -2, "marker");
  lua_pushcfunction(L, fake_probe);
  lua_setfield(L, -2, "probe");
  return 1;
}

static void test_views(void)
{
  static char regs[LJP_OWN_VIEWS + 1], ctxs[LJP_OWN_VIEWS + 1];
  int i;
  CHECK(ljp_own_view(NULL) == NULL);
  CHECK(ljp_own_view(&regs[0]) == NULL);
  for (i = 0; i < LJP_OWN_VIEWS; i++)
    CHECK_EQ(ljp_own_view_set(&regs[i], &ctxs[i]), 0);
  CHECK_EQ(ljp_own_view_set(&regs[LJP_OWN_VIEWS], &ctxs[LJP_OWN_VIEWS]), -1);
  for (i = 0; i < LJP_OWN_VIEWS; i++) CHECK(ljp_own_view(&regs[i]) == &ctxs[i]);
  CHECK(ljp_own_view(&regs[LJP_OWN_VIEWS]) == NULL);
  ljp_own_view_clear(&regs[3]);
  CHECK(ljp_own_view(&regs[3]) == NULL);
  CHECK_EQ(ljp_own_view_set(&regs[LJP_OWN_VIEWS], &ctxs[LJP_OWN_VIEWS]), 0);
  CHECK(ljp_own_view(&regs[LJP_OWN_VIEWS]) == &ctxs[LJP_OWN_VIEWS]);
  ljp_own_view_clear(&regs[LJP_OWN_VIEWS]);
  for (i = 0; i < LJP_OWN_VIEWS; i++) ljp_own_view_clear(&regs[i]);
  for (i = 0; i <= LJP_OWN_VIEWS; i++) CHECK(ljp_own_view(&regs[i]) == NULL);
}

#define NTHREADS 4
#define ROUNDS 20000

static void *view_thread(void *arg)
{
  char reg, ctx;   /* distinct addresses per thread */
  long bad = 0, i;
  for (i = 0; i < ROUNDS; i++) {
    if (ljp_own_view_set(&reg, &ctx) != 0) { bad++; continue; }
    if (ljp_own_view(&reg) != &ctx) bad++;
    ljp_own_view_clear(&reg);
    if (ljp_own_view(&reg) != NULL) bad++;
  }
  *(long *)arg = bad;
  return NULL;
}

static void test_views_threads(void)
{
  pthread_t th[NTHREADS];
  long bad[NTHREADS];
  int i;
  for (i = 0; i < NTHREADS; i++)
    CHECK_EQ(pthread_create(&th[i], NULL, view_thread, &bad[i]), 0);
  for (i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ(bad[i], 0);
  }
}

static void test_writer(void)
{
  char err[256];
  lua_State *HL;
  HL = ljp_own_writer(NULL, NULL, "string", "rep", err, sizeof(err));
  CHECK(HL != NULL);
  if (HL) {
    CHECK_EQ(lua_gettop(HL), 1);
    lua_pushliteral(HL, "ab");
    lua_pushinteger(HL, 3);
    CHECK_EQ(lua_pcall(HL, 2, 1, 0), 0);
    CHECK(!strcmp(lua_tostring(HL, -1), "ababab"));
    lua_close(HL);
  }
  HL = ljp_own_writer(NULL, NULL, "string", "nope", err, sizeof(err));
  CHECK(HL == NULL);
  CHECK(!strcmp(err, "string.nope: no such function"));
  HL = ljp_own_writer("/nonexistent/?.lua", "/nonexistent/?.so",
                      "no_such_module", "f", err, sizeof(err));
  CHECK(HL == NULL);
  CHECK(!strncmp(err, "no_such_module.f: module 'no_such_module' not found", 50));
  CHECK(strchr(err, '\n') == NULL);
  /* A module that raises something other than a string: still one line. */
  {
    char dir[] = "/tmp/ljp_ownstate_XXXXXX", file[64], path[64];
    FILE *f;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(file, sizeof(file), "%s/raises.lua", dir);
    snprintf(path, sizeof(path), "%s/?.lua", dir);
    f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) {
      fputs("error({})\n", f);
      fclose(f);
    }
    HL = ljp_own_writer(path, "/nonexistent/?.so", "raises", "f", err,
                        sizeof(err));
    CHECK(HL == NULL);
    CHECK(!strcmp(err, "raises.f: an error that is not a string"));
    remove(file);
    rmdir(dir);
  }
  /* package.cpath finds no ljprof here: the opener given does. */
  ljp_own_set_opener(fake_opener);
  HL = ljp_own_writer("/nonexistent/?.lua", "/nonexistent/?.so", "ljprof",
                      "marker", err, sizeof(err));
  CHECK(HL != NULL);
  if (HL) {
    CHECK_EQ(lua_pcall(HL, 0, 1, 0), 0);
    CHECK(!strcmp(lua_tostring(HL, -1), "this library"));
    lua_close(HL);
  }
}

/* ljp_own_write: the writer reads the context given, the view is gone
** after, a failure is one line. */
static void test_write(void)
{
  char err[256];
  CHECK_EQ(ljp_own_write(NULL, NULL, "ljprof", "probe", &write_ctx, "ok", 2,
                         err, sizeof(err)), 0);
  CHECK(probe_saw);
  probe_saw = 0;
  CHECK_EQ(ljp_own_write(NULL, NULL, "ljprof", "probe", &write_ctx, "fail",
                         4, err, sizeof(err)), -1);
  CHECK(probe_saw);
  CHECK(strstr(err, "probe failed") != NULL);
  CHECK(strchr(err, '\n') == NULL);
  CHECK_EQ(ljp_own_write(NULL, NULL, "ljprof", "nope", &write_ctx, "", 0,
                         err, sizeof(err)), -1);
  CHECK(!strcmp(err, "ljprof.nope: no such function"));
}

int main(void)
{
  test_views();
  test_views_threads();
  test_writer();
  test_write();   /* after test_writer: the fake opener is set */
  return check_done("ownstate");
}
