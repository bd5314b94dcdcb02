/*
** ljprof internals: the per-state context and the interfaces between the
** pipeline stages
**
**   timer_*.c   -> signal.c     -> ring.c  -> safepoint.c -> aggregate.c
**   (ticks)        (handler:       (SPSC)     (count hook:   (ring ->
**                  pc, vmstate)               Lua stack)     table)
**
** plus codemap.c/traces.c (code map used to classify the PC), dumpstack.c
** (jit.profile-identical stack strings), profiler.c (public C API and
** context lifecycle) and lua_ljprof.c (the Lua module).
*/
#ifndef LJP_H
#define LJP_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <lua.h>

#include "../include/ljprof.h"
#include "ring.h"
#include "table.h"

#define LJP_MAX_SLOTS 256  /* contexts (profiled states) alive at once */

/* -- Growable byte buffer (normal context) ------------------------------ */

typedef struct ljp_buf {
  char *b;
  size_t n, cap;
} ljp_buf;

int ljp_buf_reserve(ljp_buf *sb, size_t extra);
void ljp_buf_free(ljp_buf *sb);

/* -- Address ranges ------------------------------------------------------- */

/* Binary search in an array of n records of stride bytes, each starting
** with { uintptr_t lo, hi; } ([lo, hi)), sorted by lo and disjoint: the
** record holding pc, or NULL. Signal-safe (used by the handler's code map
** and unwind registry, and by the name cache). */
static inline void *ljp_span_find(const void *base, uint32_t n, size_t stride,
                                  uintptr_t pc)
{
  const char *b = base;
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const uintptr_t *e = (const uintptr_t *)(b + (size_t)mid * stride);
    if (pc < e[0]) hi = mid;
    else if (pc >= e[1]) lo = mid + 1;
    else return (void *)e;
  }
  return NULL;
}

/* -- Code map: what the PC points at (codemap.h) ------------------------- */

#include "codemap.h"

/* -- VM probe: LuaJIT's private state, learnt at run time (vmprobe.c) ---- */

typedef struct ljp_vmlayout {
  int vmstate_ok;         /* g->vmstate located and proven */
  int cfunc_ok;           /* running C function readable */
  int frame_ok;           /* L->base, frame function slot, GCfuncC.f */
  int hookcount_ok;       /* g->hookcount located */
  volatile int jstate_ok; /* trace compiler state located (from events) */
  ptrdiff_t g_jstate;     /* after G: int32 trace compiler state */
  ptrdiff_t l_glref;      /* lua_State: pointer to global_State */
  ptrdiff_t l_base;       /* lua_State: base of the running frame */
  ptrdiff_t g_vmstate;    /* global_State: int32 VM state / trace number */
  ptrdiff_t g_curl;       /* global_State: running lua_State */
  ptrdiff_t g_hookcount;  /* global_State: int32 count hook countdown */
  ptrdiff_t fn_f;         /* function object: lua_CFunction entry */
  ptrdiff_t fn_ffid;      /* function object: 0 Lua, 1 C, > 1 library */
  int curl_size;          /* bytes of a GC reference: 8 or 4 */
  int gc64;               /* stack slot encoding: 64-bit GC references */
  int func_slot;          /* frame function: this many slots below base */
  char why[96];           /* why something is not used (must stay last) */
} ljp_vmlayout;

extern ljp_vmlayout ljp_vml;
#define LJP_FNOBJ 64  /* bytes of a function object the probe examines */

/* Normal context: probe once per process; returns vmstate_ok. */
int ljp_vmprobe(lua_State *L);
/* The global_State of L (validated), or 0 when the VM state is unknown. */
uintptr_t ljp_vm_global(lua_State *L);
/* Signal context: 'N' 'I' 'C' 'G' 'J' from g->vmstate (trace number for
** 'N', the running C function for 'C' when known), or 0: use the PC. */
int ljp_vm_read(uintptr_t g, int32_t *trace, uintptr_t *cfunc, int want_cf);
uintptr_t ljp_vm_cfunc(uintptr_t g);  /* signal context; 0: unknown */
/* Normal context: learn the trace compiler's state field from what it
** must read at a trace "start" event, a "stop" event, and a safe point
** while nothing records. */
enum { LJP_JS_START, LJP_JS_STOP, LJP_JS_IDLE };
void ljp_vm_learn_jstate(uintptr_t g, int event);
/* Signal context: is the trace compiler idle (or its state unknown)? */
int ljp_vm_jit_idle(uintptr_t g);
/* Set g->hookcount (no-op when unknown). */
void ljp_vm_hookcount(uintptr_t g, int32_t count);
/* Fault-safe read of our own memory: 0, or -1 for an unreadable range. */
int ljp_peek(void *dst, uintptr_t src, size_t n);

/* -- Compiled traces and their aborts (traces.c) ------------------------- */

typedef struct ljp_trinfo {
  char *source;             /* start function's chunk name (NULL: unknown) */
  char *name;               /* its name where it was called, or NULL */
  int linedefined;          /* start function's first line */
  int line;                 /* line the trace starts at */
  int side;                 /* a side trace (starts at another's exit) */
  int have_key;             /* a sample found the start function on the */
  uint32_t stack, func;     /* stack: its keys, for samples that do not */
  uintptr_t mc_addr;        /* machine code, to tell a trace that is still */
  size_t mc_size;           /* there from a reused trace number */
} ljp_trinfo;

typedef struct ljp_abort {
  char *func;               /* function the trace started in: chunk:line */
  int line;                 /* start line */
  int code;                 /* LuaJIT's trace error code (jit.vmdef.traceerr) */
  char *info;               /* its argument, as text */
  int info_is_num;
  char *at;                 /* where recording stopped: chunk:line */
  uint64_t count;
} ljp_abort;

#define LJP_MAX_ABORTS 512  /* distinct abort records kept per run */

/* -- Timer interface (timer_posix.c, timer_itimer.c, timer_thread.c) ----- */

typedef struct ljp_ctx ljp_ctx;

typedef struct ljp_timer_ops {
  const char *name;
  int (*start)(ljp_ctx *ctx, char *err, size_t errlen);
  void (*stop)(ljp_ctx *ctx);
  /* Signal context, may be NULL: schedule the next expiry and return the
  ** weight of the signal being handled (ticks it stands for, >= 1). */
  uint32_t (*rearm)(ljp_ctx *ctx);
} ljp_timer_ops;

extern const ljp_timer_ops ljp_timer_cpu, ljp_timer_wall, ljp_timer_itimer,
    ljp_timer_thread;

/* Random first expiry in (0, interval], so that short runs are sampled
** with a probability proportional to their length. */
uint64_t ljp_timer_first_ns(ljp_ctx *ctx);
/* Random gap in [interval/2, 3*interval/2): expiries are not periodic, so
** a periodic program (a frame loop) is not sampled at one phase only.
** Async-signal-safe (xorshift on ctx->rng). */
uint64_t ljp_timer_gap_ns(ljp_ctx *ctx);

/* -- The per-state context ----------------------------------------------- */

typedef enum { LJP_IDLE, LJP_RUNNING, LJP_FAILED } ljp_run_state;

/* Lines of trace start points (traces.c): (chunk, first line, pc). */
#define LJP_LINECACHE 256
typedef struct ljp_linecache {
  uint64_t h;
  int32_t linedefined, line;
  lua_Integer pc;
} ljp_linecache;

struct ljp_ctx {
  /* Identity. */
  int slot;                 /* index in the process-wide slot table */
  lua_State *L;             /* private anchored thread of the state; hooks
                               are per state, so any thread of it will do */
  int anchor_ref;           /* registry ref keeping L alive */
  pid_t pid, tid;           /* profiled OS thread */
  pthread_t thread;

  /* Configuration of the current run. */
  ljprof_options opt;       /* strings below are owned copies */
  char *stack_fmt, *output;
  const ljp_timer_ops *timer;
  union {
    timer_t posix;          /* cpu, wall */
    struct {
      pthread_t th;
      pthread_mutex_t mu;
      pthread_cond_t cv;
      int stop;
    } thr;                  /* thread */
  } tm;
  int timer_live;
  uint64_t rng;             /* xorshift state (expiry jitter) */
  uint64_t next_ns;         /* next scheduled expiry, on the timer's clock */
  uint64_t deadline_ns;     /* CLOCK_MONOTONIC end of sampling (0: none) */
  volatile sig_atomic_t expired; /* the duration is over: ignore signals */

  /* Sampling path: written by the handler. */
  _Atomic uint32_t token;   /* signal token of the run (0: none) */
  ljp_ring ring;
  _Atomic uint64_t seq, n_signals, n_ticks, n_dropped, n_merged;
  _Atomic uint32_t thr_overrun; /* ticks the timer thread could not send */
  _Atomic uint64_t n_native_unwinds, n_native_frames, n_native_truncated,
      n_native_skipped;
  int native_on;            /* this run captures native stacks */
  volatile sig_atomic_t native_inside; /* the handler is walking */
  volatile sig_atomic_t busy;      /* profiler code is changing hooks */
  volatile sig_atomic_t recording; /* the trace recorder is active */
  uint32_t jit_busy_run;    /* signals in a row that found the JIT busy */
  /* Return address of the hook call inside LuaJIT's callhook (learnt at
  ** each safe point): the signal handler does not arm near it, see
  ** ljp_arm_safe (signal.c). */
  _Atomic uintptr_t callhook_ret;
  volatile sig_atomic_t state;     /* ljp_run_state */

  /* The program's own hook, saved while ours is armed. */
  lua_Hook user_hook;
  int user_mask, user_count;

  /* VM state classification. */
  uintptr_t vm_g;           /* global_State for ljp_vm_read, or 0: PC */
  ljp_codemap map;
  int traces_ref;           /* registry ref of our jit.attach handler */
  int attach_ref, tracemc_ref; /* jit.attach, jit.util.tracemc (or nil) */
  lua_Integer traces_key;   /* _VMEVENTS slot of "trace" (0: unknown) */
  int funcinfo_ref;         /* jit.util.funcinfo (or nil) */
  uint32_t traces_gen;      /* install count: stale handlers do nothing */
  int watching;             /* ljprof.watch(): handler stays attached */
  int hook_held;            /* our armed hook held back during recording */
  ljp_trinfo *trinfo;       /* by trace number: where it started */
  uint32_t ntrinfo;
  ljp_trinfo trpending;     /* the trace being recorded */
  ljp_abort *aborts;
  uint32_t naborts;
  ljp_linecache linecache[LJP_LINECACHE];
  uint64_t aborts_lost;     /* abort events beyond LJP_MAX_ABORTS records */

  /* Safe point and aggregation (normal context). */
  int in_safepoint, stop_requested;
  ljp_buf dump;             /* current stack dump */
  uint32_t last_stack;      /* id of the previous dump, for reuse */
  ljp_strtab strs;
  ljp_counts counts;
  ljp_counts fcounts;       /* (leaf function id, vmstate) -> ticks */
  ljp_counts tcounts;       /* (trace start id, 'N', trace number) */
  ljp_buf scratch;
  struct ljp_natcache *natcache; /* native address -> name (symbols.c) */
  uintptr_t cname_tried[16]; /* unnamed C functions already looked up */
  uint32_t ncname_tried;
  uint64_t completed, safepoints, batches, hook_ns, vm[5];
  uint64_t complete_ns, aggregate_ns, aggregated;
  _Atomic uint64_t handler_ns;  /* signal context, relaxed adds */
  uint64_t cb_ticks;        /* ticks not yet delivered to the callback */
  int cb_vmstate;

  char *error;              /* why the run failed (callback error) */

  /* Zones (zones.c): zone_cur is read by the handler. */
  volatile uint16_t zone_cur;
  int zone_depth;
  uint16_t zone_stack[64];
  char **zone_names;        /* id -> name; [0] unused */
  uint32_t nzones, zone_cap;

  /* Exit signals (exit_signals.c). */
  volatile sig_atomic_t exit_signal; /* trapped, waiting for a safe point */
  int exit_fn_ref;          /* Lua function to call then (registry ref) */

  /* Exact call counts (calls.c). While counting, our hook stays installed
  ** with the program's mask plus LUA_MASKCALL between samples; the handler
  ** reads counting to arm with LUA_MASKCALL kept. */
  volatile sig_atomic_t counting;
  volatile sig_atomic_t calls_skip; /* next call event is our own: ignore */
  struct ljp_calls *calls;  /* counts of the current or last run, or NULL */
};

/* Slot table (signal.c). A slot names a context for its whole life; the
** token in it is valid only while a run is live. */
int ljp_slot_alloc(ljp_ctx *ctx, const void *registry);
void ljp_slot_free(int slot);
ljp_ctx *ljp_slot_find(const void *registry); /* by lua registry pointer */
ljp_ctx *ljp_slot_ctx(uint32_t token);        /* normal context */
uint32_t ljp_slot_open(int slot);    /* new run: returns its token */
void ljp_slot_close(int slot);       /* invalidate token, wait for handlers */
int ljp_slot_quiet(int slot);        /* no handler inside right now */
void ljp_itimer_bind(uint32_t token);         /* 0 unbinds */
uint32_t ljp_itimer_bound(void);

/* Signal installation (signal.c). The handler stays installed once set
** (inert when no run is live), so a late signal can never kill the
** process; the library pins itself in memory for the same reason. */
int ljp_signal_install(int signo, char *err, size_t errlen);
pid_t ljp_gettid(void);
extern _Atomic uint64_t ljp_stale_signals;

/* Safe point (safepoint.c). */
void ljp_arm(ljp_ctx *ctx);                    /* signal context */
void ljp_settle(ljp_ctx *ctx);                 /* normal context */
void ljp_disarm(ljp_ctx *ctx);
int ljp_armed(ljp_ctx *ctx);                   /* our count hook is set */
void ljp_hook(lua_State *L, lua_Debug *ar);
void ljp_complete(ljp_ctx *ctx, lua_State *L); /* complete pending records */

/* Aggregation (aggregate.c). */
void ljp_aggregate(ljp_ctx *ctx);  /* completed ring records -> table */
void ljp_aggregate_reset(ljp_ctx *ctx);
int ljp_write_folded(ljp_ctx *ctx, const char *path, char *err, size_t n);
/* Can files be created next to path? Checked before profiling starts. */
int ljp_check_writable(const char *path, char *err, size_t n);

/* Trace tracking through jit.attach (traces.c). */
void ljp_traces_attach(ljp_ctx *ctx, lua_State *L);
void ljp_traces_detach(ljp_ctx *ctx, lua_State *L);
void ljp_traces_check(ljp_ctx *ctx, lua_State *L);
ljp_trinfo *ljp_trace_info(ljp_ctx *ctx, int32_t trace);
void ljp_traces_reset(ljp_ctx *ctx);  /* forget trace infos and aborts */
/* Trace infos survive between runs of a state (validated at each start by
** the trace's machine code); aborts are per run. */

/* Stack dumps (dumpstack.c). helper: the running thread, on which
** jit.util.funcinfo may be called for a fast function not seen before;
** NULL at the safe point, where no Lua may be called. */
int ljp_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                  const char *fmt, int depth);

/* What ljprof's own reports show at the leaf end of a stack, where the
** time was really spent: the real levels above 'skip' are cut, the first
** real level shown may get another current line, and a synthetic frame
** may sit on top (the C function running, or the function a compiled
** trace started in when it is not on the stack). */
typedef enum { LJP_LEAF_NONE, LJP_LEAF_C, LJP_LEAF_LUA } ljp_leaf_kind;
typedef struct ljp_leaf {
  ljp_leaf_kind kind;        /* synthetic frame on top, or none */
  int skip;                  /* real levels hidden */
  int line;                  /* > 0: current line of the first real level
                                shown (only without a synthetic frame) */
  lua_CFunction cfunc;       /* LJP_LEAF_C */
  const char *source;        /* LJP_LEAF_LUA: chunk name as in lua_Debug */
  const char *name;          /* LJP_LEAF_LUA: its name, or NULL */
  int linedefined;           /* LJP_LEAF_LUA */
  int nnative;               /* native frames above everything, */
  const char *native[LJP_NATIVE_MAX]; /* innermost first (their names) */
} ljp_leaf;
int ljp_dumpstack_leaf(lua_State *L, lua_State *helper, ljp_buf *sb,
                       const char *fmt, int depth, const ljp_leaf *lf);
/* "string.rep" / "cjson.encode" / [builtin#N] / @0x...; 1 if named. */
int ljp_put_cfunc(ljp_buf *sb, lua_CFunction cf);
/* chunk:line, path stripped, as dumpstack's 'l' prints it. */
void ljp_put_location(ljp_buf *sb, const char *source, int linedefined,
                      int line);
/* Learn names of C functions in package.loaded; raw access only, so it
** may run at the safe point. */
void ljp_cname_refresh(lua_State *L);
void ljp_cname_add(lua_CFunction cf, const char *name);
void ljp_ffid_learn(lua_State *L); /* normal context, L running */
int ljp_ffid_known(void);         /* has anything been learnt? */

/* Zones (zones.c). */
#define LJP_ZONE_DEPTH 64
uint16_t ljp_zone_id(ljp_ctx *ctx, const char *name, size_t len);
const char *ljp_zone_name(const ljp_ctx *ctx, uint16_t id);
int ljp_zone_push_id(ljp_ctx *ctx, uint16_t id);
uint16_t ljp_zone_pop(ljp_ctx *ctx);     /* 0: the stack was empty */
void ljp_zone_flush(ljp_ctx *ctx);
void ljp_zones_free(ljp_ctx *ctx);

/* Native stacks: capture (unwind.h), names (symbols.h); the loaded
** objects are the object registry's (objects.h). */
#include "unwind.h"
#include "symbols.h"

/* Exit signals (exit_signals.c). */
int ljp_exit_signals_lua(lua_State *L);           /* ljprof.on_signal */
void ljp_exit_signal_run(ljp_ctx *ctx, lua_State *L); /* safe point */
void ljp_exit_signals_release(ljp_ctx *ctx);

/* Exact call counts (calls.c). Normal context, except ljp_rest. */
/* Start counting (JIT off and flushed, debug.sethook/gethook wrapped, our
** hook installed with LUA_MASKCALL); 0, or -1 with a message in err. */
int ljp_calls_start(ljp_ctx *ctx, lua_State *L, char *err, size_t errlen);
/* Stop counting: the program's hook, JIT state and debug functions back;
** the counts stay readable until the next start. */
void ljp_calls_stop(ljp_ctx *ctx, lua_State *L);
void ljp_calls_free(ljp_ctx *ctx);
/* In the hook, on a call event: count the function being called. Returns
** 1 for ljprof's own call of an original debug function (the wrappers'),
** which is neither counted nor forwarded to the program's hook. */
int ljp_calls_count(ljp_ctx *ctx, lua_State *L, lua_Debug *ar);
/* The hook state between samples: the program's own hook, or while
** counting ours with the program's mask plus LUA_MASKCALL. Async-signal-
** safe (lua_sethook only). */
void ljp_rest(ljp_ctx *ctx);
/* Push the counts as a list of {func=, name=, what=, source=,
** linedefined=, lastlinedefined=, calls=} (ljprof.calls()). */
void ljp_calls_push(ljp_ctx *ctx, lua_State *L);

/* Profiler control (profiler.c). */
void ljp_fail(ljp_ctx *ctx, const char *msg); /* stop sampling, keep data */
void ljp_stop_ctx(ljp_ctx *ctx, lua_State *L);
ljp_ctx *ljp_ctx_get(lua_State *L, int create);
uint64_t ljp_now_ns(void);
void ljp_parse_mode(const char *mode, ljprof_options *opt); /* jit.profile */

static inline int ljp_vm_index(int vmstate)
{
  switch (vmstate) {
  case 'N': return 0;
  case 'I': return 1;
  case 'C': return 2;
  case 'G': return 3;
  default: return 4;
  }
}

#endif
