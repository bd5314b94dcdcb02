/*
** Timers from timer_create(2), delivered with SIGEV_THREAD_ID to the
** thread that started profiling:
**   cpu   CLOCK_THREAD_CPUTIME_ID: the thread's CPU time only. The kernel
**         checks CPU timers once per tick (250 Hz here), so a shorter
**         interval fires at tick rate.
**   wall  CLOCK_MONOTONIC: precise, also while the thread sleeps; each
**         tick ends a blocking call (EINTR: nanosleep, poll, epoll_wait).
**         Only the fallback of the wall clock (timer_thread.c), which
**         does not signal a blocked thread, when the thread's
**         /proc/self/task/<tid>/syscall cannot be opened.
** The signal's value carries the run token.
**
** wall: each signal re-arms the timer (signal context: timer_settime
** and clock_gettime are async-signal-safe) as a one-shot timer at an
** absolute time: a random gap in [interval/2, 3/2 interval) after the
** last *scheduled* expiry, not after delivery, so expiries average one
** per interval whatever the delivery delay. A fixed phase would sample a
** periodic program (a frame loop) at one phase only (aliasing). The
** signal stands for every scheduled expiry the clock has passed (a
** preempted thread takes its signal late): the handler reads the timer's
** clock (vDSO) and weighs the signal by that count, and the next expiry
** is the first one still ahead, so a late signal is never followed by a
** burst of catch-up ones. One-shot, not periodic: re-arming a queued
** periodic CLOCK_MONOTONIC timer from the handler moves an hrtimer the
** kernel has just queued again, and on this VM that cost about 10 us per
** signal on top of the ~20 us of the delivery itself (bench/sigcost.c,
** modes periodic, moved and oneshot: 18, 29 and 18 us).
**
** cpu: a periodic timer (it_interval = the interval), no clock read (a
** thread's CPU clock has no vDSO read: clock_gettime is a system call).
** The kernel re-arms it when it hands over the signal and counts the
** expiries passed meanwhile in si_overrun (a cpu timer fires only on the
** kernel's tick: at 1 ms, ~250 signals a second stand for 1,000 ticks),
** so the weight is 1 + si_overrun and the schedule is known without a
** read. Every LJP_CPU_JUMP-th (2nd) signal the handler redraws the phase:
** one timer_settime at a random gap in [interval/2, 3/2 interval) after
** the last expiry passed, it_interval unchanged (a CPU timer has no
** hrtimer to move: it is checked on the tick). Per signal: 0.5 system
** calls (strace -f -c, a CPU-bound loop at 1 ms: 249 signals, 124
** timer_settime, no clock_gettime; before, one of each per signal), on
** this VM ~1.9 us of system calls instead of ~6.2 (the kernel's own
** re-arm at delivery not included; a timer_settime of a cpu timer
** 3.6-3.9 us, a thread CPU clock read 2.2-2.8 us, loaded machine), and
** 73 instructions per signal instead of 387 (callgrind, 1 ms: the old
** re-arm drew one random gap per expiry passed, ~10 per signal there).
** Weights stay exact (1 s of CPU: 996 ticks at 1 ms, 9,960 at 0.1 ms);
** with the phase never redrawn a program of period = interval (10 ms)
** was sampled at one or two tick phases (heavy 47-97% for 75%), redrawn
** every 2nd signal 70-77% (test_clocks.lua, "cpu clock: no aliasing").
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ljp.h"

/* cpu: the schedule's phase is redrawn every LJP_CPU_JUMP-th signal. */
#ifndef LJP_CPU_JUMP
#define LJP_CPU_JUMP 2
#endif

static uint64_t clock_ns(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The first expiry at when (absolute) on the timer's clock, then one
** every every_ns (0: one-shot). */
static int arm_at(ljp_ctx *ctx, uint64_t when, uint64_t every_ns)
{
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  its.it_value.tv_sec = (time_t)(when / 1000000000u);
  its.it_value.tv_nsec = (long)(when % 1000000000u);
  its.it_interval.tv_sec = (time_t)(every_ns / 1000000000u);
  its.it_interval.tv_nsec = (long)(every_ns % 1000000000u);
  ctx->tmr.next_ns = when;
  return timer_settime(ctx->tmr.u.posix, TIMER_ABSTIME, &its, NULL);
}

/* Signal context, wall. The signal stands for the expiry scheduled
** (next_ns) and for every later one of the random schedule the clock has
** passed; the timer is re-armed at the first one still ahead. Bounded: a
** thread late by more than 64 intervals (stopped, preempted for long) has
** those counted at one per interval in one step. */
static uint32_t posix_rearm(ljp_ctx *ctx, const siginfo_t *si)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t now = clock_ns(ctx->tmr.clock), next = ctx->tmr.next_ns, w = 1;
  (void)si;
  atomic_store_explicit(&ctx->tmr.seen_ns, now, memory_order_relaxed);
  if (!period) period = 1;
  if (now > next && now - next > 64 * period) {
    uint64_t skip = (now - next) / period - 1;
    w += skip;
    next += skip * period;
  }
  next += ljp_timer_gap_ns(ctx);
  while (next <= now) {
    w++;
    next += ljp_timer_gap_ns(ctx);
  }
  arm_at(ctx, next, 0);
  return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* Signal context, cpu: no clock read. The kernel re-arms the periodic
** timer when it hands over the signal and counts in si_overrun the
** expiries it passed meanwhile: the signal stands for next_ns and the
** si_overrun expiries after it, one interval apart, the last of them at
** most one interval before now (the run's clock in seen_ns). Every
** LJP_CPU_JUMP-th signal the schedule restarts a random gap in
** [interval/2, 3/2 interval) after that last expiry (one timer_settime;
** an expiry already passed fires at the next kernel tick, with its own
** overrun count). */
static uint32_t cpu_rearm(ljp_ctx *ctx, const siginfo_t *si)
{
  uint64_t period = (uint64_t)ctx->opt.interval_us * 1000u;
  uint64_t w = 1, last;
  if (si && si->si_code == SI_TIMER && si->si_overrun > 0)
    w += (uint64_t)si->si_overrun;
  last = ctx->tmr.next_ns + (w - 1) * period;
  atomic_store_explicit(&ctx->tmr.seen_ns, last, memory_order_relaxed);
  if (++ctx->tmr.jump_n >= LJP_CPU_JUMP) {
    ctx->tmr.jump_n = 0;
    arm_at(ctx, last + ljp_timer_gap_ns(ctx), period);
  } else {
    ctx->tmr.next_ns = last + period;
  }
  return w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
}

/* Signal context: the duration is over. */
static void posix_halt(ljp_ctx *ctx)
{
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  timer_settime(ctx->tmr.u.posix, 0, &its, NULL);
}

static int posix_start(ljp_ctx *ctx, clockid_t clock, uint64_t every_ns,
                       char *err, size_t n)
{
  struct sigevent sev;
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = ctx->opt.signo;
  sev.sigev_value.sival_int = (int)atomic_load(&ctx->token);
  sev._sigev_un._tid = ctx->tid;
  ctx->tmr.clock = clock;
  if (timer_create(clock, &sev, &ctx->tmr.u.posix) != 0) {
    snprintf(err, n, "ljprof: timer_create failed: %s", strerror(errno));
    return -1;
  }
  ctx->tmr.jump_n = 0;
  if (arm_at(ctx, clock_ns(clock) + ljp_timer_first_ns(ctx), every_ns) != 0) {
    snprintf(err, n, "ljprof: timer_settime failed: %s", strerror(errno));
    timer_delete(ctx->tmr.u.posix);
    return -1;
  }
  return 0;
}

static int cpu_start(ljp_ctx *ctx, char *err, size_t n)
{
  return posix_start(ctx, CLOCK_THREAD_CPUTIME_ID,
                     (uint64_t)ctx->opt.interval_us * 1000u, err, n);
}

static int wall_start(ljp_ctx *ctx, char *err, size_t n)
{
  return posix_start(ctx, CLOCK_MONOTONIC, 0, err, n);
}

static void posix_stop(ljp_ctx *ctx)
{
  timer_delete(ctx->tmr.u.posix);  /* also discards its pending signal */
}

const ljp_timer_ops ljp_timer_cpu = {cpu_start, posix_stop,
                                     cpu_rearm, posix_halt};
const ljp_timer_ops ljp_timer_wall_kernel = {wall_start, posix_stop,
                                             posix_rearm, posix_halt};
