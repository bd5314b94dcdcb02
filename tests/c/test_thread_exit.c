#define _GNU_SOURCE
/* Issue 28, item 1: profiled threads that exit without calling stop, their
** Lua states closed later by another thread. On the thread clock the timer
** thread went on signalling the dead thread's pthread_t (a freed or reused
** descriptor): the host crashed. A thread's exit must end its ticks on
** every clock. Each round: 8 threads each make a state, start a run on the
** clock, work ~30 ms and exit; a second wave of 8 threads (reusing the
** first wave's descriptors and thread ids) runs Lua work of its own while
** the first wave's ticks would still be due; then this (another) thread
** checks that no tick came after the exits and closes the states. Run
** plain, under ASan/UBSan and under TSan (tests/meson.build). */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

#define NTHREADS 8

typedef struct job {
  int id;
  ljprof_clock clock;
  lua_State *L;
  char err[256];
  int rc;
} job;

static void burn_lua(lua_State *L, int id, int rounds)
{
  char code[256];
  snprintf(code, sizeof(code),
           "jit.off() local function spin%d(n) local s = 0 for i = 1, n do "
           "s = s + i %% 7 end return s end local r = 0 "
           "for k = 1, %d do r = r + spin%d(20000) end return r",
           id, rounds, id);
  if (luaL_dostring(L, code) != 0) lua_pop(L, 1);
}

/* First wave: start, work, exit without stop. */
static void *profiled(void *arg)
{
  job *j = arg;
  ljprof_options opt;
  j->L = luaL_newstate();
  luaL_openlibs(j->L);
  ljprof_options_init(&opt);
  opt.interval_us = 1000;
  opt.clock = j->clock;
  j->rc = ljprof_start_ex(j->L, &opt, j->err, sizeof(j->err));
  /* Work until a tick came (a thread starved of CPU, under a sanitizer on
  ** a loaded machine, may otherwise finish first: 1 of 96 did), at most
  ** 20 rounds. */
  for (int k = 0; k < 20; k++) {
    ljprof_stats st;
    burn_lua(j->L, j->id, 100);
    if (j->rc || (ljprof_get_stats(j->L, &st), st.ticks > 0)) break;
  }
  return NULL;  /* no ljprof_stop, no lua_close */
}

/* Second wave: its own Lua work, unprofiled, on recycled threads. */
static void *bystander(void *arg)
{
  job *j = arg;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  burn_lua(L, j->id, 50);
  lua_close(L);
  return NULL;
}

static void sleep_ms(int ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

/* Threads of this process now. */
static int nthreads(void)
{
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Threads of this process once those joined have left /proc: a thread
** pthread_join has seen end may be listed a moment longer (its task is
** released after it wakes the joiner; a CI run saw one). Up to 2 s. */
static int nthreads_settled(int want)
{
  int n = nthreads(), k;
  for (k = 0; k < 200 && n != want; k++) {
    sleep_ms(10);
    n = nthreads();
  }
  return n;
}

static void round_of(ljprof_clock clock, const char *name, int n)
{
  pthread_t th[NTHREADS];
  job jobs[NTHREADS], others[NTHREADS];
  ljprof_stats st0[NTHREADS], st1;
  struct itimerval it;
  int i, before = nthreads();
  memset(jobs, 0, sizeof(jobs));
  memset(others, 0, sizeof(others));
  for (i = 0; i < n; i++) {
    jobs[i].id = i;
    jobs[i].clock = clock;
    pthread_create(&th[i], NULL, profiled, &jobs[i]);
  }
  for (i = 0; i < n; i++) pthread_join(th[i], NULL);
  /* The exits ended the ticks: no timer thread left (thread clock), the
  ** process-wide itimer disarmed. */
  CHECK_EQ(nthreads_settled(before), before);
  getitimer(ITIMER_PROF, &it);
  CHECK(!it.it_value.tv_sec && !it.it_value.tv_usec &&
        !it.it_interval.tv_sec && !it.it_interval.tv_usec);
  for (i = 0; i < n; i++) {
    if (jobs[i].rc) fprintf(stderr, "%s thread %d: %s\n", name, i, jobs[i].err);
    CHECK_EQ(jobs[i].rc, 0);
    ljprof_get_stats(jobs[i].L, &st0[i]);
  }
  for (i = 0; i < n; i++) {
    others[i].id = 100 + i;
    pthread_create(&th[i], NULL, bystander, &others[i]);
  }
  sleep_ms(100);  /* ~100 ticks per state would be due on wall clocks */
  for (i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (i = 0; i < n; i++) {
    ljprof_get_stats(jobs[i].L, &st1);
    printf("%s state %d: %llu ticks at the exit, %llu at the close\n", name,
           i, (unsigned long long)st0[i].ticks, (unsigned long long)st1.ticks);
    if (!st0[i].ticks) fprintf(stderr, "%s state %d: no tick\n", name, i);
    CHECK(st0[i].ticks > 0);              /* it was sampled while it ran */
    CHECK_EQ(st1.ticks, st0[i].ticks);    /* and not after its exit */
    lua_close(jobs[i].L);                 /* another thread closes it */
  }
}

static void *nothing(void *arg) { return arg; }

int main(void)
{
  pthread_t w;
  int r;
  /* (a sanitizer's own background thread starts with the first thread) */
  pthread_create(&w, NULL, nothing, NULL);
  pthread_join(w, NULL);
  for (r = 0; r < 3; r++) {
    round_of(LJPROF_CLOCK_THREAD, "thread", NTHREADS);
    round_of(LJPROF_CLOCK_WALL, "wall", NTHREADS);
    round_of(LJPROF_CLOCK_CPU, "cpu", NTHREADS);
    round_of(LJPROF_CLOCK_ITIMER, "itimer", 1);  /* one per process */
  }
  return check_done("thread_exit");
}
