#define _GNU_SOURCE
/* Loader traffic against profiled threads: several Lua states in several
** threads, each profiled (wall clock, 5 kHz, native stacks on) while it
** calls into a C library (so the handler walks native frames and the
** safe point refreshes the object registry and names frames), and one
** more thread loading and unloading a small library (LJPROF_DLTEST) in a
** loop. It must end without a crash (under ASan: without a use-after-free
** of loader-owned names or of replaced registry arrays), and the stats
** must show that walks happened while the loader was busy, and that the
** objects they walked through, which never changed, were not skipped for
** the churn of another (only while the loader is mid-change). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

#define NTHREADS 4
#define SECONDS 2.0  /* at least; up to 60 s until 50 walks */

double ljpf_outer(long n);  /* tests/native/ffitest.c (linked) */

typedef struct job {
  int id, rc;
  ljprof_stats st;
  uint64_t total;
  char err[256];
} job;

static atomic_int stop;
static atomic_long dl_cycles;

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int l_now(lua_State *L)
{
  lua_pushnumber(L, now_s());
  return 1;
}

static int l_work(lua_State *L)  /* a three-deep C chain in a library */
{
  lua_pushnumber(L, ljpf_outer((long)luaL_checknumber(L, 1)));
  return 1;
}

/* Walks so far: the loop runs until each thread has walked enough, so a
** loaded machine (fewer ticks land in the C chain) takes longer instead of
** failing. */
static int l_unwinds(lua_State *L)
{
  ljprof_stats st;
  ljprof_get_stats(L, &st);
  lua_pushnumber(L, (double)st.native_unwinds);
  return 1;
}

static void visit(void *data, const char *stack, size_t len, int vmstate,
                  const char *zone, uint64_t count)
{
  job *j = data;
  (void)stack; (void)len; (void)vmstate; (void)zone;
  j->total += count;
}

static void *run(void *arg)
{
  job *j = arg;
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  char code[512];
  luaL_openlibs(L);
  lua_register(L, "now", l_now);
  lua_register(L, "work", l_work);
  lua_register(L, "unwinds", l_unwinds);
  ljprof_options_init(&opt);
  opt.interval_us = 200;
  opt.clock = LJPROF_CLOCK_WALL;
  opt.native = 1;
  j->rc = ljprof_start_ex(L, &opt, j->err, sizeof(j->err));
  if (j->rc == 0) {
    snprintf(code, sizeof(code),
             "local t0, r = now(), 0 "
             "while now() - t0 < %g or (unwinds() < 20 and now() - t0 < 60) do "
             "  r = r + work(20000) "
             "  for i = 1, 2000 do r = r + i %% 3 end "
             "end return r", SECONDS);
    if (luaL_dostring(L, code) != 0) {
      snprintf(j->err, sizeof(j->err), "%s", lua_tostring(L, -1));
      j->rc = -1;
    }
    ljprof_stop(L);
    ljprof_summary(L, visit, j);
    ljprof_get_stats(L, &j->st);
  }
  lua_close(L);
  return NULL;
}

static void *churn(void *arg)
{
  const char *path = arg;
  while (!atomic_load(&stop)) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    long (*fn)(long);
    Dl_info di;
    if (!h) {
      fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
      break;
    }
    fn = (long (*)(long))dlsym(h, "ljpd_work");
    if (fn) {
      fn(1000);
      dladdr((void *)fn, &di);
    }
    /* Paced, loaded for a while (~3k cycles/s, as with four busy
    ** threads): safe points then take the library into their snapshot
    ** and the close pulls it away under them. Unpaced and alone, the loop
    ** changes the loader's list so often that nearly every walk is
    ** skipped, and a thread left running would never walk. */
    nanosleep(&(struct timespec){0, 100000}, NULL);
    dlclose(h);
    atomic_fetch_add(&dl_cycles, 1);
  }
  return NULL;
}

int main(void)
{
  const char *path = getenv("LJPROF_DLTEST");
  pthread_t th[NTHREADS], ch;
  job jobs[NTHREADS];
  uint64_t unwinds = 0, skipped = 0;
  int i;
  if (!path) {
    fprintf(stderr, "LJPROF_DLTEST is not set\n");
    return 1;
  }
  memset(jobs, 0, sizeof(jobs));
  pthread_create(&ch, NULL, churn, (void *)path);
  for (i = 0; i < NTHREADS; i++) {
    jobs[i].id = i;
    pthread_create(&th[i], NULL, run, &jobs[i]);
  }
  for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(ch, NULL);
  for (i = 0; i < NTHREADS; i++) {
    job *j = &jobs[i];
    if (j->rc) fprintf(stderr, "thread %d: %s\n", i, j->err);
    CHECK_EQ(j->rc, 0);
    printf("thread %d: %llu ticks, %llu signals, %llu native unwinds, "
           "%llu frames, %llu truncated, %llu skipped, %llu merged, %llu "
           "safe points\n", i,
           (unsigned long long)j->total, (unsigned long long)j->st.signals,
           (unsigned long long)j->st.native_unwinds,
           (unsigned long long)j->st.native_frames,
           (unsigned long long)j->st.native_truncated,
           (unsigned long long)j->st.native_skipped,
           (unsigned long long)j->st.merged,
           (unsigned long long)j->st.safepoints);
    CHECK(j->total >= 100);
    CHECK(j->st.native_unwinds >= 1);       /* the handler walked */
    CHECK_EQ(j->st.ticks, j->st.completed + j->st.dropped);
    unwinds += j->st.native_unwinds;
    skipped += j->st.native_skipped;
  }
  printf("%ld dlopen/dlclose cycles; %llu unwinds, %llu skipped\n",
         atomic_load(&dl_cycles), (unsigned long long)unwinds,
         (unsigned long long)skipped);
  CHECK(unwinds >= 20);
  CHECK(atomic_load(&dl_cycles) >= 100);   /* the loader was busy */
  /* The churned library is on no profiled thread's stack: walks skip
  ** only while the loader is mid-change, not because its list differs
  ** from the snapshot's (a replaced object on the stack: test_replaced). */
  CHECK(skipped * 2 <= unwinds);
  return check_done("dlclose");
}
