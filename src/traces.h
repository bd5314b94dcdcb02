/*
** Trace events (traces.c): where each compiled trace started, its code
** range for the code map, and the aborts of the run, learnt from the
** jit.attach "trace" handler, which ljprof chains with any other handler.
** Normal context only.
*/
#ifndef LJP_TRACES_H
#define LJP_TRACES_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>


typedef struct ljp_trinfo {
  char *source;             /* start function's chunk name (NULL: unknown) */
  char *name;               /* its name where it was called, or NULL */
  int linedefined;          /* start function's first line */
  int line;                 /* line the trace starts at */
  int side;                 /* a side trace (starts at another's exit) */
  int have_key;             /* a sample found the start function on the */
  uint32_t stack, func;     /* stack: its keys, for samples that do not */
  uintptr_t fn;             /* start function object (compared with frames
                               captured at a signal; 0: unknown) */
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

/* The trace part of a context, written only by traces.c. */
typedef struct ljp_tracest {
  int handler_ref;          /* registry ref of our jit.attach handler */
  int attach_ref, tracemc_ref; /* jit.attach, jit.util.tracemc (or nil) */
  lua_Integer key;          /* _VMEVENTS slot of "trace" (0: unknown) */
  int funcinfo_ref;         /* jit.util.funcinfo (or nil) */
  uint32_t gen;             /* install count: stale handlers do nothing */
  int watching;             /* ljprof.watch(): handler stays attached */
  ljp_trinfo *info;         /* by trace number: where it started */
  uint32_t ninfo;
  ljp_trinfo pending;       /* the trace being recorded */
  ljp_abort *aborts;
  uint32_t naborts;
  ljp_linecache linecache[LJP_LINECACHE];
  uint64_t aborts_lost;     /* abort events beyond LJP_MAX_ABORTS records */
  uint64_t events, event_ns; /* trace events handled, time in our handler */
} ljp_tracest;

typedef struct ljp_ctx ljp_ctx;

/* Trace tracking through jit.attach (traces.c). */
void ljp_traces_attach(ljp_ctx *ctx, lua_State *L);
void ljp_traces_detach(ljp_ctx *ctx, lua_State *L);
void ljp_traces_check(ljp_ctx *ctx, lua_State *L);
/* The handler's work: returns the event's argument count, for
** ljp_traces_chain, which then calls the handler ours replaced. */
int ljp_traces_event(ljp_ctx *ctx, lua_State *L);
int ljp_traces_chain(lua_State *L, int nargs);
ljp_trinfo *ljp_trace_info(ljp_ctx *ctx, int32_t trace);
void ljp_traces_reset(ljp_ctx *ctx);  /* forget trace infos and aborts */
/* Trace infos survive between runs of a state (validated at each start by
** the trace's machine code); aborts are per run. */

#endif
