/*
** LuaJIT's compiled traces read from memory (tracemem.c): which trace a
** PC lies in, where a trace started (its prototype and bytecode, whether
** it is a side trace) and a prototype's chunk name, with no jit.attach
** handler paid on every trace event and no Lua call at the safe point.
**
** The layouts (jit_State's trace array and its size; GCtrace's machine
** code, size, start prototype, start PC and root trace; GCproto's size and
** chunk name; GCstr's size) are learnt once per process in a Lua state of
** ljprof's own and proven against jit.util and jit.attach before use
** (ljp_tracemem_probe). Unproven, ljp_tml.ok stays 0 and traces.c follows
** the trace events instead.
**
** Signal context: ljp_vm_trace and ljp_vm_trace_holds only (plain reads of the
** running trace, which cannot be freed while it runs). The rest: normal
** context on the profiled thread, where a trace read from the array is
** alive until the program runs on.
*/
#ifndef LJP_TRACEMEM_H
#define LJP_TRACEMEM_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "vm.h"


/* Normal context, in a state of ljprof's own with the VM probe and the
** Lua frame layout (luastack.c: lines) proven: learn and prove the
** layouts, once per process. Returns ljp_tml.ok. */
int ljp_tracemem_probe(lua_State *S);

/* Signal context: ljp_vm_trace (trace number tr of g, or 0) and
** ljp_vm_trace_holds (does trace T's machine code hold pc?), with the
** layout (ljp_tmlayout, ljp_tml): inline in vm_luajit.h, for the tick. */

/* A trace as read at a safe point. */
typedef struct ljp_tmtrace {
  uintptr_t T;            /* the trace object */
  uintptr_t mcode;        /* its machine code, size bytes */
  uint32_t size;
  uintptr_t bc;           /* first instruction of the prototype it started
                             in (names the prototype) */
  int32_t pc;             /* bytecode index it started at */
  int32_t root;           /* root trace number; 0: it is a root trace */
  uint64_t sig;           /* the prototype's signature (ljp_proto_sig) */
} ljp_tmtrace;

/* Normal context, profiled thread: trace tr; 0 when there is none. */
int ljp_tm_read(uintptr_t g, int32_t tr, ljp_tmtrace *t);
/* Normal context, profiled thread: the trace whose machine code holds
** pc (every trace looked at, as LuaJIT's own exit handling does), or 0. */
int32_t ljp_tm_find(uintptr_t g, uintptr_t pc, ljp_tmtrace *t);
/* Any thread, with fault-safe reads (ljp_peek), while the profiled
** thread may run on (the exit and export helpers): trace tr as
** ljp_tm_read gives it, then the chunk name of its prototype copied into
** buf (n bytes, NUL-terminated), its first line and the line it started
** at. A trace freed meanwhile reads back as garbage or fails, never
** faults: the caller checks that it is still the trace object the
** sample saw (ljp_record.tobj). 1, or 0 when something could not be
** read. */
int ljp_tm_read_safe(uintptr_t g, int32_t tr, ljp_tmtrace *t, char *buf,
                     size_t n, int *firstline, int *line);
/* Normal context, profiled thread: a trace that started in the prototype
** whose first instruction is bc (which shows the prototype alive: the
** trace keeps it), trying trace number hint first; 0 when none. */
int32_t ljp_tm_find_proto(uintptr_t g, uintptr_t bc, int32_t hint);
/* Normal context: the chunk name of the prototype whose first instruction
** is bc, while something keeps that prototype alive (a trace read at this
** safe point that started in it, a live frame running it). */
const char *ljp_tm_chunkname(uintptr_t bc);

/* Learning (tracemem.c, tracesnap.c): exactly one offset of a probe
** object, step bytes apart and within lim, where cond holds for every
** record rec[0..nrec) (cond sees `r`, the record, of type rtype, and `o`,
** the offset); -1 otherwise. */
#define LJP_ONE_OFFSET(var, step, lim, rtype, cond)                       \
  do {                                                                    \
    ptrdiff_t o_, found_ = -1;                                            \
    int n_ = 0, i_;                                                       \
    for (o_ = 0; o_ + 8 <= (lim); o_ += (step)) {                         \
      for (i_ = 0; i_ < nrec; i_++) {                                     \
        const rtype *r = &rec[i_];                                        \
        ptrdiff_t o = o_;                                                 \
        if (!(cond)) break;                                               \
      }                                                                   \
      if (i_ == nrec) { n_++; found_ = o_; }                              \
    }                                                                     \
    var = n_ == 1 ? found_ : -1;                                          \
  } while (0)

#endif
