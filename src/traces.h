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

#include "vm.h"





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

/* The trace part of a context (ljp_tracest, written only by traces.c), a
** trace's start (ljp_trinfo) and an abort record (ljp_abort) are the
** VM's types shared for size (vm_luajit.h); attaching, detaching, the
** event handler, the aborts' export: the VM interface (vm.h). */

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
/* Trace infos survive between runs of a state (validated at each start by
** the trace's machine code); aborts are per run. */

#endif
