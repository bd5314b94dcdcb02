/*
** The record map (irmap.c), inline=recorded: which inlined frames each IR
** instruction of a trace was recorded in, so that a sample in trace code
** gets the frames of the code it ran, not only of the snapshot before it.
**
** LuaJIT keeps no map from IR to bytecode, but its recorder announces
** every bytecode before recording it: jit.attach(handler, "record") calls
** handler(traceno, func, pc, depth). The handler (a lua_CFunction, a few
** loads and stores per event) reads the IR count so far (J->cur.nins) and
** the recorded frame's base slot (J->baseslot), and appends (nins, func,
** pc, depth, slot) to the recording's buffer: every IR instruction emitted
** between two events belongs to the bytecode of the first. The jit_State
** offsets are learnt once per process in a state of ljprof's own and
** proven (ljp_irmap_probe); at run time every event's trace number must be
** the one J->cur holds, else the map is off for the process.
**
** A finished recording is kept by trace number; a new recording of that
** number (an abort, a flush) drops it at its first event; at use it is
** checked against the trace object (nins, start PC) and, once per trace,
** against the trace's own snapshots: the frames at each snapshot's IR
** reference must be the snapshot's (fn and slot). The loop's copied body
** (lj_opt_loop.c) is aligned to its source instructions by opcode, type
** and substituted operands; a copy not aligned has no frames.
**
** Cost: paid for by the samples. An event costs about 660 instructions
** (callgrind, luacheck: 410 ours, the rest LuaJIT's dispatch of it), and
** a program that compiles and aborts traces all along (luacheck: 345,000
** events in 0.36 s of CPU, 56% of them in recordings that abort) would
** pay 13% of its time for maps of traces most of which never take a
** sample. A run may map LJP_IRMAP_FIRST events at once and
** LJP_IRMAP_PER_TICK more per tick of its clock; out of budget, the
** handler detaches itself (the one it replaced put back), the recording
** under way is not kept, and the traces recorded meanwhile keep the
** snapshot rule; it is attached again at a safe point between two
** recordings once LJP_IRMAP_RESUME events have accrued.
**
** Normal context only, on the profiled thread: the handler, and the
** safe point that derives and uses a map while the trace is alive.
*/
#ifndef LJP_IRMAP_H
#define LJP_IRMAP_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "tracesnap.h"

typedef struct ljp_irlayout {
  volatile int ok;        /* every offset below proven */
  volatile int tried;     /* the probe ran */
  ptrdiff_t g_jcur;       /* global_State + this: jit_State's cur (GCtrace) */
  ptrdiff_t t_traceno;    /* GCtrace: uint16 trace number */
  ptrdiff_t t_nins;       /* GCtrace: uint32 next IR reference (biased) */
  ptrdiff_t g_baseslot;   /* global_State + this: jit_State's uint32 base
                             slot of the frame being recorded */
  int op_loop;            /* IR opcode LOOP (jit.vmdef) */
  int op_call;            /* bytecode CALL (jit.vmdef) */
  int op_callt, op_callmt; /* bytecodes CALLT, CALLMT (-1: unknown) */
  uint32_t events;        /* events the proof was made with */
  char why[96];           /* why it is off */
} ljp_irlayout;

extern ljp_irlayout ljp_irl;

/* Normal context, in a state of ljprof's own with the trace layouts
** proven (tracemem.h): learn and prove, once per process. (Deriving and
** using a map needs the snapshot layouts too: tracesnap.h, learnt at the
** first sample in compiled code.) */
int ljp_irmap_probe(lua_State *S);

/* Run control, the handler, stats: vm.h (ljp_irmap_*). */

/* Budget, in recorded bytecodes (events): LJP_IRMAP_FIRST at once, then
** LJP_IRMAP_PER_TICK per tick (10 events, about 6,300 instructions: a
** third of what a sample costs on luacheck, 0.19% of its time at 1 kHz
** should it record all along; 20 made it 0.38%); attached again when
** LJP_IRMAP_RESUME have accrued. LJPROF_IRMAP_BUDGET=N instead caps a run
** at N events (tests, measurements). */
#define LJP_IRMAP_FIRST 2000
#define LJP_IRMAP_PER_TICK 10
#define LJP_IRMAP_RESUME 500

/* A machine code offset of trace T (alive) -> the IR references its code
** came from, estimated ([*ref_lo, *ref_hi] biased, *exact 0): the
** offset's place in its snapshot's code span mapped onto the span's IR
** references. 1, or 0 when unknown. (The decoder's alignment, mcmap.c,
** is asked first by ljp_irmap_frames.) */
int ljp_mc_refs(uintptr_t T, uint32_t ofs, uint32_t *ref_lo, uint32_t *ref_hi,
                int *exact);

/* Samples a trace takes with the position estimate before its machine
** code is decoded (mcmap.c builds its map then, once). */
#define LJP_IRMAP_DECODE_AFTER 4

/* The frames for a sample at mpc in trace tr (object T, alive) from the
** record map, innermost first above the trace's base frame (tracesnap.h's
** meaning); *basepc the base frame's PC. -1 when the map does not know
** (none, unproven, refused, or the references unknown): the caller uses
** the snapshot rule. *estimated: the references were estimated and their
** frames differ. */
int ljp_irmap_frames(ljp_ctx *ctx, int32_t tr, uintptr_t T, uintptr_t mpc,
                     ljp_tsframe *out, int max, uintptr_t *basepc,
                     int *estimated);

#endif
