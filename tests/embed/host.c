/* A C program that embeds LuaJIT and profiles its Lua code with ljprof.
** Build it against an installed ljprof exactly as:
**
**   cc host.c -o host $(pkg-config --cflags --libs ljprof)
**
** It runs a Lua workload under ljprof_start_ex (no callback: ljprof keeps
** the counts), prints the hottest stacks and the run's statistics, and
** then checks that linking ljprof changed nothing else in the program:
** LuaJIT raises Lua errors with the C runtime's _Unwind_RaiseException,
** which must still come from libgcc_s (a library that exported its own
** _Unwind_* would take LuaJIT's errors over: issue 15 measured every Lua
** error 15x slower with libunwind linked). Exit status: 0, 1 (Lua or
** ljprof failed) or 3 (_Unwind_RaiseException does not come from
** libgcc_s). docs/embedding.md shows this file; tests/install.sh builds
** and runs it from every installed copy. */
#define _GNU_SOURCE
#include <dlfcn.h>
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
  "while os.clock() - t0 < 0.3 do busy(1e5) end\n"
  "for i = 1, 200000 do pcall(error, {}) end  -- Lua errors: C++-style unwinding\n";

typedef struct top { char stack[3][256]; uint64_t count[3]; } top;

/* Called for every aggregated (stack, VM state, zone): keep the 3 largest. */
static void visit(void *data, const char *stack, size_t len, int vmstate,
                  const char *zone, uint64_t count)
{
  top *t = data;
  int i, j;
  (void)vmstate; (void)zone;
  for (i = 0; i < 3 && count <= t->count[i]; i++) ;
  if (i == 3) return;
  for (j = 2; j > i; j--) {
    t->count[j] = t->count[j - 1];
    memcpy(t->stack[j], t->stack[j - 1], sizeof(t->stack[j]));
  }
  t->count[i] = count;
  snprintf(t->stack[i], sizeof(t->stack[i]), "%.*s", (int)len, stack);
}

int main(void)
{
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  ljprof_stats st;
  top t;
  char err[256];
  void *raise;
  Dl_info where;
  int i;

  luaL_openlibs(L);
  ljprof_options_init(&opt);
  opt.interval_us = 1000;                     /* 1 ms of CPU time */
  if (ljprof_start_ex(L, &opt, err, sizeof(err)) != 0) {
    fprintf(stderr, "host: %s\n", err);
    return 1;
  }
  if (luaL_dostring(L, workload) != 0) {
    fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
    return 1;
  }
  ljprof_stop(L);

  memset(&t, 0, sizeof(t));
  ljprof_summary(L, visit, &t);
  for (i = 0; i < 3 && t.count[i]; i++)
    printf("%6llu  %s\n", (unsigned long long)t.count[i], t.stack[i]);
  ljprof_get_stats(L, &st);
  printf("samples: %llu, dropped: %llu\n", (unsigned long long)st.ticks,
         (unsigned long long)st.dropped);
  lua_close(L);
  if (st.ticks == 0) {
    fprintf(stderr, "host: no samples\n");
    return 1;
  }

  raise = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
  if (!raise || !dladdr(raise, &where) || !where.dli_fname) {
    fprintf(stderr, "host: _Unwind_RaiseException not found\n");
    return 3;
  }
  printf("_Unwind_RaiseException: %s\n", where.dli_fname);
  return strstr(where.dli_fname, "libgcc_s") ? 0 : 3;
}
