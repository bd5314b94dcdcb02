/* A starved timer thread is no lost signal. The wall and thread clocks'
** ticks come from ljprof's timer thread; on a loaded machine that thread
** may not run for 50 ms and more. A program that wraps ljprof's handler
** with its own (which passes each tick on) then saw no tick for that
** long, and the run's signal check called the signal taken over: sampling
** stopped (CI, test_stress_native under load). Here the timer thread is
** starved on purpose: put on the profiled thread's CPU at SCHED_IDLE
** while the profiled thread spins in Lua. The check must keep sampling;
** the run must show the starvation it tested (a gap of 60 ms or more
** between ticks). Then the control: a wrapper that swallows the ticks,
** the timer thread free: the loss is still seen, with one line.
**
**   test_starved_timer          both clocks, both wrappers
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int l_now(lua_State *L)
{
  lua_pushnumber(L, now_s());
  return 1;
}

/* C work of 80 ms from Lua: a tick taken in it arms the safe point,
** reached only when the call returns, 80 ms after the tick. */
static int l_cspin(lua_State *L)
{
  double end = now_s() + lua_tonumber(L, 1);
  volatile double x = 1;
  while (now_s() < end) x = x * 1.0000001;
  return 0;
}

/* The program's handler: passes the tick on to ljprof's (or not), and
** notes the longest gap between ticks. */
static void (*ljprof_handler)(int, siginfo_t *, void *);
static volatile int pass_on;
static volatile double last_tick, max_gap;
static volatile int wrapped_ticks;

static void wrapper(int sig, siginfo_t *si, void *uc)
{
  double t = now_s();
  wrapped_ticks++;
  if (last_tick > 0 && t - last_tick > max_gap) max_gap = t - last_tick;
  last_tick = t;
  if (pass_on) ljprof_handler(sig, si, uc);
}

static void wrap(int signo)
{
  struct sigaction sa;
  sigaction(signo, NULL, &sa);
  ljprof_handler = sa.sa_sigaction;
  sa.sa_sigaction = wrapper;
  sigaction(signo, &sa, NULL);
}

static void unwrap(int signo)
{
  struct sigaction sa;
  sigaction(signo, NULL, &sa);
  sa.sa_sigaction = ljprof_handler;
  sigaction(signo, &sa, NULL);
}

/* Spinners on the profiled thread's CPU while it runs: the timer thread
** at SCHED_IDLE gets less of it. */
#define NSPIN 2
static volatile int spin_stop;
static cpu_set_t spin_cpu;

static void *spinner(void *arg)
{
  volatile unsigned long x = 0;
  (void)arg;
  sched_setaffinity(0, sizeof(spin_cpu), &spin_cpu);
  while (!spin_stop) x++;
  return NULL;
}

/* The process's thread ids, up to n. */
static int tasks(pid_t *v, int n)
{
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int k = 0;
  if (!d) return 0;
  while ((e = readdir(d)) && k < n)
    if (e->d_name[0] != '.') v[k++] = (pid_t)atoi(e->d_name);
  closedir(d);
  return k;
}

/* stderr into a file for the run: the one-line notices are checked. */
static int saved_err = -1;
static FILE *err_file;

static void capture_stderr(void)
{
  fflush(stderr);
  err_file = tmpfile();
  saved_err = dup(2);
  dup2(fileno(err_file), 2);
}

static int captured_lost_lines(void)
{
  char line[512];
  int n = 0;
  fflush(stderr);
  dup2(saved_err, 2);
  close(saved_err);
  rewind(err_file);
  while (fgets(line, sizeof(line), err_file)) {
    fputs(line, stderr);
    if (strstr(line, "changed the handling of signal")) n++;
  }
  fclose(err_file);
  return n;
}

/* One run; returns the longest gap between ticks (starve: the timer
** thread at SCHED_IDLE). */
static double one_run(ljprof_clock clock, int starve)
{
  const char *cname = clock == LJPROF_CLOCK_WALL ? "wall" : "thread";
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  ljprof_stats st;
  char err[256];
  pid_t before[64], after[64], timer = 0;
  int nb, na, i, j, lost, fresh = 0;
  cpu_set_t one;
  pthread_t sp_th[NSPIN];
  luaL_openlibs(L);
  lua_register(L, "now", l_now);
  lua_register(L, "cspin", l_cspin);
  ljprof_options_init(&opt);
  opt.clock = clock;
  opt.interval_us = 1000;
  opt.signo = SIGRTMIN + 5;
  nb = tasks(before, 64);
  capture_stderr();
  CHECK_EQ(ljprof_start_ex(L, &opt, err, sizeof(err)), 0);
  na = tasks(after, 64);
  for (i = 0; i < na; i++) {  /* the thread start created */
    for (j = 0; j < nb && before[j] != after[i]; j++) {}
    if (j == nb) {
      timer = after[i];
      fresh++;
    }
  }
  CHECK_EQ(fresh, 1);  /* the timer thread, no other */
  pass_on = starve;
  max_gap = 0;
  last_tick = now_s();
  wrapped_ticks = 0;
  wrap(opt.signo);
  if (starve && timer) {
    /* the timer thread on this thread's CPU, at the lowest priority: it
    ** runs only now and then while this thread spins */
    struct sched_param sp = {0};
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    CHECK_EQ(sched_setaffinity(timer, sizeof(one), &one), 0);
    CHECK_EQ(sched_setscheduler(timer, SCHED_IDLE, &sp), 0);
    spin_cpu = one;
    spin_stop = 0;
    for (i = 0; i < NSPIN; i++) pthread_create(&sp_th[i], NULL, spinner, NULL);
  }
  CHECK_EQ(luaL_dostring(L, "local t0, s = now(), 0 "
                            "while now() - t0 < 1.0 do "
                            "  cspin(0.08) "
                            "  for i = 1, 1000 do s = s + i % 3 end "
                            "end return s"), 0);
  if (starve && last_tick > 0 && now_s() - last_tick > max_gap)
    max_gap = now_s() - last_tick;
  if (starve && timer)  /* still at SCHED_IDLE (or the test tests nothing) */
    CHECK_EQ(sched_getscheduler(timer), SCHED_IDLE);
  ljprof_stop(L);
  if (starve && timer) {
    spin_stop = 1;
    for (i = 0; i < NSPIN; i++) pthread_join(sp_th[i], NULL);
  }
  unwrap(opt.signo);
  ljprof_get_stats(L, &st);
  lost = captured_lost_lines();
  printf("%s clock, %s: %d signals (%llu taken by ljprof), %llu ticks, "
         "longest gap %.0f ms, %d lost-signal lines\n", cname,
         starve ? "timer thread starved, ticks passed on"
                : "ticks swallowed", wrapped_ticks,
         (unsigned long long)st.signals,
         (unsigned long long)st.ticks, max_gap * 1e3, lost);
  if (starve) {
    CHECK_EQ(lost, 0);
  } else {
    CHECK_EQ(lost, 1);
  }
  if (starve) {  /* this thread back on every CPU */
    CPU_ZERO(&one);
    for (i = 0; i < CPU_SETSIZE && i < 1024; i++) CPU_SET(i, &one);
    sched_setaffinity(0, sizeof(one), &one);
  }
  lua_close(L);
  return max_gap;
}

/* The starved run until it starved the timer thread for 60 ms or more
** (more than the check's 50 ms): at most 4 tries (under `nice` and a
** loaded machine SCHED_IDLE gets a larger share); one must. */
static void starved(ljprof_clock clock)
{
  double gap = 0;
  int tries = 0;
  while (gap < 0.06 && tries++ < 4) gap = one_run(clock, 1);
  CHECK(gap >= 0.06);  /* the starvation this tests happened */
}

int main(void)
{
  starved(LJPROF_CLOCK_WALL);
  starved(LJPROF_CLOCK_THREAD);
  one_run(LJPROF_CLOCK_WALL, 0);
  one_run(LJPROF_CLOCK_THREAD, 0);
  return check_done("starved_timer");
}
