/*
** Exit signals: write the profile when the program is killed by SIGTERM,
** SIGHUP or SIGINT, as promptly as the program would have died without
** ljprof, then die of that signal, so the exit status does not change
** (ljprof.on_signal, used by jit/prof.lua).
**
** Only signals whose disposition is the default are trapped: a program's
** own handler, or an ignored signal, is left alone, with one exception.
** luajit installs its own SIGINT handler while -j options and the script
** run: it sets a hook that raises "interrupted!" at the interpreter's next
** instruction, which compiled code never reaches (a compiled loop ran to
** its end). When on_signal is asked for INT and SIGINT's handler lies in
** the luajit executable, the sampling handler (ljp_exit_int_watch, signal
** context: one sigaction, through sigowner.c) wraps it while it is
** installed: the wrapper calls luajit's handler, then gives the
** interpreter INT_GRACE_MS to raise "interrupted!" (the run then writes
** its outputs itself, "hold"); if it has not, SIGINT ends the program as
** TERM does (below), profile written, killed by SIGINT.
**
** The profile is written by a helper thread, started with the trap, in a
** Lua state of its own (exit_write.c: the spec, the state, the write,
** shared with Windows' console control events, exit_win.c), made when a signal comes (~2 ms of CPU that a run
** which is never killed does not pay; the package paths are taken, made
** absolute, when the trap is set, so a program that changed its working
** directory still finds the writer), so that a program blocked in
** read(), in a long C call or in a compiled loop that never reaches a
** safe point still dies at once with its profile:
**
**   1. The handler (signal context, on the profiled thread; another
**      thread forwards it there) records the signal, arms the safe-point
**      hook like a sample and wakes the helper. A later exit signal is
**      ignored while the profile is written.
**   2. Within GRACE_MS the safe point normally comes: it completes the
**      pending samples with the Lua stack, hands the context over
**      ("closed") and parks the thread for good.
**   3. Otherwise the helper sends the signal again: the handler closes at
**      once when the thread is outside every ljprof region (the gate,
**      exit_signals.h), else the region's end closes. The thread goes on
**      (blocked, or in its loop) and parks at its next entry into
**      ljprof. Samples still pending get the leaf that is known without
**      the Lua stack (complete.c, ljp_complete_offline), or are counted
**      dropped.
**   4. The helper renders and writes the outputs, then restores the
**      default action, unblocks the signal in itself and raises it.
**
** While the run writes its own outputs (jit.prof's stop, "hold"), a
** signal only is recorded; when the writing is done the trap is removed
** and the program dies of it.
**
** The parked thread holds no lock of ljprof's or of libc's (it parks only
** at ljprof's entry points); a thread that runs on after the close holds
** libc's locks only briefly. The helper blocks every signal. After fork,
** a child has no helper: there the signal gets its default action.
**
** Before an exec (exec.c, under LD_PRELOAD) the same writer writes the
** profile on the exec caller's thread, when that is the profiled one:
** ljp_exit_write_now.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <sys/auxv.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ljp.h"
#include "exit_signals.h"
#include "os.h"
#include "exit_write.h"
#include "sigowner.h"

#define GRACE_MS 20       /* for the safe point, before forcing */
#define INT_GRACE_MS 100  /* for luajit's "interrupted!", before TERM's way */
#define FORCE_TRIES 20    /* forced closes tried, FORCE_MS apart */
#define FORCE_MS 250

static const struct { const char *name; int signo; } exit_sigs[] = {
  {"TERM", SIGTERM}, {"HUP", SIGHUP}, {"INT", SIGINT},
};
#define NSIGS (sizeof(exit_sigs) / sizeof(exit_sigs[0]))

static struct {
  _Atomic(ljp_ctx *) ctx;      /* owner; NULL when nothing is trapped */
  struct sigaction old[NSIGS];
  int trapped[NSIGS];
  pid_t pid;                   /* the process the helper runs in */
  pthread_t helper;
  int helper_up;
  sem_t wake, closed;
  volatile sig_atomic_t quit;  /* the trap is removed: the helper ends */
  volatile sig_atomic_t hold;  /* the run writes its own outputs: a signal
                               ** waits for ljp_exit_signals_off */
  lua_State *HL;               /* the helper's state (made by the helper),
                               ** with a view of ctx while it is up */
  ljp_exit_spec spec;           /* what the helper loads (exit_write.h) */
  lua_State *empty;            /* a thread of HL with no frames */
  /* SIGINT under luajit (the wrapper of its handler, above) */
  volatile sig_atomic_t int_want;  /* INT asked for, luajit's to wrap */
  volatile sig_atomic_t int_came;  /* 1: luajit's handler ran, 2: seen */
  volatile sig_atomic_t int_force; /* its grace is over: TERM's way */
  uintptr_t exe_lo, exe_hi;    /* the luajit executable's mapped code */
  struct sigaction int_prev;   /* luajit's handler, while wrapped */
} trap;
/* Taken by on, off and hold (normal context, any thread); never by the
** handler or the helper. */
static pthread_mutex_t trap_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *sig_name(int sig)
{
  size_t i;
  for (i = 0; i < NSIGS; i++)
    if (exit_sigs[i].signo == sig) return exit_sigs[i].name;
  return "?";
}

static void say(const char *a, const char *b)
{
  ssize_t r;
  r = write(2, a, strlen(a));
  if (b) r = write(2, b, strlen(b));
  r = write(2, "\n", 1);
  (void)r;
}

/* -- The gate ---------------------------------------------------------------- */

int ljp_exit_is_helper(void)
{
  return trap.helper_up && pthread_equal(pthread_self(), trap.helper);
}

/* Hand the context to the helper (the profiled thread, normal or signal
** context). */
void ljp_exit_close(ljp_exitst *x)
{
  ljp_ctx *ctx = atomic_load(&trap.ctx);
  if (x->closed) return;
  x->closed = 1;
  if (ctx && &ctx->exit == x) sem_post(&trap.closed);
}

void ljp_exit_park(void)
{
  ljp_sig_block_all(NULL);
  for (;;) pause();
}

/* Lending to the export helper (auto.c; exit_signals.h: the grant). A
** region entered while lent waits until the helper gives it back
** (microseconds for a take, a copy of the store for a snapshot). */
void ljp_lend_wait(ljp_exitst *x)
{
  struct timespec ts = {0, 20000};
  uint64_t t0 = ljp_now_ns();
  while (atomic_load_explicit(&x->lend, memory_order_acquire) ==
         LJP_LEND_LENT)
    nanosleep(&ts, NULL);
  x->lend_waits++;
  x->lend_wait_ns += ljp_now_ns() - t0;
}

/* -- The handler (signal context) -------------------------------------------- */

static void die_of(int sig)
{
  ljp_sig_raise_default(sig);
  _exit(128 + sig);  /* not reached: the default action is fatal */
}

/* ENTRY, signal context: an exit signal (any thread). */
static void exit_signal_handler(int sig, siginfo_t *si, void *uc)
{
  int saved = errno;
  ljp_ctx *ctx = atomic_load(&trap.ctx);
  (void)si;
  (void)uc;
  if (!ctx || !trap.helper_up || getpid() != trap.pid) {
    die_of(sig);                  /* nothing to write, or a forked child */
  } else if (ljp_gettid() != ctx->tid) {
    if (!ctx->exit.signal) ljp_os_tgkill(ctx->pid, ctx->tid, sig);
  } else if (trap.hold) {         /* the run is writing: die after it */
    if (!ctx->exit.signal) ctx->exit.signal = sig;
  } else if (!ctx->exit.signal) { /* the first: the safe point may come */
    ctx->exit.signal = sig;
    if (!ctx->hook.busy) ljp_hook_arm(&ctx->hook);
    sem_post(&trap.wake);
  } else if (!ctx->exit.closed) { /* again (the helper forcing): close */
    if (ctx->exit.entered) ctx->exit.close_at_leave = 1;
    else ljp_exit_close(&ctx->exit);
  }
  errno = saved;
}

/* SIGINT while luajit's handler is wrapped. First: luajit's handler (it
** resets SIGINT to the default and sets its hook), then this wrapper is
** put back and the helper gives the interpreter its grace. A second
** SIGINT, or the helper's once the grace is over, ends the program as
** TERM does; so does one while the run writes its outputs (it dies
** after them). */
static void int_wrapper(int sig, siginfo_t *si, void *uc)  /* ENTRY */
{
  int saved = errno;
  ljp_ctx *ctx = atomic_load(&trap.ctx);
  if (ctx && trap.helper_up && getpid() == trap.pid && !trap.int_force &&
      !trap.hold && !trap.int_came && !ctx->exit.signal) {
    struct sigaction self, prev = trap.int_prev;
    ljp_sig_get(sig, &self);
    if (prev.sa_flags & SA_SIGINFO) prev.sa_sigaction(sig, si, uc);
    else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN)
      prev.sa_handler(sig);
    ljp_sig_put(sig, &self);      /* (luajit's handler reset it) */
    trap.int_came = 1;
    sem_post(&trap.wake);
  } else if (ctx && trap.helper_up && getpid() == trap.pid) {
    exit_signal_handler(sig, si, uc);
  } else {
    die_of(sig);
  }
  errno = saved;
}

/* Signal context (the sampling handler, each tick while a run traps
** exit signals): wrap luajit's SIGINT handler whenever it is installed
** (luajit installs it anew around each chunk it runs). One sigaction
** when nothing is to do. */
void ljp_exit_int_watch(void)
{
  struct sigaction cur;
  uintptr_t h;
  if (!trap.int_want || trap.int_came || trap.hold) return;
  if (ljp_sig_get(SIGINT, &cur) != 0) return;
  if (cur.sa_flags & SA_SIGINFO) return;  /* ours, or not luajit's */
  h = (uintptr_t)cur.sa_handler;
  if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN ||
      h < trap.exe_lo || h >= trap.exe_hi)
    return;
  trap.int_prev = cur;
  ljp_sig_install(SIGINT, int_wrapper, 1);
}

/* The luajit executable's code, [*lo, *hi), when the program is luajit
** (its name starts so): 0, else -1. Normal context. From the program's
** own headers (the auxiliary vector): dl_iterate_phdr is objects.c's. */
static int exe_code(uintptr_t *lo, uintptr_t *hi)
{
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
  unsigned long i, n = getauxval(AT_PHNUM);
  uintptr_t bias = 0;
  int have = 0;
  if (!ph || !n) return -1;
  for (i = 0; i < n; i++)
    if (ph[i].p_type == PT_PHDR) {
      bias = (uintptr_t)ph - ph[i].p_vaddr;
      have = 1;
    }
  if (!have) return -1;
  *lo = *hi = 0;
  for (i = 0; i < n; i++) {
    uintptr_t a;
    if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X)) continue;
    a = bias + ph[i].p_vaddr;
    if (!*lo || a < *lo) *lo = a;
    if (a + ph[i].p_memsz > *hi) *hi = a + ph[i].p_memsz;
  }
  return *lo && *hi > *lo ? 0 : -1;
}

static int luajit_exe(uintptr_t *lo, uintptr_t *hi)
{
  char exe[4096];
  const char *base;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';
  base = strrchr(exe, '/');
  base = base ? base + 1 : exe;
  if (strncmp(base, "luajit", 6) != 0) return -1;
  return exe_code(lo, hi);
}

/* The helper, woken by luajit's handler: INT_GRACE_MS for the interpreter
** to raise "interrupted!" (the run then writes its outputs: hold) or for
** the trap to go. 1 when neither came: TERM's way. */
static int int_grace(ljp_ctx *ctx)
{
  int i;
  for (i = 0; i < INT_GRACE_MS / 5; i++) {
    struct timespec ts = {0, 5000000};
    if (trap.quit || trap.hold || ctx->exit.signal) return 0;
    nanosleep(&ts, NULL);
  }
  return !(trap.quit || trap.hold || ctx->exit.signal);
}

/* -- The helper thread ------------------------------------------------------- */

static int wait_closed(int ms)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_nsec += (long)ms * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  for (;;) {
    if (sem_clockwait(&trap.closed, CLOCK_MONOTONIC, &ts) == 0) return 1;
    if (errno != EINTR) return 0;
  }
}

static lua_State *helper_state(ljp_ctx *ctx);

/* ENTRY: the exit writer's thread (ljp_thread_start). */
static void *helper_main(void *arg)
{
  ljp_ctx *ctx;
  lua_State *HL;
  int sig, closed, i;
  (void)arg;
  for (;;) {
    while (sem_wait(&trap.wake) != 0) {}
    if (trap.quit) return NULL;
    ctx = atomic_load(&trap.ctx);
    if (ctx->exit.signal) break;
    if (trap.int_came == 1) {     /* luajit's SIGINT handler ran */
      trap.int_came = 2;
      /* the writer's state meanwhile (unused if the run writes itself) */
      if (!trap.HL) trap.HL = helper_state(ctx);
      if (int_grace(ctx)) {       /* no "interrupted!": TERM's way */
        trap.int_force = 1;
        ljp_os_tgkill(ctx->pid, ctx->tid, SIGINT);
      }
    }
  }
  sig = ctx->exit.signal;
  /* The writer's state, while the safe point may come. */
  if (!trap.HL) trap.HL = helper_state(ctx);
  HL = trap.HL;
  if (!HL) die_of(sig);           /* no writer: as without ljprof */
  closed = wait_closed(GRACE_MS);
  for (i = 0; !closed && i < FORCE_TRIES; i++) {
    if (ljp_os_tgkill(ctx->pid, ctx->tid, sig) != 0 && errno == ESRCH)
      closed = 1;                 /* the thread is gone: nothing runs */
    else
      closed = wait_closed(FORCE_MS);
  }
  if (!closed) {
    say("ljprof: the profile was not written: the profiled thread stayed "
        "inside ljprof after SIG", sig_name(sig));
    die_of(sig);
  }
  /* Lent to the export helper (auto.c) when the signal came: it gives
  ** the context back within a store copy's time. */
  while (atomic_load(&ctx->exit.lend) == LJP_LEND_LENT) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  {
    char err[512];
    if (ljp_exit_write(HL, trap.empty, ctx, sig_name(sig), err,
                       sizeof(err)) != 0)
      say("ljprof: writing the profile failed: ", err);
  }
  die_of(sig);
  return NULL;
}

/* The helper's state, made on the helper thread once a signal came (the
** profiled thread pays nothing for it, a run never killed neither: ~2 ms
** of CPU): the writer and its argument at indexes 1 and 2, the package
** paths the program had, a view of ctx. NULL and a line on stderr on
** failure (then a signal has its default action). */
static lua_State *helper_state(ljp_ctx *ctx)
{
  char err[512], line[600];
  lua_State *HL = ljp_exit_writer(&trap.spec, ctx, &trap.empty, err,
                                  sizeof(err));
  if (!HL) {
    snprintf(line, sizeof(line), "ljprof: no profile on SIGTERM/SIGHUP: %s",
             err);
    say(line, NULL);
  }
  return HL;
}

/* -- Trap and release ------------------------------------------------------------ */

static void block_exit_signals(sigset_t *old)
{
  sigset_t set;
  size_t i;
  sigemptyset(&set);
  for (i = 0; i < NSIGS; i++) sigaddset(&set, exit_sigs[i].signo);
  ljp_sig_mask(SIG_BLOCK, &set, old);
}

/* Restore the program's dispositions, end the helper, free its state.
** The caller has the exit signals blocked and no signal came. */
static void untrap(void)
{
  size_t i;
  for (i = 0; i < NSIGS; i++) {
    if (!trap.trapped[i]) continue;
    trap.trapped[i] = 0;
    ljp_sig_put_if(exit_sigs[i].signo, exit_signal_handler, &trap.old[i]);
  }
  if (trap.int_want) {
    trap.int_want = 0;
    ljp_sig_put_if(SIGINT, int_wrapper, &trap.int_prev);
  }
  if (trap.helper_up) {
    trap.quit = 1;
    sem_post(&trap.wake);
    pthread_join(trap.helper, NULL);
    trap.helper_up = 0;
    sem_destroy(&trap.wake);
    sem_destroy(&trap.closed);
  }
  ljp_exit_writer_close(trap.HL);
  trap.HL = NULL;
  trap.empty = NULL;
  ljp_exit_spec_free(&trap.spec);
  atomic_store(&trap.ctx, NULL);
}

/* Stop trapping. If a signal already came, the helper is writing: hand
** over and park (the program is about to die of it); while held, the run
** has written its outputs itself: die of it now. */
static void signals_off(ljp_ctx *ctx)
{
  sigset_t old;
  int sig;
  if (atomic_load(&trap.ctx) != ctx) return;
  block_exit_signals(&old);
  sig = ctx->exit.signal;
  if (sig && !trap.hold) {
    ljp_exit_close(&ctx->exit);
    ljp_exit_park();
  }
  untrap();
  if (sig) die_of(sig);
  ljp_sig_mask(SIG_SETMASK, &old, NULL);
}

void ljp_exit_signals_off(ljp_ctx *ctx)
{
  if (atomic_load(&trap.ctx) != ctx) return;  /* (never ours: no wait) */
  pthread_mutex_lock(&trap_mu);
  signals_off(ctx);
  pthread_mutex_unlock(&trap_mu);
}

/* The run writes its own outputs now (jit.prof's stop): a signal that
** comes meanwhile waits for ljp_exit_signals_off, then kills. One that
** came before: the helper is writing; hand over and park. */
void ljp_exit_signals_hold(ljp_ctx *ctx)
{
  sigset_t old;
  if (atomic_load(&trap.ctx) != ctx) return;
  pthread_mutex_lock(&trap_mu);
  if (atomic_load(&trap.ctx) != ctx) {
    pthread_mutex_unlock(&trap_mu);
    return;
  }
  block_exit_signals(&old);
  if (ctx->exit.signal) {
    ljp_exit_close(&ctx->exit);
    ljp_exit_park();
  }
  trap.hold = 1;
  ljp_sig_mask(SIG_SETMASK, &old, NULL);
  pthread_mutex_unlock(&trap_mu);
}

int ljp_exit_signals_on(ljp_ctx *ctx, lua_State *L, int names,
                        const char *module, const char *func,
                        const char *arg, size_t arglen)
{
  size_t i;
  int n = 0, k, want[NSIGS], got[NSIGS];
  const char *err = NULL;
  sigset_t old;
  if (ctx->state != LJP_RUNNING)
    return luaL_error(L, "ljprof: on_signal needs a running profile");
  for (i = 0; i < NSIGS; i++) {  /* read before the lock: no error inside */
    want[i] = got[i] = 0;
    for (k = 1; !want[i]; k++) {
      const char *s;
      lua_rawgeti(L, names, k);
      if (lua_isnil(L, -1)) { lua_pop(L, 1); break; }
      s = lua_tostring(L, -1);
      want[i] = s && !strcmp(s, exit_sigs[i].name);
      lua_pop(L, 1);
    }
  }
  /* One trap per process, claimed under trap_mu: states of several
  ** threads start at once (LD_PRELOAD in a threaded host), and two that
  ** both found it free made two helpers, one of them never woken (the
  ** process hung at the states' close). */
  pthread_mutex_lock(&trap_mu);
  if (atomic_load(&trap.ctx) && atomic_load(&trap.ctx) != ctx) {
    pthread_mutex_unlock(&trap_mu);
    return luaL_error(L, "ljprof: exit signals are trapped for another "
                      "Lua state");
  }
  signals_off(ctx);               /* a new writer replaces the old one */
  if (ljp_exit_spec_copy(&trap.spec, L, module, func, arg, arglen) != 0) {
    pthread_mutex_unlock(&trap_mu);
    return luaL_error(L, "ljprof: on_signal: out of memory");
  }
  memset(&ctx->exit, 0, sizeof(ctx->exit));
  trap.quit = trap.hold = 0;
  trap.int_came = trap.int_force = 0;
  trap.pid = getpid();
  atomic_store(&trap.ctx, ctx);
  sem_init(&trap.wake, 0, 0);
  sem_init(&trap.closed, 0, 0);
  /* the helper never takes a signal */
  trap.helper_up = ljp_thread_start(&trap.helper, helper_main, NULL) == 0;
  if (!trap.helper_up) {
    block_exit_signals(&old);
    untrap();
    ljp_sig_mask(SIG_SETMASK, &old, NULL);
    err = "ljprof: on_signal: cannot start a thread";
  }
  for (i = 0; !err && i < NSIGS; i++) {
    struct sigaction prev;
    if (!want[i]) continue;
    if (exit_sigs[i].signo == SIGINT &&
        luajit_exe(&trap.exe_lo, &trap.exe_hi) == 0) {
      /* luajit's handler comes and goes: wrapped while installed
      ** (ljp_exit_int_watch); with the default action now, trapped too */
      trap.int_want = 1;
      got[i] = 1;
    }
    if (ljp_sig_get(exit_sigs[i].signo, &prev) != 0 ||
        (prev.sa_flags & SA_SIGINFO) || prev.sa_handler != SIG_DFL)
      continue;  /* the program's, or ignored: not ours to take */
    if (ljp_sig_install(exit_sigs[i].signo, exit_signal_handler, 1) == 0) {
      trap.old[i] = prev;
      trap.trapped[i] = 1;
      got[i] = 1;
    }
  }
  pthread_mutex_unlock(&trap_mu);
  if (err) return luaL_error(L, "%s", err);
  lua_newtable(L);
  for (i = 0; i < NSIGS; i++) {
    if (!got[i]) continue;
    lua_pushstring(L, exit_sigs[i].name);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

/* Before exec (exec.c), on the thread calling it: the trapped run's
** outputs written now, by the same writer an exit signal uses, in a state
** of its own on this thread (the program's state is suspended in the
** call that execs). Pending samples get their offline leaf. 1: written;
** 0: nothing here can write it (no trap, another thread, another
** process, the run writing already, a signal came first); -1: the writer
** failed (one line said why). Exit signals wait meanwhile. Normal
** context, outside every ljprof region. */
int ljp_exit_write_now(void)
{
  ljp_ctx *ctx;
  lua_State *HL, *empty;
  char err[512];
  sigset_t old;
  int rc = 0;
  pthread_mutex_lock(&trap_mu);
  ctx = atomic_load(&trap.ctx);
  if (!ctx || !trap.helper_up || trap.pid != getpid() || trap.hold ||
      ctx->exit.signal || ctx->exit.closed || ctx->state != LJP_RUNNING ||
      ljp_gettid() != ctx->tid || ctx->exit.entered) {
    pthread_mutex_unlock(&trap_mu);
    return 0;
  }
  block_exit_signals(&old);
  HL = ljp_exit_writer(&trap.spec, ctx, &empty, err, sizeof(err));
  if (!HL) {
    say("ljprof: the profile was not written before exec: ", err);
    rc = -1;
  } else {
    /* A region: the export helper (auto.c) is not lent the context
    ** while the store changes (and one lent now gives it back first). */
    ljp_gate_enter(&ctx->exit);
    if (ljp_exit_write(HL, empty, ctx, "EXEC", err, sizeof(err)) != 0) {
      say("ljprof: writing the profile before exec failed: ", err);
      rc = -1;
    } else {
      rc = 1;
    }
    ljp_gate_leave(&ctx->exit);
    ljp_exit_writer_close(HL);
  }
  ljp_sig_mask(SIG_SETMASK, &old, NULL);
  pthread_mutex_unlock(&trap_mu);
  return rc;
}

/* At a safe point after an exit signal (normal context, outside every
** region): the pending samples are complete; hand over and park. */
void ljp_exit_handover(ljp_ctx *ctx)
{
  ljp_exit_close(&ctx->exit);
  ljp_exit_park();
}

/* At lua_close or when the context goes: never leave a handler that
** points at a freed context. */
void ljp_exit_signals_release(ljp_ctx *ctx)
{
  ljp_exit_signals_off(ctx);
}
