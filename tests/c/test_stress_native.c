#define _GNU_SOURCE
/* Stress for the signal handler's native walk (src/cfi.c, unwind.c): four
** Lua states on four threads, each profiled on the wall clock at 10 kHz
** with native stacks on, each spending its time in long C call chains
** (a recursive chain in this program ending in a library, the same
** library through the FFI, and C calling back into Lua that calls C), so
** the handlers walk many frames on several threads at once; one more
** thread loads, calls and unloads a library in a loop (the registry is
** rebuilt and retired under the walks). Run plain, under ASan+UBSan and
** under TSan (tests/meson.build).
**
** Checks, for each state: it ran to the end, the handler walked
** (native_unwinds > 0) and found frames beyond the PC, the profile holds
** the library's innermost function as a native frame, and every tick is
** accounted for. LJPROF_STRESS_SECONDS sets the run time (default 5).
**
** The plain build also proves the handler lock-free and allocation-free:
** each state's signal handler is wrapped (a thread-local flag set while
** ljprof's handler runs), and this program interposes the functions a
** handler must never reach (pthread_mutex_lock/trylock, malloc, calloc,
** realloc, mmap): any call with the flag set is
** counted and fails the test. (With libunwind in the handler, its
** mempool_alloc took a mutex on cache misses.) */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ljprof.h"
#include "check.h"

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define INTERPOSE 1

static __thread volatile int in_handler;
static atomic_long bad_calls;
static const char *_Atomic bad_first;
static void (*ljp_handler)(int, siginfo_t *, void *);

static void note(const char *what)
{
  if (in_handler) {
    const char *none = NULL;
    atomic_fetch_add(&bad_calls, 1);
    atomic_compare_exchange_strong(&bad_first, &none, what);
  }
}

static void wrapped_handler(int sig, siginfo_t *si, void *uc)
{
  in_handler++;
  ljp_handler(sig, si, uc);
  in_handler--;
}

/* The real functions (glibc's own names for them, or the next
** definition: found before the first thread starts). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__mmap(void *, size_t, int, int, int, off_t);
static int (*real_lock)(pthread_mutex_t *), (*real_trylock)(pthread_mutex_t *);

static void find_real(void)
{
  if (!real_lock) {
    real_trylock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT,
                                                     "pthread_mutex_trylock");
    real_lock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT,
                                                  "pthread_mutex_lock");
  }
}

void *malloc(size_t n) { note("malloc"); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note("calloc"); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note("realloc"); return __libc_realloc(p, n); }
int pthread_mutex_lock(pthread_mutex_t *m)
{
  note("pthread_mutex_lock");
  find_real();
  return real_lock(m);
}
int pthread_mutex_trylock(pthread_mutex_t *m)
{
  note("pthread_mutex_trylock");
  find_real();
  return real_trylock(m);
}
void *mmap(void *a, size_t n, int p, int f, int fd, off_t o)
{
  note("mmap");
  return __mmap(a, n, p, f, fd, o);
}
#endif

#define NTHREADS 4

double ljpf_outer(long n);  /* tests/native/ffitest.c (linked) */

typedef struct job {
  int id, rc;
  double seconds;
  ljprof_stats st;
  uint64_t total, in_lib;
  char err[256];
} job;

static atomic_int stop;
static atomic_long dl_cycles;
static __thread volatile double sink;  /* per thread: no race */

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

/* A chain of k frames of this program, then the library's three. */
static __attribute__((noinline)) double deep(int k, long n)
{
  double r = k ? deep(k - 1, n) : ljpf_outer(n);
  sink = r;  /* not a tail call */
  return r + 1.0;
}

static int l_deep(lua_State *L)
{
  lua_pushnumber(L, deep((int)luaL_checkinteger(L, 1),
                         (long)luaL_checknumber(L, 2)));
  return 1;
}

/* C calling Lua calling C: walks cross LuaJIT's own code. */
static int l_callback(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  lua_call(L, 0, 1);
  return 1;
}

static void visit(void *data, const char *stack, size_t len, int vmstate,
                  const char *zone, uint64_t count)
{
  job *j = data;
  (void)len; (void)vmstate; (void)zone;
  j->total += count;
  if (strstr(stack, "ljpf_inner")) j->in_lib += count;
}

static void *run(void *arg)
{
  job *j = arg;
  lua_State *L = luaL_newstate();
  ljprof_options opt;
  char code[1024];
  luaL_openlibs(L);
  lua_register(L, "now", l_now);
  lua_register(L, "deep", l_deep);
  lua_register(L, "callback", l_callback);
  ljprof_options_init(&opt);
  opt.interval_us = 100;  /* 10 kHz */
  opt.clock = LJPROF_CLOCK_WALL;
  opt.native = 1;
  opt.signo = SIGRTMIN + 4;
#ifdef INTERPOSE
  {  /* wrap ljprof's handler (the same for every state); a later start
     ** must find ljprof's own handler installed, not the wrapper (which it
     ** would refuse as a foreign handler): unwrapped around each start */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct sigaction sa;
    pthread_mutex_lock(&mu);
    sigaction(opt.signo, NULL, &sa);
    if ((sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == wrapped_handler) {
      sa.sa_sigaction = ljp_handler;
      sigaction(opt.signo, &sa, NULL);
    }
    j->rc = ljprof_start_ex(L, &opt, j->err, sizeof(j->err));
    sigaction(opt.signo, NULL, &sa);
    if (j->rc == 0 && (sa.sa_flags & SA_SIGINFO) &&
        sa.sa_sigaction != wrapped_handler) {
      ljp_handler = sa.sa_sigaction;
      sa.sa_sigaction = wrapped_handler;
      sigaction(opt.signo, &sa, NULL);
    }
    pthread_mutex_unlock(&mu);
  }
#else
  j->rc = ljprof_start_ex(L, &opt, j->err, sizeof(j->err));
#endif
  if (j->rc == 0) {
    snprintf(code, sizeof(code),
             "local ffi = require('ffi') "
             "ffi.cdef('double ljpf_outer(long n);') "
             "local id, t0, r = %d, now(), 0 "
             "local function viacb() return deep(3, 3000) end "
             "while now() - t0 < %g do "
             "  r = r + deep(8 + id, 20000) "
             "  r = r + ffi.C.ljpf_outer(20000) "
             "  r = r + callback(viacb) "
             "  for i = 1, 2000 do r = r + i %% 3 end "
             "end return r", j->id, j->seconds);
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
    if (!h) {
      fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
      break;
    }
    fn = (long (*)(long))dlsym(h, "ljpd_work");
    if (fn) fn(1000);
    dlclose(h);
    atomic_fetch_add(&dl_cycles, 1);
  }
  return NULL;
}

int main(void)
{
  const char *path = getenv("LJPROF_DLTEST");
  const char *secs = getenv("LJPROF_STRESS_SECONDS");
  double seconds = secs && atof(secs) > 0 ? atof(secs) : 5.0;
  pthread_t th[NTHREADS], ch;
  job jobs[NTHREADS];
  uint64_t unwinds = 0, frames = 0, truncated = 0;
  int i;
  if (!path) {
    fprintf(stderr, "LJPROF_DLTEST is not set\n");
    return 1;
  }
  memset(jobs, 0, sizeof(jobs));
#ifdef INTERPOSE
  find_real();
#endif
  pthread_create(&ch, NULL, churn, (void *)path);
  for (i = 0; i < NTHREADS; i++) {
    jobs[i].id = i;
    jobs[i].seconds = seconds;
    pthread_create(&th[i], NULL, run, &jobs[i]);
  }
  for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(ch, NULL);
  for (i = 0; i < NTHREADS; i++) {
    job *j = &jobs[i];
    if (j->rc) fprintf(stderr, "thread %d: %s\n", i, j->err);
    CHECK_EQ(j->rc, 0);
    printf("thread %d: %llu ticks (%llu in ljpf_inner), %llu signals, "
           "%llu native unwinds, %llu frames, %llu truncated, %llu "
           "skipped\n", i,
           (unsigned long long)j->total, (unsigned long long)j->in_lib,
           (unsigned long long)j->st.signals,
           (unsigned long long)j->st.native_unwinds,
           (unsigned long long)j->st.native_frames,
           (unsigned long long)j->st.native_truncated,
           (unsigned long long)j->st.native_skipped);
    CHECK(j->total > 0);                    /* a profile */
    CHECK(j->in_lib > 0);                   /* with the library's frames */
    CHECK(j->st.native_unwinds > 0);        /* the handler walked */
    CHECK(j->st.native_frames > j->st.native_unwinds); /* beyond the PC */
    CHECK_EQ(j->st.ticks, j->st.completed + j->st.dropped);
    unwinds += j->st.native_unwinds;
    frames += j->st.native_frames;
    truncated += j->st.native_truncated;
  }
  printf("%.1f s; %ld dlopen/dlclose cycles; %llu unwinds, %.1f frames "
         "per walk, %llu truncated\n", seconds, atomic_load(&dl_cycles),
         (unsigned long long)unwinds,
         unwinds ? (double)frames / (double)unwinds : 0.0,
         (unsigned long long)truncated);
  CHECK(atomic_load(&dl_cycles) > 0);
#ifdef INTERPOSE
  printf("calls from the signal handler to functions it must not reach: "
         "%ld%s%s\n", atomic_load(&bad_calls),
         atomic_load(&bad_first) ? ", the first: " : "",
         atomic_load(&bad_first) ? atomic_load(&bad_first) : "");
  CHECK(ljp_handler != NULL);
  CHECK_EQ(atomic_load(&bad_calls), 0);
#endif
  return check_done("stress_native");
}
