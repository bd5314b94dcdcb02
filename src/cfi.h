/*
** Native stack walking (cfi.c): ljprof's own x86-64 DWARF call-frame
** (CFI) unwinder over an object's .eh_frame_hdr search table and its
** .eh_frame entries, for the signal handler.
**
** Rules: everything here is async-signal-safe and self-contained: no
** libc call, no allocation, no lock, no recursion, bounded work (a cap on
** the CFI instructions run per frame; the caller caps the frames). Every
** read of unwind data lies inside one of the object's mapped segments as
** recorded in the registry (ljp_ehtab), every stack read inside the
** bounds the caller gives. Anything unexpected (an encoding, an opcode,
** a CFA expression, a read out of bounds) ends the walk as a failure:
** the walker never guesses.
*/
#ifndef LJP_CFI_H
#define LJP_CFI_H

#include <stdint.h>

#define LJP_EH_SEGS 8      /* mapped segments recorded per object */
#define LJP_CFI_NREG 17    /* DWARF x86-64: 0-15 the GPRs, 16 the RA */
#define LJP_CFI_RA 16
#define LJP_CFI_RSP 7

/* What the walker reads of one loaded object (copied by the registry in
** normal context; immutable once published). */
typedef struct ljp_ehtab {
  uintptr_t hdr;          /* .eh_frame_hdr (0: no usable unwind info) */
  uintptr_t table;        /* its sorted (initial location, FDE) pairs */
  uint32_t count;         /* ... each two datarel sdata4 words */
  uint32_t nseg;
  uintptr_t lo[LJP_EH_SEGS], hi[LJP_EH_SEGS];  /* mapped (PT_LOAD) */
} ljp_ehtab;

/* Registers of one frame in DWARF numbering (r[16]: the PC); a set bit in
** valid for each register whose value is known. */
typedef struct ljp_regs {
  uintptr_t r[LJP_CFI_NREG];
  uint32_t valid;
} ljp_regs;

/* The stack memory a walk may read: [lo, hi). */
typedef struct ljp_stack {
  uintptr_t lo, hi;
} ljp_stack;

/* Validate an .eh_frame_hdr at hdr against the segments in t (normal
** context, in the loader's callback): fills hdr/table/count, 0; or -1
** (unexpected version or encodings, out of the segments). */
int ljp_cfi_init(ljp_ehtab *t, uintptr_t hdr);

/* The unwind entry (FDE) covering pc: 1 and its [*lo, *hi), else 0. */
int ljp_cfi_proc(const ljp_ehtab *t, uintptr_t pc, uintptr_t *lo,
                 uintptr_t *hi);

enum {
  LJP_CFI_OK,     /* *r is now the caller's frame (r[16] its RA) */
  LJP_CFI_END,    /* the outermost frame (return address undefined) */
  LJP_CFI_FAIL    /* no entry, unsupported rule, or a read out of bounds */
};

/* One step from the frame in *r whose code belongs to t. lookup is the
** address to look up (the PC for the interrupted frame, RA - 1 for a
** caller). *sigframe is set when the entry is a signal frame ('S'): then
** the caller's PC is exact (look it up as is). gen: nonzero, a generation
** of the list of loaded objects (one value never names two lists), lets
** the rule found for lookup be remembered and reused; 0 finds it anew.
** fn (or NULL): the start of the entry found, the function the frame
** lies in, set when the entry is found (even if the step then fails). */
int ljp_cfi_step(const ljp_ehtab *t, ljp_regs *r, uintptr_t lookup,
                 const ljp_stack *st, uint64_t gen, int *sigframe,
                 uintptr_t *fn);

/* The registers of a ucontext_t (a signal's, or getcontext's). */
void ljp_cfi_regs(ljp_regs *r, const void *ucontext);

#endif
