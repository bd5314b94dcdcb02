/*
** Signal handler and the process-wide slot table that maps a signal to its
** profiling context.
**
** ljp_signal_handler runs in signal context: only async-signal-safe calls,
** no malloc, no locks, no stdio, bounded work, errno preserved. It finds
** the tick's context, takes the timer's weight and the ring
** (ctx->ring_owner: the timer thread writes a blocked thread's records
** there too), and hands the tick to the sampler (sample.c) with the
** interrupted PC and registers. Every tick it cannot record is counted.
**
** A signal carries a token (slot | run generation << 8) in si_value;
** itimer signals carry none and use the one itimer binding. A context's
** slot stays valid while the handler runs: closing a run bumps the token
** and then waits until no handler is inside the slot. What the handler
** asks of the OS (the interrupted PC, the alternate stack's room, the
** thread id, tgkill) goes through os.h, inline.
**
** Stack: the handler runs on the interrupted code's stack. When that is
** a small alternate signal stack (the program's own handler, running on
** its sigaltstack, interrupted by a tick), it uses only what is left
** there: LJP_ALT_FULL bytes for a whole sample (the native walk is most
** of it: 2.4 KB measured), LJP_ALT_LITE for a sample without native and
** exact Lua frames (0.3 KB measured), and below that the tick is dropped
** (counted) and the timer only re-armed. Measured by filling the
** alternate stack below the handler's frame with a pattern and finding
** the deepest byte written (tests/lua/test_altstack.lua checks the sum).
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cfi.h"
#include "ljp.h"
#include "os.h"
#include "sigowner.h"
#include "exit_signals.h"

_Atomic uint64_t ljp_stale_signals;

/* What each signal did before ljprof took it: SIG_DFL or SIG_IGN (a
** signal with a handler is refused). A foreign signal, one the program or
** another process sends, gets that. */
static volatile sig_atomic_t prev_ignored[_NSIG];
static void ljp_signal_handler(int sig, siginfo_t *si, void *ucv);
#define ljp_signal_handler_ptr ljp_signal_handler

/* -- Signal context ------------------------------------------------------ */

/* Room the handler has on an alternate signal stack (see the top):
** below LJP_ALT_FULL no native walk nor Lua capture, below LJP_ALT_LITE
** no sample. */
#define LJP_ALT_FULL 4096
#define LJP_ALT_LITE 1024

/* Signal context: the previous disposition of sig, SIG_IGN or SIG_DFL.
** The default action of the signals ljprof may take is to ignore them
** (SIGURG, SIGWINCH, SIGCONT), to stop, or to end the process: for the
** last two it is restored and the signal raised again. */
static void foreign(int sig)
{
  if (prev_ignored[sig] || sig == SIGURG || sig == SIGWINCH ||
      sig == SIGCONT)
    return;
  ljp_sig_raise_default(sig);
  /* a stop signal: the process stopped and goes on; take it back */
  ljp_sig_install(sig, ljp_signal_handler_ptr, 0);
}

/* ENTRY, signal context: the sampling signal (the kernel, a tick). */
static void ljp_signal_handler(int sig, siginfo_t *si, void *ucv)
{
  int saved_errno = errno;
  uint32_t token, w = 1;
  ljp_ctx *ctx;
  int from_kernel = 0, lend = 0;
  size_t room = ljp_os_uc_alt_room(ucv, &token);  /* SIZE_MAX: not on one */

  if (si->si_code == SI_TIMER) {        /* timer_create: cpu, itimer, wall's kernel timer */
    token = (uint32_t)si->si_value.sival_int;
    /* itimer's is process-directed: it may land on any thread */
    from_kernel = sig == SIGPROF && token == ljp_itimer_bound();
  } else if (si->si_code == SI_QUEUE) { /* timer thread, or the export */
    token = (uint32_t)si->si_value.sival_int;  /* helper's lend request */
    /* (the magic first: the wall and thread clocks' timer thread
    ** queues ticks too, and the pid is the cached one, no system call
    ** per tick) */
    lend = (uint32_t)((uint64_t)(uintptr_t)si->si_value.sival_ptr >> 32) ==
           LJP_LEND_MAGIC && si->si_pid == ljp_self_pid();
  } else if (sig == SIGPROF) {          /* itimer (or forwarded) */
    token = ljp_itimer_bound();
    from_kernel = si->si_code == SI_KERNEL;
  } else {
    token = 0;
  }
  if ((ctx = ljp_slot_enter(token)) != NULL) {
    if (lend) {
      /* Not a tick: the export helper (auto.c) asks for the context;
      ** lent now if the thread is outside every ljprof region, else at
      ** the region's end (exit_signals.h). */
      if (ljp_gettid() == ctx->tid) ljp_lend_grant(&ctx->exit);
    } else if (from_kernel && ljp_gettid() != ctx->tid) {
      /* Process-wide timer landed on another thread: hand it over. */
      ljp_os_tgkill(ctx->pid, ctx->tid, SIGPROF);
    } else if (ctx->tmr.expired || (ctx->tmr.deadline_ns &&
                                ljp_now_ns() >= ctx->tmr.deadline_ns)) {
      if (!ctx->tmr.expired && ctx->tmr.ops->halt) ctx->tmr.ops->halt(ctx);
      ctx->tmr.expired = 1;                /* duration over: no more ticks */
    } else {
      if (ctx->tmr.ops->rearm && ctx->tmr.ticking)
        w = ctx->tmr.ops->rearm(ctx, si);  /* the expiries it stands for */
      w += atomic_exchange_explicit(&ctx->tmr.thr_overrun, 0,
                                    memory_order_relaxed);
      /* Paused by the control signal (auto.c): the timer keeps its
      ** schedule, no sample is taken. */
      if (ctx->autos.paused) {
        /* nothing */
      } else if (room < LJP_ALT_LITE) {
        /* On an alternate stack with too little left: counted, dropped. */
        atomic_fetch_add_explicit(&ctx->n_signals, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ctx->n_ticks, w, memory_order_relaxed);
        atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
      } else {
        /* The ring is the timer thread's while it writes a blocked
        ** thread's record (a tick it sent before may arrive then): the
        ** weight waits for the next sample. */
        int free_ = 0;
        if (atomic_compare_exchange_strong_explicit(&ctx->ring_owner, &free_,
                1, memory_order_acquire, memory_order_relaxed)) {
          int lite = room < LJP_ALT_FULL;
          ljp_regs regs;
          if (ctx->native_on && !lite) ljp_cfi_regs(&regs, ucv);
          ljp_sample(ctx, ljp_os_uc_pc(ucv),
                     ctx->native_on && !lite ? &regs : NULL, w, lite);
          atomic_store_explicit(&ctx->ring_owner, 0, memory_order_release);
        } else {
          atomic_fetch_add_explicit(&ctx->tmr.thr_overrun, w,
                                    memory_order_relaxed);
        }
      }
      ljp_exit_int_watch();  /* luajit's SIGINT handler (exit_signals.c) */
    }
  } else if ((si->si_code == SI_USER || si->si_code == SI_TKILL) &&
             si->si_pid != getpid()) {
    /* Sent by another process (kill -USR1): not a tick. It gets what it
    ** would have had without ljprof. */
    ljp_slot_leave(token);
    foreign(sig);
    errno = saved_errno;
    return;
  } else {
    atomic_fetch_add_explicit(&ljp_stale_signals, 1, memory_order_relaxed);
  }
  ljp_slot_leave(token);
  errno = saved_errno;
}

/* -- Installation (normal context) --------------------------------------- */

static int pinned;

int ljp_signal_pinned(void) { return pinned; }

static void ljp_pin_library(void)
{
  Dl_info di;
  if (pinned) return;
  pinned = 1;
  if (dladdr((void *)ljp_signal_handler, &di) && di.dli_fname)
    dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  ljp_self_pid_cache();  /* its fork handler needs the library pinned */
}

int ljp_signal_install(int signo, char *err, size_t errlen)
{
  struct sigaction old;
  int rc = 0;
  if (signo <= 0 || signo >= _NSIG || signo == SIGKILL || signo == SIGSTOP) {
    snprintf(err, errlen, "ljprof: bad signal %d (accepted: 1-%d except "
             "SIGKILL, SIGSTOP and the fault and child signals)", signo,
             _NSIG - 1);
    return -1;
  }
  /* A fault (or abort, or child) signal is the kernel's or the C
  ** library's to deliver: taken as the sampling signal, a real segfault
  ** would reach the handler, find no token and return, and the fault
  ** would repeat forever. */
  switch (signo) {
  case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP:
  case SIGABRT: case SIGCHLD:
    snprintf(err, errlen, "ljprof: signal %d (%s) cannot be the sampling "
             "signal: it reports faults, aborts or children (accepted: a "
             "free signal such as SIGURG (the default), SIGRTMIN+4, SIGUSR1/2, or "
             "SIGPROF with clock itimer)", signo, strsignal(signo));
    return -1;
  default:
    break;
  }
  ljp_slots_lock();
  ljp_sig_sampler_set(ljp_signal_handler);  /* its queries (sigowner.h) */
  if (ljp_sig_get(signo, &old) != 0) {
    snprintf(err, errlen, "ljprof: cannot query signal %d: %s", signo,
             strerror(errno));
    rc = -1;
  } else if ((old.sa_flags & SA_SIGINFO) &&
             old.sa_sigaction == ljp_signal_handler) {
    /* ours already */
  } else if (!(old.sa_flags & SA_SIGINFO) && (old.sa_handler == SIG_DFL ||
                                              old.sa_handler == SIG_IGN)) {
    prev_ignored[signo] = old.sa_handler == SIG_IGN;
    ljp_pin_library();
    if (ljp_sig_install(signo, ljp_signal_handler, 0) != 0) {
      snprintf(err, errlen, "ljprof: cannot install handler for signal %d: "
               "%s", signo, strerror(errno));
      rc = -1;
    }
  } else if (signo == SIGPROF) {
    snprintf(err, errlen, "ljprof: SIGPROF already has a handler (is "
             "jit.profile or -jp running?); use clock cpu, wall or thread");
    rc = -1;
  } else {
    snprintf(err, errlen, "ljprof: signal %d already has a handler; choose "
             "another signal (option signal)", signo);
    rc = -1;
  }
  ljp_slots_unlock();
  return rc;
}
