#define _GNU_SOURCE
/* Several Lua states in several threads, profiled at the same time: each
** has its own timer (per-thread CPU time), ring and table, and its profile
** holds only its own work. Also exercises the C API (ljprof_start_ex,
** ljprof_summary, ljprof_get_stats) without the Lua module. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

#define NTHREADS 4

typedef struct job {
  int id;
  const char *clock;
  uint64_t own, foreign, total;
  double cpu_s;                      /* the thread's CPU time while profiled */
  ljprof_stats st;
  char err[256];
  int rc;
} job;

static void visit(void *data, const char *stack, size_t len, int vmstate,
                  const char *zone, uint64_t count)
{
  job *j = data;
  char mine[32];
  (void)vmstate; (void)zone;
  snprintf(mine, sizeof(mine), "work%d", j->id);
  j->total += count;
  if (!stack || !len) return;
  if (memmem(stack, len, mine, strlen(mine))) j->own += count;
  else if (memmem(stack, len, "work", 4)) j->foreign += count;
}

static void *run(void *arg)
{
  job *j = arg;
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  char code[512];
  luaL_openlibs(L);
  ljprof_options_init(&opt);
  opt.interval_us = 1000;
  if (!strcmp(j->clock, "wall")) opt.clock = LJPROF_CLOCK_WALL;
  else if (!strcmp(j->clock, "thread")) opt.clock = LJPROF_CLOCK_THREAD;
  j->rc = ljprof_start_ex(L, &opt, j->err, sizeof(j->err));
  if (j->rc == 0) {
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    /* ~0.4 s of CPU per thread, interpreted, with per-thread names; no
    ** os.clock() in the loop: reading process CPU time from 4 threads is a
    ** contended syscall and would rightly show up as C time. */
    snprintf(code, sizeof(code),
             "jit.off() local function work%d(n) local s = 0 "
             "for i = 1, n do s = s + i %% 7 end return s end "
             "local r = 0 for k = 1, 1000 do r = r + work%d(100000) end "
             "return r", j->id, j->id);
    if (luaL_dostring(L, code) != 0) {
      snprintf(j->err, sizeof(j->err), "%s", lua_tostring(L, -1));
      j->rc = -1;
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    j->cpu_s = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    ljprof_stop(L);
    ljprof_summary(L, visit, j);
    ljprof_get_stats(L, &j->st);
  }
  lua_close(L);
  return NULL;
}

static void round_of(const char *clock)
{
  pthread_t th[NTHREADS];
  job jobs[NTHREADS];
  int i;
  memset(jobs, 0, sizeof(jobs));
  for (i = 0; i < NTHREADS; i++) {
    jobs[i].id = i;
    jobs[i].clock = clock;
    pthread_create(&th[i], NULL, run, &jobs[i]);
  }
  for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  for (i = 0; i < NTHREADS; i++) {
    job *j = &jobs[i];
    if (j->rc) fprintf(stderr, "thread %d (%s): %s\n", i, clock, j->err);
    CHECK_EQ(j->rc, 0);
    printf("%s thread %d: %.3f s CPU, %llu ticks, own %llu, foreign %llu, "
           "dropped %llu\n", clock, i, j->cpu_s, (unsigned long long)j->total,
           (unsigned long long)j->own,
           (unsigned long long)j->foreign, (unsigned long long)j->st.dropped);
    CHECK_EQ(j->foreign, 0);               /* never another state's stack */
    CHECK(j->total >= 50);                 /* ~0.4 s CPU, 1 ms interval */
    if (!strcmp(clock, "cpu")) {           /* ticks measure the thread's CPU */
      CHECK(j->total >= j->cpu_s * 1000 * 0.5);
      CHECK(j->total <= j->cpu_s * 1000 * 1.5 + 10);
    }
    CHECK(j->own * 10 >= j->total * 8);    /* mostly in its own workN */
    CHECK_EQ(j->st.ticks, j->st.completed + j->st.dropped);
  }
}

int main(void)
{
  round_of("cpu");
  round_of("wall");
  round_of("thread");
  return check_done("threads");
}
