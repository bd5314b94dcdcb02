/*
** The code map (codemap.c): what the interrupted PC points at, 'N' 'I'
** 'C' or 'U'. Per context: the compiled traces' machine code; from the
** object registry (objects.h): LuaJIT's own code and every other object.
**
** Rules: ljp_codemap_classify is signal context (no locks, no
** allocation); the writers are normal context on the profiled thread.
*/
#ifndef LJP_CODEMAP_H
#define LJP_CODEMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ljp_range {
  uintptr_t lo, hi;  /* [lo, hi) */
  int32_t trace;     /* trace number */
} ljp_range;

/* An immutable array of trace ranges, sorted by lo, disjoint. */
typedef struct ljp_tracemap {
  uint32_t n;
  ljp_range r[];
} ljp_tracemap;

/* The trace ranges are replaced copy-on-write: a replaced array is
** retired to the registry's epoch (objects.h), which frees it once no
** handler can still be reading it. */
typedef struct ljp_codemap {
  _Atomic(ljp_tracemap *) traces;  /* NULL: none */
} ljp_codemap;

int ljp_codemap_init(ljp_codemap *m);   /* -1: LuaJIT's code not found */
void ljp_codemap_free(ljp_codemap *m);
/* Signal context. 'N' 'I' 'C', or 'U' when it cannot tell right now. */
int ljp_codemap_classify(ljp_codemap *m, uintptr_t pc, int32_t *trace);
/* Signal context: does pc lie in LuaJIT's interpreter (its one unwind
** entry; when that is not known, anywhere in LuaJIT's object)? */
int ljp_codemap_in_interp(uintptr_t pc);
/* Signal context: does pc lie in a loaded object, outside the interpreter
** (whose entry is known)? 0: in it, in no object, or not known. */
int ljp_codemap_outside_interp(uintptr_t pc);
/* Normal context: also resolves 'U' (anonymous code = machine code). */
int ljp_codemap_resolve(ljp_codemap *m, uintptr_t pc, int32_t *trace);
void ljp_codemap_trace_set(ljp_codemap *m, int32_t trace, uintptr_t lo,
                           size_t size);
void ljp_codemap_trace_flush(ljp_codemap *m);

#endif
