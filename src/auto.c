/*
** Auto-started runs (auto.h): the control signal, periodic export,
** snapshots, output names and rotation, for runs started from the
** environment (LJPROF: jit/prof/auto.lua, preload.c).
**
** Who does what:
**
**   control_handler   ENTRY, signal context: counts an operator's signal
**                     and wakes the helper (an atomic add and sem_post,
**                     async-signal-safe; no lock, no allocation)
**   the helper        a thread of ljprof's (every signal blocked), per
**                     process: wakes on the control signal and at each
**                     periodic deadline; pauses or resumes sampling (a
**                     flag the sampling handler reads), or exports
**   exporting         per profiled state: borrow the context through the
**                     gate (exit_signals.h: ask, a sampling signal with a
**                     lend request, granted by the handler on the profiled
**                     thread outside every ljprof region, or at the
**                     region's end), take (periodic: the store moves out
**                     and the run goes on with an empty one) or copy
**                     (snapshot of a run without periodic export) the
**                     store, give the context back; then render and write
**                     in the helper's own Lua state, whose ljprof functions
**                     read the snapshot (a view, ownstate.h), through
**                     jit.prof.write_after_signal, as the exit helper does
**
** The profiled thread pays one signal per export, the wait of an ljprof
** region entered while the context is lent (a take moves a few pointers;
** a copy copies the store), and the naming caches warming up again after
** a take. A state whose thread never answers (the signal blocked there)
** is skipped after LEND_MS, once said on stderr.
**
** Normal context, but for control_handler. Files written are rotated by
** count (keep) or total size (maxbytes): only files this process wrote
** for the state, never others.
*/
#define _GNU_SOURCE
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ljp.h"
#include "os.h"
#include "auto.h"
#include "exit_signals.h"
#include "outfile.h"
#include "ownstate.h"
#include "sigowner.h"
#include "symbols.h"

#define LEND_MS 2000       /* a state that does not lend is skipped */
#define CHECK_NS 2000000000ull /* the control signal still ours? */
/* A take counts the samples pending this long, or one interval if shorter
** (complete.c, ljp_complete_pending); younger ones wait for the thread's
** safe point or the next export. */
#define PENDING_NS 1000000000ull

typedef struct autofile {
  char *path;
  uint64_t seq, bytes;
} autofile;

struct ljp_autox {
  pthread_mutex_t mu;       /* ctx and everything below */
  _Atomic int refs;         /* the context and snapshots being written */
  _Atomic int closing;      /* the run is stopping: stop asking */
  ljp_ctx *ctx;             /* the live context, NULL once stopped */
  int index;                /* %s */
  uint64_t every_ns;        /* periodic export (0: none) */
  uint64_t next_ns;         /* the next, CLOCK_MONOTONIC */
  uint32_t keep;            /* rotation: exports kept (0: any) */
  uint64_t maxbytes;        /* ... and their size (0: any) */
  char *spec;               /* jit.prof.write_after_signal's argument */
  size_t speclen;
  sem_t lent;               /* posted by the profiled thread */
  int registered, silent;   /* with the helper; "did not answer" said */
  autofile *files;
  uint32_t nfiles, capfiles;
  _Atomic uint64_t exports, export_ns; /* the helper adds, stop reads */
  ljp_autox *next;          /* the helper's list */
};

static struct {
  pthread_mutex_t mu;       /* the list, the counter, the set-up */
  ljp_autox *list;
  int nstates;              /* states auto-started in this process */
  pid_t pid;                /* the process the helper runs in */
  int helper_up;
  pthread_t helper;
  sem_t wake;
  _Atomic int requests;     /* control signals not acted on yet */
  int signo, control;       /* the control signal (0: none) and its use */
  int paused;               /* toggled */
  char *path, *cpath;       /* package paths for the helper's state */
  _Atomic(ljp_ctx *) rendering; /* the snapshot being rendered */
  char last[1024];          /* files written by the current action */
  uint64_t checked_ns;
} au = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t real_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void say(const char *line)
{
  ssize_t r = write(2, line, strlen(line));
  (void)r;
}

void ljp_auto_notice(const char *line)
{
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char *seen[16];
  static int nseen;
  int i, dup = 0;
  pthread_mutex_lock(&mu);
  for (i = 0; i < nseen && !dup; i++) dup = !strcmp(seen[i], line);
  if (!dup && nseen < 16) seen[nseen++] = strdup(line);
  pthread_mutex_unlock(&mu);
  if (dup) return;
  say(line);
  if (!*line || line[strlen(line) - 1] != '\n') say("\n");
}

static const char *signame(int signo, char *buf, size_t n)
{
  if (signo == SIGUSR1) return "SIGUSR1";
  if (signo == SIGUSR2) return "SIGUSR2";
  if (signo >= SIGRTMIN && signo <= SIGRTMAX) {
    snprintf(buf, n, "SIGRTMIN+%d", signo - SIGRTMIN);
    return buf;
  }
  snprintf(buf, n, "signal %d", signo);
  return buf;
}

/* -- The state's configuration ---------------------------------------------- */

static void autox_unref(ljp_autox *x)
{
  uint32_t i;
  if (!x || atomic_fetch_sub(&x->refs, 1) != 1) return;
  for (i = 0; i < x->nfiles; i++) free(x->files[i].path);
  free(x->files);
  free(x->spec);
  sem_destroy(&x->lent);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

int ljp_auto_attach(ljp_ctx *ctx, double every_s, uint32_t keep,
                    uint64_t maxbytes)
{
  ljp_autox *x = ctx->autos.x;
  if (!x) {
    if (!(x = calloc(1, sizeof(*x)))) return -1;
    pthread_mutex_init(&x->mu, NULL);
    sem_init(&x->lent, 0, 0);
    atomic_store(&x->refs, 1);
    pthread_mutex_lock(&au.mu);
    x->index = ++au.nstates;
    pthread_mutex_unlock(&au.mu);
    ctx->autos.x = x;
  }
  pthread_mutex_lock(&x->mu);
  x->every_ns = every_s > 0 ? (uint64_t)(every_s * 1e9) : 0;
  x->keep = keep;
  x->maxbytes = maxbytes;
  x->ctx = ctx;
  atomic_store(&x->closing, 0);
  pthread_mutex_unlock(&x->mu);
  ctx->autos.seq = 1;
  ctx->autos.t0 = real_ns();
  ctx->autos.paused = 0;
  ljp_lend_sem(&ctx->exit, &x->lent);
  return x->index;
}

/* -- Output names and rotation ---------------------------------------------- */

size_t ljp_auto_name(const ljp_ctx *ctx, const char *tmpl, char *out,
                     size_t n)
{
  const ljp_autox *x = ctx ? ctx->autos.x : NULL;
  size_t k = 0;
  const char *p;
  if (!x || !n) return 0;
  for (p = tmpl; *p && k + 1 < n; p++) {
    char buf[64];
    const char *put = buf;
    buf[0] = '\0';
    if (*p != '%' || !p[1]) {
      buf[0] = *p;
      buf[1] = '\0';
    } else {
      switch (*++p) {
      case 'p': snprintf(buf, sizeof(buf), "%d", (int)getpid()); break;
      case 's': snprintf(buf, sizeof(buf), "%d", x->index); break;
      case 'n':
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ctx->autos.seq);
        break;
      case 't': {
        time_t sec = (time_t)(ctx->autos.t0 / 1000000000u);
        struct tm tm;
        size_t m;
        gmtime_r(&sec, &tm);
        m = strftime(buf, sizeof(buf), "%Y%m%dT%H%M%S", &tm);
        snprintf(buf + m, sizeof(buf) - m, ".%03dZ",
                 (int)(ctx->autos.t0 / 1000000u % 1000u));
        break;
      }
      case '%': buf[0] = '%'; buf[1] = '\0'; break;
      default:  /* not a placeholder (jit/prof/auto.lua refuses it) */
        buf[0] = '%';
        buf[1] = *p;
        buf[2] = '\0';
      }
    }
    while (*put && k + 1 < n) out[k++] = *put++;
  }
  out[k] = '\0';
  return k;
}

/* Files of the oldest interval go while there are more intervals than
** keep, or more bytes than maxbytes (the newest interval always stays). */
static void rotate(ljp_autox *x, uint64_t newest)
{
  for (;;) {
    uint64_t oldest = UINT64_MAX, bytes = 0;
    uint32_t i, j, nseq = 0;
    for (i = 0; i < x->nfiles; i++) {
      int seen = 0;
      bytes += x->files[i].bytes;
      for (j = 0; j < i && !seen; j++) seen = x->files[j].seq == x->files[i].seq;
      if (!seen) nseq++;
      if (x->files[i].seq < oldest) oldest = x->files[i].seq;
    }
    if (oldest == newest || nseq < 2 ||
        !((x->keep && nseq > x->keep) || (x->maxbytes && bytes > x->maxbytes)))
      return;
    for (i = j = 0; i < x->nfiles; i++) {
      if (x->files[i].seq == oldest) {
        ljp_outfile_remove(x->files[i].path);
        free(x->files[i].path);
      } else {
        x->files[j++] = x->files[i];
      }
    }
    x->nfiles = j;
  }
}

void ljp_auto_written(ljp_ctx *ctx, const char *path)
{
  ljp_autox *x = ctx ? ctx->autos.x : NULL;
  struct stat st;
  uint32_t i;
  if (!x) return;
  if (ctx == atomic_load(&au.rendering)) {  /* the helper's line */
    size_t k = strlen(au.last);
    snprintf(au.last + k, sizeof(au.last) - k, "%s%s", k ? ", " : "", path);
  }
  if (!x->keep && !x->maxbytes) return;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
  pthread_mutex_lock(&x->mu);
  for (i = 0; i < x->nfiles && strcmp(x->files[i].path, path); i++) {}
  if (i == x->nfiles) {
    if (x->nfiles == x->capfiles) {
      uint32_t cap = x->capfiles ? 2 * x->capfiles : 16;
      autofile *f = realloc(x->files, cap * sizeof(*f));
      if (!f) goto out;
      x->files = f;
      x->capfiles = cap;
    }
    if (!(x->files[i].path = strdup(path))) goto out;
    x->nfiles++;
  }
  x->files[i].seq = ctx->autos.seq;
  x->files[i].bytes = (uint64_t)st.st_size;
  rotate(x, ctx->autos.seq);
out:
  pthread_mutex_unlock(&x->mu);
}

void ljp_auto_counts(const ljp_ctx *ctx, uint64_t *exports,
                     uint64_t *export_ns)
{
  const ljp_autox *x = ctx ? ctx->autos.x : NULL;
  *exports = x ? x->exports : 0;
  *export_ns = x ? x->export_ns : 0;
}

/* -- Snapshots (the helper, while the context is lent) ------------------------ */

static void snapshot_free(ljp_ctx *s)
{
  if (!s) return;
  ljp_store_free(&s->store);
  ljp_zones_free(&s->zones);
  ljp_labels_free(&s->labels);
  ljp_traces_aborts_free(&s->tr);
  free(s->stack_fmt);
  autox_unref(s->autos.x);
  free(s);
}

/* What the run counted so far, as a context of its own that the helper's
** state reads: taken (the run goes on with an empty store and the next
** interval) or copied. NULL when a take finds nothing, or out of memory.
** The context is lent: its thread is outside every ljprof region. */
static ljp_ctx *snapshot(ljp_ctx *ctx, int take, uint64_t age_ns,
                         ljp_offrec *pend, uint32_t maxpend)
{
  ljp_ctx *s;
  uint32_t i, npend;
  uint64_t total, dropped, left;
  /* Completed records name the store's ids: counted into it first. */
  ljp_store_drain(&ctx->store, &ctx->ring, &ctx->n_dropped);
  /* Pending records: samples waiting for a safe point that has not come
  ** (a compiled loop, a long C call). A copy counts them all, read only
  ** (the run counts them again, with the Lua stack, at its safe point); a
  ** take those that waited age_ns or more, their weight taken (a thread
  ** reaching safe points completes its own with the whole stack). Their
  ** ids are interned in the store before it is taken or copied. */
  npend = ljp_complete_pending(ctx, take ? ljp_now_ns() - age_ns : UINT64_MAX,
                               take, pend, maxpend, &left);
  if (take)
    for (i = 0; i < npend; i++)
      if (ljp_store_add(&ctx->store, &pend[i]) != 0)
        atomic_fetch_add(&ctx->n_dropped, pend[i].w);
  if (take && !ctx->store.stacks.n) return NULL;
  if (!(s = calloc(1, sizeof(*s)))) return NULL;
  /* The state's number for the views (%s, pprof's state label); a
  ** snapshot is never in the slot table (snapshot_free, not ctx_free). */
  s->slot = ctx->slot;
  if (ljp_labels_copy_sets(&s->labels, &ctx->labels) != 0) {
    free(s);                 /* same set ids */
    return NULL;
  }
  if (take ? ljp_store_take(&ctx->store, &s->store)
           : ljp_store_copy(&s->store, &ctx->store)) {
    ljp_labels_free(&s->labels);
    free(s);
    return NULL;
  }
  if (!take)
    for (i = 0; i < npend; i++) ljp_store_add(&s->store, &pend[i]);
  if (take) {  /* every cache holding the old store's ids */
    ljp_frames_reset(ctx);
    ljp_native_names_reset(ctx);
    ljp_cname_memo_reset(&ctx->cnames);
    ljp_traces_forget_keys(ctx);
  }
  ljp_traces_aborts_into(ctx, &s->tr, take);
  for (i = 1; i < ctx->zones.n; i++)  /* same ids, in order */
    ljp_zone_id(&s->zones, ctx->zones.names[i], strlen(ctx->zones.names[i]));
  s->stack_fmt = strdup(ctx->stack_fmt ? ctx->stack_fmt : "fZ;");
  s->opt = ctx->opt;
  s->opt.stack_fmt = s->stack_fmt;
  s->opt.output = NULL;
  s->opt.cb = NULL;
  ljp_timer_bind(&s->tmr, ctx->tmr.ops);
  s->vm_g = ctx->vm_g;
  s->exact_on = ctx->exact_on;
  s->native_on = ctx->native_on;
  s->pid = ctx->pid;
  s->tid = ctx->tid;
  memcpy(s->thread_name, ctx->thread_name, sizeof(s->thread_name));
  /* The interval's time: a take holds from the last take (autos.t0) to
  ** now, a copy the whole run so far. */
  s->start_unix_ns = take && ctx->autos.seq > 1 ? ctx->autos.t0 : ctx->start_unix_ns;
  s->start_ns = ljp_now_ns() - (real_ns() - s->start_unix_ns);
  s->stop_ns = ljp_now_ns();
  total = ljp_store_total(&s->store);
  dropped = atomic_load(&ctx->n_dropped);
  atomic_store(&s->n_ticks, total);
  atomic_store(&s->n_signals, total);
  atomic_store(&s->n_dropped, dropped - ctx->autos.dropped0);
  s->completed = total;
  s->autos = ctx->autos;
  s->autos.paused = 0;
  atomic_fetch_add(&s->autos.x->refs, 1);
  if (take) {
    ctx->autos.seq++;
    ctx->autos.t0 = real_ns();
    ctx->autos.dropped0 = dropped;
  } else {
    atomic_store(&s->n_dropped, dropped);
  }
  return s;
}

/* Ask ctx's thread to lend the context (x->mu held, ctx = x->ctx): 1
** when lent (give it back with give_back), 0 when it did not answer. */
static int borrow(ljp_autox *x, ljp_ctx *ctx)
{
  ljp_exitst *e = &ctx->exit;
  siginfo_t si;
  uint32_t token = atomic_load(&ctx->token);
  int waited;
  if (e->closed || ctx->state != LJP_RUNNING || !token) return 0;
  while (sem_trywait(&x->lent) == 0) {}
  /* (set here, not only at attach: a run's start renews the exit part) */
  ljp_lend_sem(e, &x->lent);
  ljp_lend_ask(e);
  memset(&si, 0, sizeof(si));
  si.si_signo = ctx->opt.signo;
  si.si_code = SI_QUEUE;
  si.si_pid = getpid();
  si.si_uid = getuid();
  si.si_value.sival_ptr =
      (void *)(uintptr_t)((uint64_t)LJP_LEND_MAGIC << 32 | token);
  for (waited = 0; waited < LEND_MS && !atomic_load(&x->closing);
       waited += 10) {
    struct timespec ts;
    /* Sent again every 50 ms: the sampling signal (SIGURG by default)
    ** is no real-time signal, so a request sent while a tick is pending
    ** on the thread is merged into the tick and lost. A request too many
    ** does nothing (only an ASKED lend is granted). */
    if (waited % 50 == 0 &&
        ljp_os_tgsigqueue(ctx->pid, ctx->tid, ctx->opt.signo, &si) != 0)
      break;                      /* the thread is gone */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 10000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    if (sem_clockwait(&x->lent, CLOCK_MONOTONIC, &ts) == 0) break;
  }
  /* Not lent yet: withdraw the request, unless it was just granted. */
  if (ljp_lend_withdraw(e)) {
    if (!x->silent && !atomic_load(&x->closing)) {
      char line[256];
      x->silent = 1;
      snprintf(line, sizeof(line), "ljprof: Lua state %d did not answer "
               "(its thread is gone, or blocks signal %d): no export of it "
               "this time\n", x->index, ctx->opt.signo);
      say(line);
    }
    return 0;
  }
  while (sem_trywait(&x->lent) == 0) {}
  if (e->closed) {  /* an exit signal came: the exit helper's now */
    ljp_lend_give_back(e);
    return 0;
  }
  return 1;
}

static void give_back(ljp_ctx *ctx)
{
  ljp_lend_give_back(&ctx->exit);
}

/* -- Rendering --------------------------------------------------------------- */

/* Render and write s's outputs: jit.prof.write_after_signal in a state of
** the helper's own, made for this export and closed after it (a few ms):
** the memory of a render (tens of MB for 50,000 samples of many stacks)
** goes back to the system instead of staying in the state's heap, where
** a long run's RSS crept up (luacheck looped 60 s at 10 kHz, every=5:
** 135 -> 217 MB with one state kept; bench/auto_rss.lua). */
static void render(ljp_autox *x, ljp_ctx *s)
{
  char err[512], line[600];
  uint64_t t0 = ljp_now_ns();
  atomic_store(&au.rendering, s);
  if (ljp_own_write(au.path, au.cpath, "jit.prof", "write_after_signal", s,
                    x->spec, x->speclen, err, sizeof(err)) != 0) {
    snprintf(line, sizeof(line), "ljprof: export failed: %s", err);
    ljp_auto_notice(line);
  }
  atomic_store(&au.rendering, NULL);
  x->exports++;
  x->export_ns += ljp_now_ns() - t0;
}

/* Export x's state: take (periodic) or copy (a snapshot of a run
** without periodic export). 1 when files were written, 0 when there was
** nothing to write, -1 when the state did not answer. */
static int export_one(ljp_autox *x, int take)
{
  ljp_ctx *s = NULL;
  ljp_offrec *pend;
  uint32_t maxpend;
  int lent = 0;
  uint64_t t0 = ljp_now_ns();
  pthread_mutex_lock(&x->mu);
  if (!x->ctx || atomic_load(&x->closing) || x->ctx->state != LJP_RUNNING) {
    pthread_mutex_unlock(&x->mu);
    return 0;   /* stopping or stopped: its own stop writes */
  }
  /* Room for the pending records, made before the lend. */
  maxpend = x->ctx->ring.cap;
  pend = maxpend ? malloc(maxpend * sizeof(*pend)) : NULL;
  if (!pend) maxpend = 0;
  if ((lent = borrow(x, x->ctx))) {
    s = snapshot(x->ctx, take, x->every_ns < PENDING_NS ? x->every_ns
                                                        : PENDING_NS,
                 pend, maxpend);
    give_back(x->ctx);
  }
  pthread_mutex_unlock(&x->mu);
  free(pend);
  if (!lent) return -1;
  if (!s) return 0;
  x->export_ns += ljp_now_ns() - t0;
  render(x, s);
  snapshot_free(s);
#ifdef __GLIBC__
  /* The interval's store (allocated by the profiled thread) and the
  ** render's C memory are free now, in the middle of malloc's heaps:
  ** give their pages back, or a long run's RSS creeps up by what
  ** fragmentation keeps (bench/auto_rss.lua). */
  malloc_trim(0);
#endif
  return 1;
}

/* -- The helper thread -------------------------------------------------------- */

/* The registered states, referenced (at most one per slot). */
static int states(ljp_autox **v)
{
  ljp_autox *x;
  int n = 0;
  pthread_mutex_lock(&au.mu);
  for (x = au.list; x && n < LJP_MAX_SLOTS; x = x->next) {
    atomic_fetch_add(&x->refs, 1);
    v[n++] = x;
  }
  pthread_mutex_unlock(&au.mu);
  return n;
}

static void control_action(int n)
{
  ljp_autox *v[LJP_MAX_SLOTS];
  int i, k = 0, done = 0, silent = 0;
  char line[1400], sig[32];
  const char *sn = signame(au.signo, sig, sizeof(sig));
  if (au.control == LJP_CONTROL_TOGGLE) {
    int paused;
    /* Flipped under au.mu, before the states are listed: a state starting
    ** meanwhile is in the list, or takes the flipped value (auto_start). */
    pthread_mutex_lock(&au.mu);
    if (n % 2) au.paused = !au.paused;
    paused = au.paused;
    pthread_mutex_unlock(&au.mu);
    k = states(v);
    for (i = 0; i < k; i++) {
      pthread_mutex_lock(&v[i]->mu);
      if (v[i]->ctx) v[i]->ctx->autos.paused = paused;
      pthread_mutex_unlock(&v[i]->mu);
    }
    snprintf(line, sizeof(line), paused
             ? "ljprof: %s: sampling paused (%d Lua state%s; %s again "
               "resumes)\n"
             : "ljprof: %s: sampling resumed (%d Lua state%s; %s again "
               "pauses)\n", sn, k, k == 1 ? "" : "s", sn);
  } else {
    k = states(v);
    au.last[0] = '\0';
    for (i = 0; i < k; i++) {
      int r = export_one(v[i], v[i]->every_ns != 0);
      done += r > 0;
      silent += r < 0;
    }
    if (done)
      snprintf(line, sizeof(line), "ljprof: %s: snapshot written: %s%s\n",
               sn, au.last, silent ? " (a state did not answer)" : "");
    else
      snprintf(line, sizeof(line), "ljprof: %s: snapshot: %s\n", sn,
               silent ? "no state answered" : "no samples to write yet");
  }
  for (i = 0; i < k; i++) autox_unref(v[i]);
  say(line);
}

/* Periodic exports due; the next deadline (UINT64_MAX: none). */
static uint64_t periodic(void)
{
  ljp_autox *v[LJP_MAX_SLOTS];
  int i, k = states(v);
  uint64_t next = UINT64_MAX;
  for (i = 0; i < k; i++) {
    ljp_autox *x = v[i];
    if (x->every_ns) {
      uint64_t now = ljp_now_ns();
      if (now >= x->next_ns) {
        au.last[0] = '\0';
        export_one(x, 1);
        x->next_ns += x->every_ns;
        now = ljp_now_ns();
        if (x->next_ns <= now) x->next_ns = now + x->every_ns; /* caught up */
      }
      if (x->next_ns < next) next = x->next_ns;
    }
    autox_unref(x);
  }
  return next;
}

static void control_handler(int sig, siginfo_t *si, void *uc);

/* The program took the control signal over: say so once, stop using it. */
static void check_control(void)
{
  uint64_t now = ljp_now_ns();
  char line[256], b[32];
  if (!au.signo || now - au.checked_ns < CHECK_NS) return;
  au.checked_ns = now;
  if (ljp_sig_handler_is(au.signo, control_handler) != 0)
    return;                       /* ours still, or it cannot tell */
  snprintf(line, sizeof(line), "ljprof: the program changed the handling of "
           "%s: control by signal is off (choose another with LJPROF "
           "signal=)\n", signame(au.signo, b, sizeof(b)));
  pthread_mutex_lock(&au.mu);
  au.signo = 0;
  pthread_mutex_unlock(&au.mu);
  say(line);
}

/* ENTRY: the export helper's thread (ljp_thread_start). */
static void *helper_main(void *arg)
{
  uint64_t next = UINT64_MAX;
  (void)arg;
  for (;;) {
    struct timespec ts;
    uint64_t now = ljp_now_ns(), until = now + CHECK_NS;
    int n;
    if (next < until) until = next;
    ts.tv_sec = (time_t)(until / 1000000000u);
    ts.tv_nsec = (long)(until % 1000000000u);
    while (sem_clockwait(&au.wake, CLOCK_MONOTONIC, &ts) != 0 &&
           errno == EINTR) {}
    if ((n = atomic_exchange(&au.requests, 0)) > 0) control_action(n);
    next = periodic();
    check_control();
  }
  return NULL;
}

/* ENTRY, signal context: an operator's control signal (any thread). */
static void control_handler(int sig, siginfo_t *si, void *uc)
{
  int saved = errno;
  (void)sig;
  (void)si;
  (void)uc;
  if (au.helper_up && au.pid == getpid()) {
    atomic_fetch_add(&au.requests, 1);
    sem_post(&au.wake);
  }
  errno = saved;
}

/* Take signo for control, unless the program handles it. */
static int control_install(int signo, char *err, size_t n)
{
  struct sigaction old;
  char b[32];
  if (ljp_sig_get(signo, &old) != 0) return -1;
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == control_handler)
    return 0;
  if ((old.sa_flags & SA_SIGINFO) ||
      (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
    snprintf(err, n, "ljprof: LJPROF: the program already handles %s: "
             "control by signal is off (accepted: a signal the program "
             "leaves alone, e.g. signal=USR1 or signal=RTMIN+5; "
             "signal=off)", signame(signo, b, sizeof(b)));
    return -1;
  }
  return ljp_sig_install(signo, control_handler, 1);
}

static int helper_start(void)
{
  if (au.helper_up && au.pid == getpid()) return 0;
  /* First start, or a forked child (no helper there): afresh. */
  au.list = NULL;
  au.helper_up = 0;
  atomic_store(&au.rendering, NULL);
  atomic_store(&au.requests, 0);
  sem_init(&au.wake, 0, 0);
  au.pid = getpid();
  au.helper_up = ljp_thread_start(&au.helper, helper_main, NULL) == 0;
  if (au.helper_up) pthread_detach(au.helper);
  return au.helper_up ? 0 : -1;
}

int ljp_auto_start(ljp_ctx *ctx, lua_State *L, const char *spec,
                   size_t speclen, int control, int signo, int paused,
                   char *err, size_t errlen)
{
  ljp_autox *x = ctx->autos.x;
  int rc = 0;
  err[0] = '\0';
  if (!x) return 0;
  pthread_mutex_lock(&x->mu);
  free(x->spec);
  x->spec = malloc(speclen ? speclen : 1);
  if (x->spec) memcpy(x->spec, spec, speclen);
  x->speclen = speclen;
  x->next_ns = ljp_now_ns() + x->every_ns;
  pthread_mutex_unlock(&x->mu);
  ctx->autos.dropped0 = atomic_load(&ctx->n_dropped);
  pthread_mutex_lock(&au.mu);
  if (!au.path || au.pid != getpid()) {  /* the first state's paths */
    free(au.path);
    free(au.cpath);
    ljp_package_paths(L, &au.path, &au.cpath);
  }
  if (helper_start() != 0) {
    snprintf(err, errlen, "ljprof: LJPROF: cannot start a thread: no "
             "periodic export, no control signal");
    rc = -1;
  } else {
    if (!x->registered) {
      x->registered = 1;
      atomic_fetch_add(&x->refs, 1);
      x->next = au.list;
      au.list = x;
    }
    if (!au.signo) {  /* the first state that takes the signal decides */
      au.control = control;
      au.paused = paused;
    }
    if (control != LJP_CONTROL_OFF && signo && !au.signo) {
      if (signo == ctx->opt.signo) {
        char b[32];
        snprintf(err, errlen, "ljprof: LJPROF: %s samples: control by "
                 "signal is off (accepted: another signal=)",
                 signame(signo, b, sizeof(b)));
        rc = -1;
      } else if (control_install(signo, err, errlen) == 0) {
        au.signo = signo;
        au.checked_ns = ljp_now_ns();
      } else {
        if (!err[0]) snprintf(err, errlen, "ljprof: LJPROF: cannot take "
                              "signal %d: %s", signo, strerror(errno));
        rc = -1;
      }
    }
  }
  /* Paused or not: the process's toggle state (start= of the state that
  ** took the signal, then each toggle), not this state's own start=: a
  ** state made after a resume samples, and the next toggle pauses every
  ** state alike. Without a toggle signal nothing would resume it. */
  ctx->autos.paused = au.signo && au.control == LJP_CONTROL_TOGGLE
                      ? au.paused : 0;
  pthread_mutex_unlock(&au.mu);
  if (rc == 0 && x->every_ns) sem_post(&au.wake);  /* its first deadline */
  return rc;
}

/* No more exports or control of ctx (its own stop follows). */
void ljp_auto_stop(ljp_ctx *ctx)
{
  ljp_autox *x = ctx->autos.x, **p;
  int unref = 0;
  if (!x) return;
  atomic_store(&x->closing, 1);   /* a lend request gives up */
  pthread_mutex_lock(&x->mu);     /* a take under way ends first */
  x->ctx = NULL;
  pthread_mutex_unlock(&x->mu);
  ctx->autos.paused = 0;
  pthread_mutex_lock(&au.mu);
  if (x->registered && au.pid == getpid()) {
    for (p = &au.list; *p; p = &(*p)->next) {
      if (*p == x) {
        *p = x->next;
        break;
      }
    }
    x->registered = 0;
    unref = 1;
  }
  pthread_mutex_unlock(&au.mu);
  if (unref) autox_unref(x);
}

void ljp_auto_release(ljp_ctx *ctx)
{
  ljp_autox *x = ctx->autos.x;
  if (!x) return;
  ljp_auto_stop(ctx);
  ctx->autos.x = NULL;
  ljp_lend_sem(&ctx->exit, NULL);
  autox_unref(x);
}
