/*
** Signal handler and the process-wide slot table that maps a signal to its
** profiling context.
**
** ljp_signal_handler runs in signal context: only async-signal-safe calls,
** no malloc, no locks, no stdio, bounded work, errno preserved. It records
** time, PC, VM state, zone, label set and weight into the context's ring
** and arms the safe point. Every tick it cannot record is counted. A
** tick with no Lua call active on the running thread (vmprobe.h:
** ljp_vm_no_call) is the host's own: its native frames only, no Lua
** capture, flagged LJP_LUA_HOST so that the safe point adds none.
** It writes to the ring only after taking ctx->ring_owner: the thread
** clock's timer thread writes a blocked thread's records there too
** (ljp_blocked_capture/push, normal context on that thread, below).
**
** A signal carries a token (slot | run generation << 8) in si_value;
** itimer signals carry none and use the one itimer binding. A context's
** slot stays valid while the handler runs: closing a run bumps the token
** and then waits until no handler is inside the slot.
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
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "ljp.h"
#include "luastack.h"
#include "sigowner.h"
#include "tracemem.h"
#include "vmprobe.h"

_Atomic uint64_t ljp_stale_signals;

/* What each signal did before ljprof took it: SIG_DFL or SIG_IGN (a
** signal with a handler is refused). A foreign signal, one the program or
** another process sends, gets that. */
static volatile sig_atomic_t prev_ignored[_NSIG];
static void ljp_signal_handler(int sig, siginfo_t *si, void *ucv);
#define ljp_signal_handler_ptr ljp_signal_handler

/* -- Signal context ------------------------------------------------------ */

static inline uintptr_t ucontext_pc(void *ucv)
{
  ucontext_t *uc = ucv;
#if defined(__x86_64__)
  return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uintptr_t)uc->uc_mcontext.pc;
#else
  (void)uc;
  return 0;
#endif
}

/* Is the trace compiler idle? A learnt state field that never reads idle
** (1000 signals in a row, far longer than any trace takes to compile)
** was learnt wrong: it is dropped, so samples are not held forever. */
static inline int jit_idle(ljp_ctx *ctx)
{
  if (ljp_vm_jit_idle(ctx->vm_g)) {
    ctx->jit_busy_run = 0;
    return 1;
  }
  if (++ctx->jit_busy_run >= 1000) ljp_vml.jstate_ok = 0;
  return 0;
}

/* Room the handler has on an alternate signal stack (see the top):
** below LJP_ALT_FULL no native walk nor Lua capture, below LJP_ALT_LITE
** no sample. */
#define LJP_ALT_FULL 4096
#define LJP_ALT_LITE 1024

/* Bytes of stack left below here when the handler runs on the thread's
** alternate signal stack (the kernel saves its range in uc_stack), else
** SIZE_MAX. No system call. */
static inline size_t ljp_alt_room(void *ucv, const void *here)
{
  const ucontext_t *uc = ucv;
  uintptr_t lo = (uintptr_t)uc->uc_stack.ss_sp, sp = (uintptr_t)here;
  if (uc->uc_stack.ss_size && sp - lo < uc->uc_stack.ss_size) return sp - lo;
  return SIZE_MAX;
}

/* Is a tick in state vm at pc the host's own code, with no Lua call
** active on the running thread (L->cframe NULL: the host's Lua call
** returned, its coroutine yielded or ended)? Not in a trace or the
** compiler. In the interpreter's own code (its unwind entry) cur_L may
** lag a coroutine switch by a few instructions (a resume from Lua that
** just came back): never there. The GC with no call active is a step
** the host's lua_* call took. peek: fault-safe reads (another thread).
** Signal context. */
static inline int host_tick(uintptr_t g, int vm, uintptr_t pc, int peek)
{
  if (vm != 'C' && vm != 'I' && vm != 'G') return 0;
  if (ljp_vm_no_call(g, peek) != 1) return 0;
  return vm == 'G' || !ljp_codemap_in_interp(pc);
}

/* Record one sample of weight w; lite: without the native walk and the
** Lua capture (little stack left). Signal context. A full ring with
** records pending gets the tick filled in on the stack, as a record would
** be, and merged into a pending record that would have had the same stack
** (ring.h); like none, it is dropped. */
static void ljp_sample(ljp_ctx *ctx, void *ucv, uint32_t w, int lite)
{
  ljp_record *rec, scratch;
  ljp_push_result res;
  uintptr_t pc = ucontext_pc(ucv), tobj = 0, cfunc;
  uint64_t t0 = ljp_now_ns();  /* CLOCK_MONOTONIC, vDSO: signal-safe */
  int32_t trace;
  int vm, host = 0;
  atomic_fetch_add_explicit(&ctx->n_signals, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_ticks, w, memory_order_relaxed);
  /* With native stacks the running C function is usually the outermost
  ** native frame (found at the safe point): no peeks for it here. */
  vm = ljp_vm_read(ctx->vm_g, &trace, &cfunc, !ctx->native_on);
  if (!vm) {
    vm = ljp_codemap_classify(&ctx->map, pc, &trace);
  } else if (vm == 'N') {
    /* g->vmstate names the trace entered last; a trace linked to may run
    ** on without changing it. The PC names the trace whose machine code
    ** is running, when it is known: the trace itself, read from memory
    ** (it cannot be freed while it runs), else the code map, whose range
    ** must still belong to its trace (it may be from before a flush). */
    int32_t tr = 0;
    if (ctx->tr.mem) {
      uintptr_t T2;
      tobj = ljp_tm_trace(ctx->vm_g, trace);
      if (!(tobj && ljp_tm_holds(tobj, pc)) &&
          ljp_codemap_classify(&ctx->map, pc, &tr) == 'N' && tr > 0 &&
          (T2 = ljp_tm_trace(ctx->vm_g, tr)) && ljp_tm_holds(T2, pc)) {
        trace = tr;
        tobj = T2;
      }
    } else if (ljp_codemap_classify(&ctx->map, pc, &tr) == 'N' && tr > 0) {
      trace = tr;
    }
  }
  if (host_tick(ctx->vm_g, vm, pc, 0)) {
    host = 1;                    /* no Lua frame, no Lua C function */
    cfunc = 0;
  }
  if (!(rec = ljp_ring_slot(&ctx->ring))) {
    if (!ljp_ring_pending(&ctx->ring)) {  /* nothing to merge into */
      atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
      goto arm;
    }
    rec = &scratch;
  }
  if (rec != &scratch)
    rec->seq = atomic_fetch_add_explicit(&ctx->seq, 1, memory_order_relaxed);
  rec->time_ns = t0;
  rec->pc = pc;
  rec->trace = trace;
  rec->tobj = tobj;
  rec->cfunc = cfunc;
  rec->vmstate = (uint8_t)(host && vm == 'I' ? 'C' : vm);
  rec->zone = ctx->zones.cur;      /* the zone active at the tick */
  rec->labels = ctx->labels.cur;   /* and the label set (labels.c) */
  rec->nflags = 0;
  rec->nnative = 0;
  rec->nfuncs = 0;
  rec->nleaf[0] = rec->nleaf[1] = 0;
  rec->tret = 0;
  if (ctx->native_on && !lite)
    rec->nnative = (uint8_t)ljp_native_capture(ctx, ucv, pc, rec->vmstate,
                                                rec->native, &rec->nflags,
                                                &rec->tret, &rec->nfuncs,
                                                rec->nleaf);
  /* A host tick whose native walk still reached Lua code (a C function
  ** that ran a call on another thread: cur_L is that idle thread) is not
  ** one. */
  if (host && (rec->tret || (rec->nflags & LJP_NATIVE_FROM_INTERP))) {
    host = 0;
    rec->vmstate = (uint8_t)vm;
  }
  rec->nlua = 0;
  rec->nspine = 0;
  rec->lflags = host ? LJP_LUA_HOST : 0;
  if (host)
    atomic_fetch_add_explicit(&ctx->n_host, w, memory_order_relaxed);
  if (ctx->exact_on && !lite && !host) {
    /* The Lua frames running now. A C function's stack is stable
    ** unless it is inside LuaJIT's own code (a lua_* call may resize
    ** it): when the native walk does not show that it is outside, the
    ** capture checks the stack's block first. */
    int c_mode = vm != 'C' && vm != 'G' ? 0
                 : vm == 'C' && ctx->native_on &&
                   (rec->nflags & LJP_NATIVE_FROM_INTERP) &&
                   !(rec->nflags & LJP_NATIVE_VM) ? 1 : 2;
    /* The interpreter while a trace is recorded: no arming (below), so
    ** the frames now. */
    if (vm == 'I' && !ljp_vm_jit_idle(ctx->vm_g))
      c_mode = LJP_CAPTURE_RECORDING;
    if (ljp_luastack_capture(ctx->vm_g, c_mode, rec) > 0) {
      if (rec != &scratch)
        atomic_fetch_add_explicit(&ctx->n_lua_captures, 1,
                                  memory_order_relaxed);
      /* In state C the frame at L->base is the C function's (the
      ** capture checks it): what ljp_vm_cfunc would read, read. */
      if (vm == 'C' && !rec->cfunc && rec->lua[0].kind >= 1)
        rec->cfunc = rec->lua[0].cf;
    }
  }
  /* The running C function, when neither the native walk (it reached
  ** the interpreter: the function is its outermost frame) nor the Lua
  ** capture has it: two fault-safe reads, system calls. */
  if (ctx->native_on && !lite && vm == 'C' && !rec->cfunc && !host &&
      !(rec->nflags & LJP_NATIVE_FROM_INTERP))
    rec->cfunc = ljp_vm_cfunc(ctx->vm_g);
  rec->stack = 0;
  if (rec != &scratch) {
    atomic_store_explicit(&rec->weight, w, memory_order_relaxed);
    ljp_ring_publish(&ctx->ring);
  } else if ((res = ljp_ring_merge(&ctx->ring, w, rec)) != LJP_DROPPED) {
    atomic_fetch_add_explicit(&ctx->n_merged, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
  }
arm:
  /* Never arm while the trace compiler may be busy: changing the hook
  ** aborts a trace being started or recorded. The recorder's events set
  ** ctx->hook.recording; 'J' and the compiler's own state (once learnt) also
  ** cover the start of a trace, before its "start" event. */
  if (!ctx->hook.busy && !ctx->hook.recording && ctx->state == LJP_RUNNING &&
      vm != 'J' && jit_idle(ctx) && ljp_hook_arm_safe(&ctx->hook, pc))
    ljp_hook_arm(&ctx->hook);
  atomic_fetch_add_explicit(&ctx->handler_ns, ljp_now_ns() - t0,
                            memory_order_relaxed);
}

/* -- Blocked threads (normal context, the wall clock's timer thread) ------ */

/* The profiled thread is blocked in a system call (timer_thread.c): what
** the handler would record, without a signal, which would end the call
** (EINTR). Only memory reads, as in the handler, of a thread that does not
** run: the caller reads its CPU time and system call before and after and
** keeps the record only if neither changed. pc: the thread's user PC (at
** its system call). Returns the Lua frames captured (0: none, no record),
** or 1 for a host tick (no Lua call active: no Lua frames, its one native
** frame the PC, when native frames are on). */
int ljp_blocked_capture(ljp_ctx *ctx, uintptr_t pc, ljp_record *rec)
{
  int32_t trace = 0;
  uintptr_t cfunc = 0;
  int vm;
  memset(rec, 0, offsetof(ljp_record, native));
  rec->nnative = 0;
  rec->tret = 0;
  rec->nfuncs = 0;
  rec->nleaf[0] = rec->nleaf[1] = 0;
  rec->nlua = 0;
  rec->nspine = 0;
  rec->lflags = 0;
  if (!ctx->exact_on || !ctx->vm_g) return 0;
  vm = ljp_vm_read(ctx->vm_g, &trace, &cfunc, 0);
  if (host_tick(ctx->vm_g, vm, pc, 1)) {
    rec->pc = pc;
    rec->vmstate = (uint8_t)(vm == 'G' ? 'G' : 'C');
    rec->zone = ctx->zones.cur;
    rec->labels = ctx->labels.cur;
    rec->lflags = LJP_LUA_HOST;
    if (ctx->native_on && pc) {
      rec->native[0] = pc;
      rec->nnative = 1;
      rec->nflags = LJP_NATIVE_TRUNCATED;
    }
    return 1;
  }
  if (vm == 'C') cfunc = ljp_vm_cfunc(ctx->vm_g);
  if (vm != 'C' && vm != 'N') return 0;  /* an FFI or C call, from the
                                         ** interpreter or a trace */
  rec->pc = pc;
  rec->trace = trace;
  rec->cfunc = cfunc;
  rec->vmstate = (uint8_t)vm;
  rec->zone = ctx->zones.cur;
  rec->labels = ctx->labels.cur;
  if (ljp_luastack_capture_blocked(ctx->vm_g, rec) <= 0) return 0;
  if (vm == 'C' && !rec->cfunc && rec->lua[0].kind >= 1)
    rec->cfunc = rec->lua[0].cf;
  return rec->nlua;
}

/* A record of weight w from ljp_blocked_capture into the ring, if no
** handler is writing to it (ring_owner: the handler or this thread, never
** both). Returns 0 when the ring was busy (the caller counts the tick
** otherwise). */
int ljp_blocked_push(ljp_ctx *ctx, const ljp_record *proto, uint32_t w)
{
  ljp_push_result res;
  ljp_record *rec;
  int free_ = 0;
  if (!atomic_compare_exchange_strong_explicit(&ctx->ring_owner, &free_, 2,
          memory_order_acquire, memory_order_relaxed))
    return 0;
  atomic_fetch_add_explicit(&ctx->n_ticks, w, memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_idle, w, memory_order_relaxed);
  if (proto->lflags & LJP_LUA_HOST)
    atomic_fetch_add_explicit(&ctx->n_host, w, memory_order_relaxed);
  rec = ljp_ring_reserve(&ctx->ring, w, proto, &res);
  if (rec) {
    size_t lua_at = offsetof(ljp_record, nlua);
    memcpy(rec, proto, offsetof(ljp_record, native));
    memcpy(rec->native, proto->native,
           (size_t)proto->nnative * sizeof(proto->native[0]));
    memcpy((char *)rec + lua_at, (const char *)proto + lua_at,
           sizeof(ljp_record) - lua_at);
    rec->seq = atomic_fetch_add_explicit(&ctx->seq, 1, memory_order_relaxed);
    rec->time_ns = ljp_now_ns();
    rec->tret = 0;
    rec->nfuncs = 0;
    rec->nleaf[0] = rec->nleaf[1] = 0;
    rec->stack = 0;
    atomic_store_explicit(&rec->weight, w, memory_order_relaxed);
    ljp_ring_publish(&ctx->ring);
  } else if (res != LJP_DROPPED) {
    atomic_fetch_add_explicit(&ctx->n_merged, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&ctx->n_dropped, w, memory_order_relaxed);
  }
  atomic_store_explicit(&ctx->ring_owner, 0, memory_order_release);
  return 1;
}

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
  size_t room = ljp_alt_room(ucv, &token);

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
      syscall(SYS_tgkill, ctx->pid, ctx->tid, SIGPROF);
    } else if (ctx->tmr.expired || (ctx->tmr.deadline_ns &&
                                ljp_now_ns() >= ctx->tmr.deadline_ns)) {
      if (!ctx->tmr.expired && ctx->tmr.ops->halt) ctx->tmr.ops->halt(ctx);
      ctx->tmr.expired = 1;                /* duration over: no more ticks */
    } else {
      if (ctx->tmr.ops->rearm && ctx->tmr.ticking)
        w = ctx->tmr.ops->rearm(ctx);      /* the expiries it stands for */
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
          ljp_sample(ctx, ucv, w, room < LJP_ALT_FULL);
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
