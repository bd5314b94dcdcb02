/* The C API (include/ljprof.h) from a Windows C host under Wine: a
** program that embeds LuaJIT (linked with lua51.dll) and links
** ljprof.dll, as tests/embed/host.c does on Linux (docs/embedding.md, "A
** C host"): a Lua workload under ljprof_start_ex (no callback: ljprof
** keeps the counts), then ljprof_summary's stacks and ljprof_get_stats.
** Checked: a start with clock itimer refused with one line naming what
** is accepted; samples taken; stacks ending in busy (0.5 s of the
** run: under Wine the 200,000 Lua errors, SEH unwinding, take longer and
** most of the samples: pcall;error); 200,000
** Lua errors (pcall) still work while profiling; ljprof_running says 1
** then 0. Prints what it checks; exit status 0, or 1 on a failure.
** tests/windows/meson.build (win-host). */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>
#include <ljprof.h>

static const char workload[] =
  "local function busy(n)\n"
  "  local s = 0\n"
  "  for i = 1, n do s = s + math.sin(i) end\n"
  "  return s\n"
  "end\n"
  "local t0 = os.clock()\n"
  "while os.clock() - t0 < 0.5 do busy(1e5) end\n"
  "local e = 0\n"
  "for i = 1, 200000 do if not pcall(error, {}) then e = e + 1 end end\n"
  "assert(e == 200000, 'errors caught: ' .. e)\n";

typedef struct top { char stack[256]; uint64_t count, total, busy; } top;

static void visit(void *data, const char *stack, size_t len, int vmstate,
                  const char *zone, uint64_t count)
{
  top *t = data;
  (void)vmstate; (void)zone;
  t->total += count;
  if (len >= 4 && memcmp(stack + len - 4, "busy", 4) == 0) t->busy += count;
  if (count > t->count) {
    t->count = count;
    snprintf(t->stack, sizeof(t->stack), "%.*s", (int)len, stack);
  }
}

static int failed;

static void check(int ok, const char *what)
{
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failed = 1;
}

int main(void)
{
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  ljprof_stats st;
  top t;
  char err[256];

  luaL_openlibs(L);
  ljprof_options_init(&opt);
  opt.clock = LJPROF_CLOCK_ITIMER;
  err[0] = 0;
  check(ljprof_start_ex(L, &opt, err, sizeof(err)) != 0, "clock itimer refused");
  printf("  %s\n", err);
  check(strstr(err, "accepted: cpu, wall, thread") != NULL && !strchr(err, '\n'),
        "one line naming the clocks accepted");

  ljprof_options_init(&opt);
  opt.interval_us = 1000;
  if (ljprof_start_ex(L, &opt, err, sizeof(err)) != 0) {
    fprintf(stderr, "host: %s\n", err);
    return 1;
  }
  check(ljprof_running(L) == 1, "running");
  if (luaL_dostring(L, workload) != 0) {
    fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
    return 1;
  }
  ljprof_stop(L);
  check(ljprof_running(L) == 0, "stopped");

  memset(&t, 0, sizeof(t));
  ljprof_summary(L, visit, &t);
  ljprof_get_stats(L, &st);
  printf("  samples %llu, dropped %llu; in busy %llu; hottest: %llu of %llu"
         "  %s\n", (unsigned long long)st.ticks, (unsigned long long)st.dropped,
         (unsigned long long)t.busy, (unsigned long long)t.count,
         (unsigned long long)t.total, t.stack);
  check(st.ticks >= 50 && t.total >= 50, "samples taken (>= 50)");
  /* (a compiled busy inlined into the main chunk's loop trace may be
  ** charged to the main chunk: a floor, not a share) */
  check(t.busy >= 20, "stacks ending in busy: >= 20 samples");
  lua_close(L);
  printf("%s\n", failed ? "failed" : "passed");
  return failed;
}
