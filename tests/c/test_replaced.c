#define _GNU_SOURCE
/* A library unloaded, and another build of it loaded at the same place,
** while ljprof's object snapshot still has the first (no safe point in
** between: the swap and the work that follows run in one C function).
** The signal handler must not walk with the first build's unwind table:
** - another build (LJPROF_DLTEST2: other code, other build ID, the same
**   layout) loaded at the first's place: the walks that land in it are
**   skipped and counted, and the run goes on;
** - the same build loaded again at its place: the walks go on (its table
**   is the one the snapshot has) and name its frames.
** The loader is asked to put the second at the first's place; where it
** does not (another mapping took the hole), the case cannot run and the
** test fails saying so, rather than passing without the race. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

static void *cur_h;
static long (*cur_work)(long);

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Open path as the current library: its load address, or raises. */
static uintptr_t open_lib(lua_State *L, const char *path)
{
  Dl_info di;
  if (!(cur_h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
    luaL_error(L, "dlopen %s: %s", path, dlerror());
  if (!(cur_work = (long (*)(long))dlsym(cur_h, "ljpd_work")))
    luaL_error(L, "%s: no ljpd_work", path);
  return dladdr((void *)cur_work, &di) ? (uintptr_t)di.dli_fbase : 0;
}

/* load(path) -> base: the library the next safe points take in. */
static int l_load(lua_State *L)
{
  lua_pushnumber(L, (double)open_lib(L, luaL_checkstring(L, 1)));
  return 1;
}

/* work(n): a call into the current library (walks through it). */
static int l_work(lua_State *L)
{
  lua_pushnumber(L, (double)cur_work((long)luaL_checknumber(L, 1)));
  return 1;
}

/* swap(path, seconds) -> base, signals, skipped, unwinds: close the
** current library, open path (at its place, one hopes) and work in it
** for that long without returning to Lua; the counts are this call's. */
static int l_swap(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  double secs = luaL_checknumber(L, 2), t0;
  ljprof_stats a, b;
  uintptr_t base;
  ljprof_get_stats(L, &a);
  dlclose(cur_h);
  base = open_lib(L, path);
  t0 = now_s();
  while (now_s() - t0 < secs) cur_work(300000);
  ljprof_get_stats(L, &b);
  lua_pushnumber(L, (double)base);
  lua_pushnumber(L, (double)(b.signals - a.signals));
  lua_pushnumber(L, (double)(b.native_skipped - a.native_skipped));
  lua_pushnumber(L, (double)(b.native_unwinds - a.native_unwinds));
  return 4;
}

static int l_now(lua_State *L)
{
  lua_pushnumber(L, now_s());
  return 1;
}

typedef struct found {
  uint64_t inner;   /* samples with ljpd_inner under ljpd_work */
} found;

static void visit(void *data, const char *stack, size_t len, int vmstate,
                  const char *zone, uint64_t count)
{
  found *f = data;
  char buf[4096];
  (void)vmstate; (void)zone;
  if (len >= sizeof(buf)) len = sizeof(buf) - 1;
  memcpy(buf, stack, len);
  buf[len] = '\0';
  if (strstr(buf, "ljpd_work;ljpd_inner")) f->inner += count;
}

/* One case: load first, work in it from Lua (safe points take it into the
** snapshot), then swap to second inside one C call. Returns the swap's
** counts through the out parameters; 0, or -1 with a message. */
static int run_case(const char *first, const char *second, double *sig,
                    double *skipped, double *unwinds, uint64_t *inner,
                    int *same_place)
{
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  char err[256];
  found f = {0};
  int rc;
  luaL_openlibs(L);
  lua_register(L, "load", l_load);
  lua_register(L, "work", l_work);
  lua_register(L, "swap", l_swap);
  lua_register(L, "now", l_now);
  ljprof_options_init(&opt);
  opt.clock = LJPROF_CLOCK_WALL;
  opt.interval_us = 500;
  opt.ring_size = 8192;
  opt.stack_fmt = "fZ;";
  opt.native = 1;
  if (ljprof_start_ex(L, &opt, err, sizeof(err)) != 0) {
    fprintf(stderr, "start: %s\n", err);
    lua_close(L);
    return -1;
  }
  lua_pushstring(L, first);
  lua_setglobal(L, "FIRST");
  lua_pushstring(L, second);
  lua_setglobal(L, "SECOND");
  rc = luaL_dostring(L,
    "local base = load(FIRST) "
    "local t0, r = now(), 0 "
    "while now() - t0 < 0.3 do r = r + work(20000) "
    "  for i = 1, 500 do r = r + i % 3 end end "
    "local b, s, k, u = swap(SECOND, 0.6) "
    "return b == base, s, k, u");
  if (rc != 0) {
    fprintf(stderr, "case: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return -1;
  }
  *same_place = lua_toboolean(L, -4);
  *sig = lua_tonumber(L, -3);
  *skipped = lua_tonumber(L, -2);
  *unwinds = lua_tonumber(L, -1);
  ljprof_stop(L);
  ljprof_summary(L, visit, &f);
  *inner = f.inner;
  lua_close(L);
  dlclose(cur_h);
  cur_h = NULL;
  return 0;
}

int main(void)
{
  const char *a = getenv("LJPROF_DLTEST"), *b = getenv("LJPROF_DLTEST2");
  double sig, skipped, unwinds;
  uint64_t inner;
  int same, tries;
  if (!a || !b) {
    fprintf(stderr, "LJPROF_DLTEST and LJPROF_DLTEST2 must name the test "
                    "libraries (run through meson test)\n");
    return 1;
  }
  /* Another build at the first's place: skipped. */
  for (tries = 0, same = 0; tries < 5 && !same; tries++)
    CHECK_EQ(run_case(a, b, &sig, &skipped, &unwinds, &inner, &same), 0);
  if (!same) fprintf(stderr, "the loader never put %s at %s's place: the "
                             "case did not run\n", b, a);
  CHECK(same);
  printf("another build: %.0f signals, %.0f walks skipped, %.0f walked\n",
         sig, skipped, unwinds);
  CHECK(sig >= 100);
  CHECK(skipped >= 0.8 * sig);
  /* The same build again: walked, and its frames named. */
  for (tries = 0, same = 0; tries < 5 && !same; tries++)
    CHECK_EQ(run_case(a, a, &sig, &skipped, &unwinds, &inner, &same), 0);
  CHECK(same);
  printf("the same build: %.0f signals, %.0f walks skipped, %.0f walked, "
         "%llu samples in ljpd_inner under ljpd_work\n", sig, skipped,
         unwinds, (unsigned long long)inner);
  CHECK(sig >= 100);
  CHECK(unwinds >= 0.8 * sig);
  CHECK(skipped <= 0.05 * sig);
  CHECK(inner >= 50);
  return check_done("replaced");
}
