/*
** The `thread` and `wall` clocks: a timer thread that wakes every
** interval and signals the profiled thread (the shape LuaJIT uses on
** Windows), unless that thread is blocked in a system call, which the
** signal would end (EINTR: nanosleep, poll, epoll_wait, select). `wall`
** is the same thread woken without timer slack (PR_SET_TIMERSLACK 1 ns),
** 50 us before each tick's time, which for a thread waiting for a CPU
** arms a one-shot kernel timer (CLOCK_MONOTONIC, SIGEV_THREAD_ID) at the
** tick's time instead of signalling now (see timer_main: where such a
** signal lands); when the thread cannot be looked at (no
** /proc/self/task/<tid>/syscall), `wall` is the kernel timer of
** timer_posix.c alone, whose ticks end blocking calls.
** Before each tick (tick_decide): the thread's CPU clock, read twice;
** still advancing, and by at least `busy` since the last tick, it is on
** a CPU and running: the tick is sent without more ado. Otherwise
** /proc/self/task/<tid>/syscall says what it does: a blocked thread's
** tick becomes a ring record written here,
** with the Lua frames it blocked in (fault-safe reads, checked against a
** second look: see blocked_tick), and one that barely ran since the last
** tick is about to block: its tick waits for the next sample. Two calls make it
** portable: the wake-up (a condition-variable timed wait, so stop wakes it
** at once) and the signalling (rt_tgsigqueueinfo to the profiled thread's
** id in this process, carrying the run token, as pthread_sigqueue would,
** but never through a pthread_t: a descriptor is freed or reused when its
** thread exits). The thread is alive whenever a tick is sent: the tick is
** sent with the mutex held, and the profiled thread's exit stops (and
** joins) this thread first, taking the mutex (timer_exit.c).
** Gaps are random in [interval/2, 3/2 interval), counted from the
** previous scheduled wake-up (see timer_posix.c). Ticks it deferred (the
** thread about to block, the signal queue full, the ring busy) are added
** to the next sample's weight (still deferred at stop: missed); ticks it
** overslept (it did not run on
** time: a loaded machine) are counted as missed, not taken: the next
** sample, one place, was charged for all of a gap's time (a Lua share of
** 0.37 against 0.20 timed, test_host_idle under load). A forked child that stops the run leaves the
** parent's thread alone (it does not exist there). A tick is not sent while the signal's action
** is SIG_DFL: a program that reset it (many daemons reset every signal)
** would be ended by the kernel, its profile lost; the run's signal check
** (run.c) then finds the ticks missing and says so in one line, keeping
** the samples. The OS calls (the thread's state from /proc, timer slack,
** rt_tgsigqueueinfo) go through os.h. Normal context, except the rearm
** and halt functions.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ljp.h"
#include "os.h"
#include "sigowner.h"

/* wall: the timer thread wakes this long before a tick's time, to have
** decided (about 10 us) before it; the kernel timer is armed only when
** at least LJP_WALL_ARM_NS remain. */
#define LJP_WALL_LEAD_NS 50000u
#define LJP_WALL_ARM_NS 5000

static void ts_add(struct timespec *ts, uint64_t ns)
{
  ns += (uint64_t)ts->tv_nsec;
  ts->tv_sec += (time_t)(ns / 1000000000u);
  ts->tv_nsec = (long)(ns % 1000000000u);
}

static void ts_sub(struct timespec *ts, uint64_t ns)
{
  int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec - (int64_t)ns;
  ts->tv_sec = (time_t)(t / 1000000000);
  ts->tv_nsec = (long)(t % 1000000000);
}

static int64_t ts_diff(const struct timespec *a, const struct timespec *b)
{
  return (int64_t)(a->tv_sec - b->tv_sec) * 1000000000 +
         (a->tv_nsec - b->tv_nsec);
}

static uint64_t cpu_ns(clockid_t c)
{
  struct timespec ts;
  if (clock_gettime(c, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A tick taken (by the handler, or a blocked thread's record): its time
** and the ticks sent until then, for the run's signal check (run.c).
** Signal context too. */
static void tick_seen(ljp_ctx *ctx)
{
  atomic_store_explicit(&ctx->tmr.seen_ns, ljp_now_ns(), memory_order_relaxed);
  atomic_store_explicit(&ctx->tmr.thr_sent_seen,
                        atomic_load_explicit(&ctx->tmr.thr_sent,
                                             memory_order_relaxed),
                        memory_order_relaxed);
}

/* What the blocked thread's tick becomes (no signal: it would end the
** call with EINTR). The Lua frames it blocked in, captured now and
** checked (its CPU time and system call the same after as before: it did
** not run meanwhile), go into the ring with the tick's weight, and that of
** ticks deferred before (thr_overrun: most often one that found the
** thread about to block in this call), as a signal's sample would take
** them; the next ticks of the same call (CPU time unchanged) reuse them. The ring has
** one writer at a time (ljp_ctx.ring_owner: a tick sent before may be
** handled meanwhile). When it is busy, or no frame could be captured,
** the tick is added to the next sample's weight, as an overslept one. */
typedef struct blocked_memo {
  int ok;
  uint64_t cpu;
  char sys[160];
  ljp_record rec;
} blocked_memo;

static void blocked_tick(ljp_ctx *ctx, blocked_memo *m, const char *sys,
                         uintptr_t pc, uint64_t cpu)
{
  uintptr_t pc2;
  int fd = ctx->tmr.u.thr.sysfd;
  char again[160];
  uint32_t w;
  if (ctx->autos.paused) return;   /* as the handler: no sample */
  if (!(m->ok && m->cpu == cpu && !strcmp(m->sys, sys))) {
    m->ok = 0;
    if (!ljp_blocked_capture(ctx, pc, &m->rec)) goto later;
    if (cpu_ns(ctx->tmr.u.thr.cpuclk) != cpu ||
        ljp_os_thread_state(fd, again, sizeof(again), &pc2) !=
            LJP_OS_IN_SYSCALL || strcmp(again, sys))
      goto later;                   /* it ran: the frames may be torn */
    m->ok = 1;
    m->cpu = cpu;
    snprintf(m->sys, sizeof(m->sys), "%s", sys);
  }
  w = 1 + atomic_exchange(&ctx->tmr.thr_overrun, 0);
  if (!ljp_blocked_push(ctx, &m->rec, w)) {
    atomic_fetch_add(&ctx->tmr.thr_overrun, w);
    return;
  }
  tick_seen(ctx);
  return;
later:
  atomic_fetch_add(&ctx->tmr.thr_overrun, 1);
}

/* Is this tick sent as a signal? A thread that can be looked at (its
** /proc file open) is first checked cheaply: its CPU clock read twice
** (about 1 us each), still advancing between the reads and by at least
** `busy` since the last tick: it runs on a CPU, the tick is sent (a
** signal to a running thread ends no call; the /proc read, several us,
** is saved for the ticks that may find it blocked). Otherwise its system
** call decides. A thread in a system call is not signalled. One on a CPU
** that ran less than `busy` (a quarter of the interval, at most 0.5 ms)
** since the last tick mostly blocks: it is about to block or has just
** woken, and a tick sent now may land in its next call; the tick waits
** for the next sample. One waiting for a CPU in user space, or running,
** is signalled: now (TICK_NOW), or on `wall` by its kernel timer at the
** tick's time (TICK_AT). */
enum { TICK_NONE, TICK_NOW, TICK_AT };
static int tick_decide(ljp_ctx *ctx, blocked_memo *memo, uint64_t busy,
                       uint64_t *last_cpu)
{
  clockid_t clk = ctx->tmr.u.thr.cpuclk;
  uint64_t cpu = cpu_ns(clk), ran = cpu - *last_cpu;
  char sys[160];
  uintptr_t pc = 0;
  int st;
  *last_cpu = cpu;
  if (ran >= busy && cpu_ns(clk) != cpu) return TICK_NOW;
  /* what it does now (os.h: /proc/self/task/<tid>/syscall on Linux) */
  st = ljp_os_thread_state(ctx->tmr.u.thr.sysfd, sys, sizeof(sys), &pc);
  if (st == LJP_OS_IN_SYSCALL) {
    blocked_tick(ctx, memo, sys, pc, cpu);
    return TICK_NONE;
  }
  if (st == LJP_OS_RUNNING && ran < busy) {
    atomic_fetch_add(&ctx->tmr.thr_overrun, 1);
    return TICK_NONE;
  }
  /* Waiting for a CPU (or just back on one). wall: its kernel timer at
  ** the tick's time, not a signal now (see timer_main). */
  return ctx->tmr.u.thr.precise ? TICK_AT : TICK_NOW;
}

/* wall: one expiry of its kernel timer at `at` (CLOCK_MONOTONIC). One
** still pending (this thread overslept past it) is replaced: its tick
** goes to the next sample's weight. */
static int ktimer_arm(ljp_ctx *ctx, const struct timespec *at)
{
  struct itimerspec its, old;
  memset(&its, 0, sizeof(its));
  its.it_value = *at;
  if (timer_settime(ctx->tmr.u.thr.ktimer, TIMER_ABSTIME, &its, &old) != 0)
    return -1;
  if (old.it_value.tv_sec || old.it_value.tv_nsec)
    atomic_fetch_add(&ctx->tmr.thr_overrun, 1);
  return 0;
}

/* ENTRY: the timer thread (ljp_thread_start, every signal blocked). */
static void *timer_main(void *arg)
{
  ljp_ctx *ctx = arg;
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t busy = period / 4 < 500000u ? period / 4 : 500000u;
  /* wall: woken this much before each tick's time (see below) */
  uint64_t lead = !ctx->tmr.u.thr.precise ? 0
                  : busy / 2 < LJP_WALL_LEAD_NS ? busy / 2 : LJP_WALL_LEAD_NS;
  uint64_t last_cpu;
  int fd = ctx->tmr.u.thr.sysfd;
  blocked_memo memo;
  siginfo_t si;
  struct timespec next, now, wake;
  /* wall: woken on time (the default slack, 50 us, would make each
  ** wake-up up to that late; the schedule does not drift either way) */
  if (ctx->tmr.u.thr.precise) ljp_os_timer_slack_min();
  memset(&memo, 0, sizeof(memo));
  memset(&si, 0, sizeof(si));  /* what pthread_sigqueue would send */
  si.si_signo = ctx->opt.signo;
  si.si_code = SI_QUEUE;
  si.si_pid = ctx->tmr.u.thr.pid;
  si.si_uid = getuid();
  si.si_value.sival_ptr = NULL;  /* upper half zero: a tick, not a lend */
  si.si_value.sival_int = (int)atomic_load(&ctx->token);
  last_cpu = fd >= 0 ? cpu_ns(ctx->tmr.u.thr.cpuclk) : 0;
  clock_gettime(CLOCK_MONOTONIC, &next);
  ts_add(&next, ljp_timer_first_ns(ctx));
  pthread_mutex_lock(&ctx->tmr.u.thr.mu);
  while (!ctx->tmr.u.thr.stop) {
    int rc, send;
    wake = next;
    ts_sub(&wake, lead);
    rc = pthread_cond_timedwait(&ctx->tmr.u.thr.cv, &ctx->tmr.u.thr.mu, &wake);
    if (ctx->tmr.u.thr.stop) break;
    if (rc != ETIMEDOUT) continue;
    if (ctx->tmr.deadline_ns && ljp_now_ns() >= ctx->tmr.deadline_ns)
      break;                        /* the duration is over: no more ticks
                                    ** (api.c reads it from the deadline) */
    send = fd < 0 ? TICK_NOW : tick_decide(ctx, &memo, busy, &last_cpu);
    if (send == TICK_AT) {
      /* wall, a thread not on a CPU now: a signal sent now would be
      ** taken where it was stopped, and when this thread shares its CPU
      ** that is where this thread's wake-up stopped it, often at the
      ** return from a system call that checks the time slice (a CPU
      ** clock read: os.clock): a bias. The kernel timer signals it at the
      ** tick's time, wherever it is then, as the kernel-timer wall clock
      ** does; when this thread woke too late for that, `lead` after now
      ** (this thread is asleep again by then, the other one back on its
      ** CPU). */
      struct timespec at = next;
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (ts_diff(&next, &now) < LJP_WALL_ARM_NS) {
        at = now;
        ts_add(&at, lead);
      }
      if (ljp_sig_is_default(ctx->opt.signo) || ktimer_arm(ctx, &at) != 0)
        atomic_fetch_add(&ctx->tmr.thr_overrun, 1);
      else
        atomic_fetch_add(&ctx->tmr.thr_sent, 1);
      send = TICK_NONE;
    }
    /* SIG_DFL would kill: no tick (the schedule goes on below). */
    if (send && !ljp_sig_is_default(ctx->opt.signo)) {
      if (ljp_os_tgsigqueue(ctx->pid, ctx->tid, ctx->opt.signo, &si) != 0)
        atomic_fetch_add(&ctx->tmr.thr_overrun, 1);
      else
        atomic_fetch_add(&ctx->tmr.thr_sent, 1);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (ts_diff(&now, &next) > 0) {  /* overslept: skip, but count, ticks */
      uint64_t late = (uint64_t)ts_diff(&now, &next) / period;
      atomic_fetch_add(&ctx->n_missed, late);
      ts_add(&next, late * period);
    }
    ts_add(&next, ljp_timer_gap_ns(ctx));  /* random gap: no aliasing */
  }
  pthread_mutex_unlock(&ctx->tmr.u.thr.mu);
  return NULL;
}

/* Here, on the profiled thread: its CPU clock and system call file
** (sysfd -1: it cannot be looked at). */
static void thr_open(ljp_ctx *ctx)
{
  ctx->tmr.u.thr.sysfd = -1;
  if (pthread_getcpuclockid(pthread_self(), &ctx->tmr.u.thr.cpuclk) == 0)
    ctx->tmr.u.thr.sysfd = ljp_os_thread_state_open(ctx->tid);
}

static int thr_start(ljp_ctx *ctx, int precise, char *err, size_t n)
{
  pthread_condattr_t ca;
  int rc;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&ctx->tmr.u.thr.mu, NULL);
  pthread_cond_init(&ctx->tmr.u.thr.cv, &ca);
  pthread_condattr_destroy(&ca);
  ctx->tmr.u.thr.stop = 0;
  ctx->tmr.u.thr.precise = precise;
  ctx->tmr.u.thr.pid = getpid();
  atomic_store(&ctx->ring_owner, 0);
  /* every signal blocked there: it never runs a handler */
  if ((rc = ljp_thread_start(&ctx->tmr.u.thr.th, timer_main, ctx)) != 0) {
    snprintf(err, n, "ljprof: cannot create the timer thread: %s",
             strerror(rc));
    pthread_cond_destroy(&ctx->tmr.u.thr.cv);
    pthread_mutex_destroy(&ctx->tmr.u.thr.mu);
    if (ctx->tmr.u.thr.sysfd >= 0) close(ctx->tmr.u.thr.sysfd);
    return -1;
  }
  return 0;
}

static int thread_start(ljp_ctx *ctx, char *err, size_t n)
{
  thr_open(ctx);  /* none: every tick is sent */
  return thr_start(ctx, 0, err, n);
}

static void thread_stop(ljp_ctx *ctx)
{
  /* A forked child stopping the run: the timer thread is the parent's
  ** (threads do not survive fork) and its condition variable may have
  ** been copied with the thread waiting on it: joining or destroying
  ** would wait for ever. The child leaves them alone. */
  if (getpid() != ctx->tmr.u.thr.pid) {
    if (ctx->tmr.u.thr.sysfd >= 0) close(ctx->tmr.u.thr.sysfd);  /* a copy */
    ctx->tmr.u.thr.sysfd = -1;
    return;
  }
  pthread_mutex_lock(&ctx->tmr.u.thr.mu);
  ctx->tmr.u.thr.stop = 1;
  pthread_cond_signal(&ctx->tmr.u.thr.cv);
  pthread_mutex_unlock(&ctx->tmr.u.thr.mu);
  pthread_join(ctx->tmr.u.thr.th, NULL);
  /* Ticks deferred to a next sample that never came: missed. */
  atomic_fetch_add(&ctx->n_missed, atomic_exchange(&ctx->tmr.thr_overrun, 0));
  pthread_cond_destroy(&ctx->tmr.u.thr.cv);
  pthread_mutex_destroy(&ctx->tmr.u.thr.mu);
  if (ctx->tmr.u.thr.sysfd >= 0) close(ctx->tmr.u.thr.sysfd);
  ctx->tmr.u.thr.sysfd = -1;
}

/* Signal context: a tick stands for one expiry (and the overrun the
** handler adds); its time is the run's clock (CLOCK_MONOTONIC, vDSO). */
static uint32_t thread_rearm(ljp_ctx *ctx, const siginfo_t *si)
{
  (void)si;
  tick_seen(ctx);
  return 1;
}

const ljp_timer_ops ljp_timer_thread = {thread_start, thread_stop,
                                        thread_rearm, NULL};

/* wall: the timer thread, woken without slack; the kernel timer
** (timer_posix.c) when the thread cannot be looked at. */
static int wall_start(ljp_ctx *ctx, char *err, size_t n)
{
  struct sigevent sev;
  thr_open(ctx);
  ctx->tmr.wall_kernel = ctx->tmr.u.thr.sysfd < 0;
  if (ctx->tmr.wall_kernel) return ljp_timer_wall_kernel.start(ctx, err, n);
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = ctx->opt.signo;
  sev.sigev_value.sival_int = (int)atomic_load(&ctx->token);
  sev._sigev_un._tid = ctx->tid;
  if (timer_create(CLOCK_MONOTONIC, &sev, &ctx->tmr.u.thr.ktimer) != 0) {
    snprintf(err, n, "ljprof: timer_create failed: %s", strerror(errno));
    close(ctx->tmr.u.thr.sysfd);
    return -1;
  }
  if (thr_start(ctx, 1, err, n) != 0) {
    timer_delete(ctx->tmr.u.thr.ktimer);
    return -1;
  }
  return 0;
}

static void wall_stop(ljp_ctx *ctx)
{
  int parent = getpid() == ctx->tmr.u.thr.pid;
  if (ctx->tmr.wall_kernel) {
    ljp_timer_wall_kernel.stop(ctx);
    return;
  }
  thread_stop(ctx);
  /* After the join, nothing arms it again; the delete disarms an expiry
  ** still armed and discards its pending signal. A forked child has no
  ** POSIX timers of the parent (fork does not copy them): it leaves the
  ** id alone (it may name a timer of its own). */
  if (parent) timer_delete(ctx->tmr.u.thr.ktimer);
}

/* Signal context. */
static uint32_t wall_rearm(ljp_ctx *ctx, const siginfo_t *si)
{
  return ctx->tmr.wall_kernel ? ljp_timer_wall_kernel.rearm(ctx, si)
                              : thread_rearm(ctx, si);
}

/* Signal context: the timer thread ends at the deadline by itself; an
** expiry armed meanwhile is disarmed. */
static void wall_halt(ljp_ctx *ctx)
{
  struct itimerspec its;
  if (ctx->tmr.wall_kernel) {
    ljp_timer_wall_kernel.halt(ctx);
    return;
  }
  memset(&its, 0, sizeof(its));
  timer_settime(ctx->tmr.u.thr.ktimer, 0, &its, NULL);
}

const ljp_timer_ops ljp_timer_wall = {wall_start, wall_stop,
                                      wall_rearm, wall_halt};

int ljp_timer_thread_sends(const ljp_ctx *ctx)
{
  return ctx->tmr.ops == &ljp_timer_thread ||
         (ctx->tmr.ops == &ljp_timer_wall && !ctx->tmr.wall_kernel);
}
