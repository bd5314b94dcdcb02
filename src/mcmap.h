/*
** Trace machine code mapped back to IR instructions (mcmap.c), x64 (GC64)
** traces of LuaJIT 2.1: which IR instruction(s) of a trace the byte at an
** offset of its machine code was emitted for.
**
** Normal context only, on a thread that keeps the trace alive (a safe
** point): a trace's map is built once from its machine code, snapshots and
** IR (read with the layouts of tracemem.h and tracesnap.h) and cached per
** trace object; nothing LuaJIT compiles is changed. Not signal safe (it
** allocates and takes a mutex).
*/
#ifndef LJP_MCMAP_H
#define LJP_MCMAP_H

#include <stdint.h>

#include <lua.h>

#include "vm.h"

/* Learn the IR opcodes' masks and the IR call functions (by their names,
** vmnames.h; their addresses from jit.util, in S: a state of ljprof's
** own, vmlearn.c) once per process. Returns 1 when known. */
int ljp_mcmap_learn(lua_State *S);

/* ljp_mcmap_refs, ljp_mcmap_stats_of, ljp_mcmap_clear: vm.h (the sampler
** side's interface). */

#endif
