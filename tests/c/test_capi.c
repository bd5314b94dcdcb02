/* The jit.profile-shaped C API: ljprof_start/stop/dumpstack used exactly
** like luaJIT_profile_start/stop/dumpstack. Inside the callback,
** ljprof_dumpstack must equal luaJIT_profile_dumpstack on the interrupted
** thread for several formats; samples add up to the stats; stop twice and
** dumpstack after stop are safe; starting twice fails with a message. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <luajit.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

typedef struct acc {
  long calls, samples, compared, mismatched, host;
  int vm_ok;
} acc;

static void cb(void *data, lua_State *L, int samples, int vmstate)
{
  static const char *fmts[] = {"fZ;", "F|lZ; ", "pl", "l", "f"};
  static const int depths[] = {1, 3, -2, -100, 100};
  acc *a = data;
  size_t i, j;
  a->calls++;
  a->samples += samples;
  if (!strchr("NICGJ", vmstate)) a->vm_ok = 0;
  /* The documented exception (docs/usage.md, "start, stop and dumpstack
  ** behave exactly as in jit.profile, with one exception"): ticks that
  ** found no Lua call active (here: in luaL_dostring's parser, before its
  ** lua_pcall; seen once in a sanitized CI run) come in a call of their
  ** own whose dumpstack is [host], where jit.profile reads the live stack
  ** of a later safe point. */
  {
    size_t lh;
    const char *h = ljprof_dumpstack(L, "f", 1, &lh);
    if (lh == 6 && !memcmp(h, "[host]", 6)) {
      a->host += samples;
      if (vmstate != 'C') a->vm_ok = 0;
      return;
    }
  }
  for (i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
    for (j = 0; j < sizeof(depths) / sizeof(depths[0]); j++) {
      size_t l1, l2;
      char mine[4096];
      const char *s1 = ljprof_dumpstack(L, fmts[i], depths[j], &l1);
      const char *s2;
      if (l1 >= sizeof(mine)) l1 = sizeof(mine) - 1;
      memcpy(mine, s1, l1);
      s2 = luaJIT_profile_dumpstack(L, fmts[i], depths[j], &l2);
      a->compared++;
      if (l1 != l2 || memcmp(mine, s2, l1)) {
        if (a->mismatched++ < 5)
          fprintf(stderr, "mismatch fmt=%s depth=%d: '%.*s' vs '%.*s'\n",
                  fmts[i], depths[j], (int)l1, mine, (int)l2, s2);
      }
    }
  }
}

/* Labels from C: pushed sets reach the samples (ljprof_summary_ex), the
** plain summary sums over them, errors are the documented codes. */
typedef struct lsum {
  uint64_t total, with_c, with_d, plain;
  int bad;
} lsum;

static void entry_visit(void *data, const ljprof_entry *e)
{
  lsum *s = data;
  s->total += e->count;
  if (e->nlabels == 1 && !strcmp(e->labels[0], "endpoint") &&
      !strcmp(e->labels[1], "/c"))
    s->with_c += e->count;
  else if (e->nlabels == 2 && !strcmp(e->labels[0], "endpoint") &&
           !strcmp(e->labels[1], "/d") && !strcmp(e->labels[2], "kind") &&
           !strcmp(e->labels[3], "batch"))
    s->with_d += e->count;      /* merged onto /c, sorted by key */
  else if (e->nlabels != 0)
    s->bad++;
}

static void plain_visit(void *data, const char *stack, size_t len,
                        int vmstate, const char *zone, uint64_t count)
{
  (void)stack; (void)len; (void)vmstate; (void)zone;
  ((lsum *)data)->plain += count;
}

static void test_labels(lua_State *L)
{
  static const char *const c[] = {"endpoint", "/c"};
  static const char *const d[] = {"endpoint", "/d", "kind", "batch"};
  static const char *const bad[] = {"zone", "x"};
  ljprof_options opt;
  char err[256];
  lsum s;
  memset(&s, 0, sizeof(s));
  CHECK_EQ(ljprof_label_push(L, bad, 1), LJPROF_LABEL_EKEY);
  CHECK_EQ(ljprof_label_pop(L), LJPROF_LABEL_EEMPTY);
  ljprof_options_init(&opt);
  opt.clock = LJPROF_CLOCK_WALL;
  opt.interval_us = 1000;
  CHECK_EQ(ljprof_start_ex(L, &opt, err, sizeof(err)), 0);
  CHECK_EQ(ljprof_label_push(L, c, 1), 0);
  CHECK_EQ(luaL_dostring(L, "jit.off() local s = 0 "
                            "for i = 1, 3000000 do s = s + i % 7 end"), 0);
  CHECK_EQ(ljprof_label_push(L, d, 2), 0);
  CHECK_EQ(luaL_dostring(L, "local s = 0 "
                            "for i = 1, 3000000 do s = s + i % 5 end"), 0);
  CHECK_EQ(ljprof_label_pop(L), 0);
  CHECK_EQ(ljprof_label_pop(L), 0);
  CHECK_EQ(ljprof_label_pop(L), LJPROF_LABEL_EEMPTY);
  ljprof_stop(L);
  CHECK_EQ(ljprof_summary_ex(L, entry_visit, &s), 0);
  CHECK_EQ(ljprof_summary(L, plain_visit, &s), 0);
  printf("capi labels: %llu samples, %llu under /c, %llu under /d+batch\n",
         (unsigned long long)s.total, (unsigned long long)s.with_c,
         (unsigned long long)s.with_d);
  CHECK(s.with_c > 0);
  CHECK(s.with_d > 0);
  CHECK_EQ(s.bad, 0);
  CHECK_EQ(s.plain, s.total);
}

/* A C host's summary names fast functions as Lua does ("pcall"), not
** "[builtin#20]" (issue 27): a C host has no jit.vmdef to map ids. */
typedef struct ffsum {
  uint64_t pcall, builtin, total;
} ffsum;

static void ff_visit(void *data, const char *stack, size_t len,
                     int vmstate, const char *zone, uint64_t count)
{
  ffsum *s = data;
  (void)vmstate; (void)zone;
  s->total += count;
  if (memmem(stack, len, ";pcall;", 7)) s->pcall += count;
  if (memmem(stack, len, "[builtin#", 9)) s->builtin += count;
}

static void ff_entry_visit(void *data, const ljprof_entry *e)
{
  ff_visit(data, e->stack, e->len, e->vmstate, e->zone, e->count);
}

static void test_ffnames(lua_State *L)
{
  ljprof_options opt;
  char err[256];
  ffsum s, x;
  memset(&s, 0, sizeof(s));
  memset(&x, 0, sizeof(x));
  ljprof_options_init(&opt);
  opt.clock = LJPROF_CLOCK_WALL;
  opt.interval_us = 500;
  CHECK_EQ(ljprof_start_ex(L, &opt, err, sizeof(err)), 0);
  CHECK_EQ(luaL_dostring(L, "jit.off() local function busy(n) local s = 0 "
                            "for i = 1, n do s = s + i % 7 end return s end "
                            "for k = 1, 60 do pcall(busy, 100000) end"), 0);
  ljprof_stop(L);
  CHECK_EQ(ljprof_summary(L, ff_visit, &s), 0);
  CHECK_EQ(ljprof_summary_ex(L, ff_entry_visit, &x), 0);
  printf("capi ffnames: %llu samples, %llu under pcall, %llu [builtin#N]\n",
         (unsigned long long)s.total, (unsigned long long)s.pcall,
         (unsigned long long)s.builtin);
  CHECK(s.pcall > 0);
  CHECK_EQ(s.builtin, 0);
  CHECK(x.pcall > 0);
  CHECK_EQ(x.builtin, 0);
}

int main(void)
{
  lua_State *L = luaL_newstate();
  acc a;
  ljprof_stats st;
  ljprof_options opt;
  char err[256];
  size_t len;
  memset(&a, 0, sizeof(a));
  a.vm_ok = 1;
  luaL_openlibs(L);
  ljprof_start(L, "i1", cb, &a);
  CHECK(ljprof_running(L));
  /* Starting again fails and leaves the first run alone. */
  ljprof_options_init(&opt);
  CHECK_EQ(ljprof_start_ex(L, &opt, err, sizeof(err)), -1);
  CHECK(strstr(err, "already running") != NULL);
  CHECK(ljprof_running(L));
  CHECK_EQ(luaL_dostring(L,
    "local m = {} "
    "function m.leaf(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end "
    "local function mid(n) return (m.leaf(n)) end "
    "local co = coroutine.wrap(function() for k = 1, 3 do coroutine.yield(mid(10)) end end) "
    "jit.off() local r = 0 "
    "for k = 1, 2000 do r = r + mid(30000) + (pcall(mid, 100) and 1 or 0) end "
    "local t = {} for i = 1, 2000 do t[i] = (i * 7919) % 2003 end "
    "table.sort(t, function(a, b) m.leaf(20) return a < b end) "
    "return r"), 0);
  ljprof_stop(L);
  ljprof_stop(L);                       /* no-op */
  CHECK(!ljprof_running(L));
  ljprof_get_stats(L, &st);
  printf("capi: %ld callbacks, %ld samples (%ld host ticks), %ld comparisons, "
         "%ld mismatches\n", a.calls, a.samples, a.host, a.compared,
         a.mismatched);
  /* Ticks measure CPU time (~0.3 s of work: ~300 at 1 ms); callbacks may
  ** be far fewer when they are slow (sanitizers, load): ticks arriving
  ** during a callback are delivered together with the next one. */
  CHECK(a.samples >= 100);
  CHECK(a.calls >= 3);
  CHECK_EQ(a.mismatched, 0);
  CHECK(a.vm_ok);
  /* Every completed tick reaches the callback, except those still pending
  ** when stop ran (completed at stop, like the built-in, which drops
  ** them): at most a signal or two, each ~4 ticks on a 250 Hz kernel. */
  CHECK((uint64_t)a.samples <= st.completed);
  CHECK(st.completed - (uint64_t)a.samples <= 16);
  CHECK_EQ(st.ticks, st.completed + st.dropped);
  /* dumpstack after stop: safe, and the top level is the main chunk. */
  CHECK(ljprof_dumpstack(L, "l", 1, &len) != NULL);
  /* Exact call counts (calls.c), sampled at 2 kHz meanwhile, read back
  ** from Lua; then a run left counting, which lua_close stops from a
  ** finalizer (where LuaJIT refuses to turn the JIT back on). */
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_ljprof);
  lua_setfield(L, -2, "ljprof");
  lua_pop(L, 2);
  ljprof_options_init(&opt);
  opt.clock = LJPROF_CLOCK_WALL;
  opt.interval_us = 500;
  opt.calls = 1;
  CHECK_EQ(ljprof_start_ex(L, &opt, err, sizeof(err)), 0);
  CHECK_EQ(luaL_dostring(L,
    "local function f(x) return x end "
    "for i = 1, 100000 do f(i) end "
    "local s = 0 for i = 1, 300 do s = s + #string.rep('a', i) end"), 0);
  ljprof_stop(L);
  if (luaL_dostring(L,
    "local n = {} "
    "for _, e in ipairs(require('ljprof').calls()) do n[e.func] = e.calls; if e.name then n[e.name] = e.calls end end "
    "assert(n.f == 100000, 'f: ' .. tostring(n.f)) "
    "assert(n['string.rep'] == 300, 'string.rep: ' .. tostring(n['string.rep']))") != 0) {
    fprintf(stderr, "calls: %s\n", lua_tostring(L, -1));
    CHECK(0);
  }
  test_labels(L);
  test_ffnames(L);
  CHECK_EQ(ljprof_start_ex(L, &opt, err, sizeof(err)), 0);
  CHECK_EQ(luaL_dostring(L, "for i = 1, 1000 do tostring(i) end"), 0);
  lua_close(L);
  return check_done("capi");
}
