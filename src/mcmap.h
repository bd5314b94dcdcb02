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

/* Learn the IR opcode names (jit.vmdef's irnames, required in S: a state
** of ljprof's own, vmlearn.c) once per process. Returns 1 when known. */
int ljp_mcmap_learn(lua_State *S);

/* For the byte at offset ofs of trace T's machine code (T alive): the IR
** references (biased as LuaJIT's, REF_BIAS 0x8000) whose code can hold it,
** [*ref_lo, *ref_hi]. *exact = 1 when it lies in an instruction matched to
** exactly one IR instruction (an anchor: a call, a guard branch, a float
** or integer operation of a compatible IR opcode, or code between two
** anchors of the same instruction; ref_lo == ref_hi), 0 for a range
** between the neighbouring anchors. The trace's head (before the first IR
** instruction's code) is REF_BIAS, its tail (PHI moves, loop branch,
** link) the trace's nins. Returns 0 when unknown (layouts not proven, the
** code not decodable at every snapshot boundary, T's IR out of bounds, a
** span whose calls did not align: then the snapshot's whole ref range is
** given with *exact = 0 and 1 is returned). */
int ljp_mcmap_refs(uintptr_t T, uint32_t ofs, uint32_t *ref_lo,
                   uint32_t *ref_hi, int *exact);

/* Statistics of the map of trace T (building it if needed): bytes of code,
** bytes mapped exactly, spans, spans whose anchors were not trusted.
** Returns 0 when unknown. For tests and measurement. */
typedef struct ljp_mcmap_stats {
  uint32_t bytes, exact_bytes, spans, untrusted, runs, anchors;
  const char *why;    /* when unknown: why (a static string) */
} ljp_mcmap_stats;
int ljp_mcmap_stats_of(uintptr_t T, ljp_mcmap_stats *st);

/* Free every cached map (a trace flush, the end of a run, a test). */
void ljp_mcmap_clear(void);

#endif
