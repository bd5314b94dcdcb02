/*
** Trace events (traces.c): the recorder's activity (the hook is held back
** while it runs), where each compiled trace started, its code range for
** the code map, and the aborts of the run, from the jit.attach "trace"
** handler, which ljprof chains with any other handler.
**
** Cost rule: an event costs a few stores (no allocation, no lookup of
** names, no copy of machine code): luacheck compiles and aborts ~230,000
** traces a run. What a sample needs of a trace (its start function's
** names and line, its machine code range) is learnt when a sample lands
** in it, at the safe point. Normal context only.
*/
#ifndef LJP_TRACES_H
#define LJP_TRACES_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>


typedef struct ljp_trinfo {
  /* From the events (raw, a few stores), or read from the trace object
  ** (tracemem.h) at the first safe point that needs it. */
  uintptr_t fn;             /* start function object (events only; 0: no
                               such trace or read from memory); alive only
                               as long as proven (fnames, or found on the
                               live stack) */
  uintptr_t bc;             /* its prototype's first instruction (0:
                               unknown) */
  uintptr_t T, mcode;       /* from memory: the trace object and its
                               machine code, which must read the same for
                               the names below to still be this trace's
                               (trace numbers are reused after a flush) */
  uint32_t mcsize;          /* from memory: the machine code's size */
  int name_tried;           /* its start function's name was searched for
                               by value (names.c ljp_lname_by_value) */
  int32_t pc;               /* start bytecode index */
  int side;                 /* a side trace (starts at another's exit) */
  int line;                 /* line the trace starts at (-1: unknown) */
  /* Learnt when a sample needs them (ljp_trace_info). */
  int resolved;             /* 1: names below; < 0: tries that failed */
  char *source;             /* start function's chunk name */
  char *name;               /* its name where it was called, or NULL */
  int linedefined;          /* start function's first line */
  int have_key;             /* a sample found the start function on the */
  uint32_t stack, func;     /* stack: its keys, for samples that do not */
  int mc_known;             /* machine code range learnt (code map) */
} ljp_trinfo;

typedef struct ljp_abort {
  uint64_t raw;             /* hash of the event's values, as they came */
  char *func;               /* function the trace started in: chunk:line */
  int line;                 /* start line */
  int code;                 /* LuaJIT's trace error code (jit.vmdef.traceerr) */
  char *info;               /* its argument, as text */
  int info_is_num;
  char *at;                 /* where recording stopped: chunk:line */
  uint64_t count;
  uint64_t hash;            /* of all the above but count: a quick compare */
} ljp_abort;

#define LJP_MAX_ABORTS 512  /* distinct abort records kept per run */


/* Lines of trace start points (traces.c): (chunk, first line, pc). */
#define LJP_LINECACHE 256
typedef struct ljp_linecache {
  uint64_t h;
  int32_t linedefined, line;
  lua_Integer pc;
} ljp_linecache;

/* The trace event handler's tables (traces.c), 22.5 KB kept out of the
** context: allocated when the handler is first attached (a run that reads
** traces from memory and records no aborts never needs them), kept for
** later runs and freed with the context (ljp_traces_free). Normal context
** only: no signal handler reads them. NULL when never attached or out of
** memory (then new kinds of abort are counted lost, lines not cached). */
typedef struct ljp_trtabs {
  struct { uint64_t raw; uint32_t rec; } abort_index[2 * LJP_MAX_ABORTS];
                            /* an event's raw values -> record + 1 (the
                               same record may have several) */
  ljp_linecache linecache[LJP_LINECACHE];
} ljp_trtabs;

/* The trace part of a context, written only by traces.c. */
typedef struct ljp_tracest {
  int aborts_on;            /* this run's aborts are counted (handler in) */
  int mem;                  /* trace infos read from memory (tracemem.h) at
                               the safe point, the recorder's activity from
                               its state: no handler on the default path */
  int handler_ref;          /* registry ref of our jit.attach handler */
  int attach_ref, tracemc_ref; /* jit.attach, jit.util.tracemc (or nil) */
  lua_Integer key;          /* _VMEVENTS slot of "trace" (0: unknown) */
  int funcinfo_ref;         /* jit.util.funcinfo (or nil) */
  uint32_t gen;             /* install count: stale handlers do nothing */
  int watching;             /* ljprof.watch(): handler stays attached */
  ljp_trinfo **info;        /* by trace number: where it started (pages
                               of 256, traces.c TI) */
  uint32_t ninfo;           /* numbers the pages hold */
  ljp_trinfo pending;       /* the trace being recorded */
  int32_t recent[16];       /* traces stopped lately, ring: machine code
                               ranges to learn when a sample's PC is in
                               none known */
  uint32_t nrecent;
  ljp_abort *aborts;
  uint32_t naborts;
  ljp_trtabs *tabs;         /* the handler's tables, or NULL (above) */
  uint32_t nindex;          /* raw values in tabs->abort_index */
  uint64_t aborts_lost;     /* abort events beyond LJP_MAX_ABORTS records */
  uint64_t events, event_ns; /* trace events handled, time in our handler */
} ljp_tracest;

typedef struct ljp_ctx ljp_ctx;

/* A new context's trace part (zeroed): no Lua references held yet. */
void ljp_traces_init(ljp_tracest *t);
/* ljprof.watch(): the handler stays attached until the state closes. */
void ljp_traces_watch(ljp_ctx *ctx);
/* The trace event entry point (safepoint.c) counts each event handled,
** and the time of the timed ones (ns, scaled up to all). */
static inline void ljp_traces_counted(ljp_tracest *t, uint64_t ns)
{
  t->events++;
  t->event_ns += ns;
}

/* Trace tracking (traces.c): from memory where the layouts are proven
** (and the trace compiler's state is known), else through jit.attach;
** the handler is attached also when the run records aborts or after
** ljprof.watch() without the memory readers. */
void ljp_traces_attach(ljp_ctx *ctx, lua_State *L);
/* Can traces be followed without events in this process (tracemem.h
** proven, the recorder's state located, LJPROF_TRACES not "events")? */
int ljp_traces_from_memory(void);
void ljp_traces_detach(ljp_ctx *ctx, lua_State *L);
/* LJPROF_STACKS=check with snapshots decoded: attach (on) or detach the
** "texit" handler whose exits the safe point checks (complete.c). The
** program's own "texit" handler is replaced meanwhile (a test mode). */
void ljp_traces_exitcheck(ljp_ctx *ctx, lua_State *L, int on);
void ljp_traces_check(ljp_ctx *ctx, lua_State *L);
/* The handler's work: returns the event's argument count, for
** ljp_traces_chain, which then calls the handler ours replaced. */
int ljp_traces_event(ljp_ctx *ctx, lua_State *L);
int ljp_traces_chain(lua_State *L, int nargs);
/* Trace tr's start, its names learnt now if need be (L: the profiled
** state at its safe point, where the trace is read from memory; NULL: a
** helper thread, which gets only what is known already); NULL when
** unknown or unprovable. */
ljp_trinfo *ljp_trace_info(ljp_ctx *ctx, lua_State *L, int32_t trace);
/* Safe point: the trace whose machine code holds pc (a sample's PC in
** compiled code, vmstate naming trace *trace): ranges learnt as needed
** (jit.util.tracemc); *trace corrected when another trace holds pc. */
void ljp_trace_locate(ljp_ctx *ctx, lua_State *L, uintptr_t pc,
                      int32_t *trace);
/* A helper thread (exit signal, export), the profiled thread running on:
** trace tr of a pending record, whose object was T at the signal, read
** from memory fault-safe when no safe point has (ljp_trace_info with L
** NULL then knows it). */
int ljp_trace_learn_offline(ljp_ctx *ctx, int32_t tr, uintptr_t T);
/* Returns 0 when that trace is not known for sure (then nothing of it is
** used: its number may be another trace's by now). */
void ljp_traces_reset(ljp_ctx *ctx);  /* forget trace infos and aborts */
/* Reset, and the handler's tables freed: only when the context is freed
** (its run stopped, its handler detached). */
void ljp_traces_free(ljp_ctx *ctx);
/* Periodic export and snapshots (auto.c): the aborts into a snapshot's
** trace part, moved (the run counts afresh) or copied; freed with
** ljp_traces_aborts_free. The stack keys kept per trace forgotten (the
** store they name was taken). */
void ljp_traces_aborts_into(ljp_ctx *ctx, ljp_tracest *dst, int move);
void ljp_traces_aborts_free(ljp_tracest *t);
void ljp_traces_forget_keys(ljp_ctx *ctx);
/* Trace infos survive between runs of a state (validated at each start by
** the trace's machine code); aborts are per run. */

#endif
