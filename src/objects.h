/*
** The object registry (objects.c): the process's loaded objects (ELF
** executables, libraries, the vDSO) as one immutable snapshot, and the
** one reclamation scheme (an epoch, epoch.c) that frees what snapshots and the
** code map replace.
**
** Rules: ljp_span_find, ljp_epoch_enter/leave, ljp_objects_snap,
** ljp_objects_find and ljp_objects_print are async-signal-safe (no locks,
** no allocation, bounded work); everything else is normal context. Only
** objects.c calls dl_iterate_phdr, and only it knows which object is
** LuaJIT's.
*/
#ifndef LJP_OBJECTS_H
#define LJP_OBJECTS_H

#include <stddef.h>
#include <stdint.h>

/* -- Address ranges ------------------------------------------------------- */

/* Binary search in an array of n records of stride bytes, each starting
** with { uintptr_t lo, hi; } ([lo, hi)), sorted by lo and disjoint: the
** record holding pc, or NULL. Signal-safe (the registry's spans, the
** handler's code map and unwind registry, the name cache). */
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

/* -- Reclamation (epoch) ------------------------------------------------- */

/* Enter a read section: a pointer loaded from a published snapshot after
** this stays valid until ljp_epoch_leave. Returns a token for leave, or
** -1 when it could not enter (a writer advanced the epoch meanwhile,
** repeatedly): then nothing may be read; the caller skips and counts.
** Signal context; sections nest. */
int ljp_epoch_enter(void);
void ljp_epoch_leave(int token);
/* Normal context: free p with fn (free when NULL) once no reader can hold
** it; call after p was unpublished. */
void ljp_epoch_retire(void *p, void (*fn)(void *));
/* Normal context: advance the epoch if it can and free what is safe. */
void ljp_epoch_collect(void);
/* Free everything retired: only when no reader can be inside (the
** library is being unloaded and no run ever started). Normal context. */
void ljp_epoch_release(void);

/* -- Snapshot ------------------------------------------------------------- */

enum {
  LJP_SPAN_OTHER,   /* any other object (C modules, libc, FFI callees) */
  LJP_SPAN_VM,      /* LuaJIT's own object (not the interpreter) */
  LJP_SPAN_INTERP,  /* LuaJIT's interpreter (one FDE, see unwind.c) */
  LJP_SPAN_SELF     /* ljprof's own library */
};

/* One executable segment (or the interpreter's part of one). */
typedef struct ljp_span {
  uintptr_t lo, hi;        /* [lo, hi): first, for ljp_span_find */
  uint16_t kind;           /* LJP_SPAN_* */
  uint16_t unwind;         /* the object has a usable unwind table */
  uint32_t obj;            /* index in the snapshot's objects */
} ljp_span;

typedef struct ljp_object ljp_object;  /* opaque (objects.c) */

/* A node of the loader's list as it was when a snapshot was built: its
** address and its first words (l_addr, l_ld, l_next). */
typedef struct ljp_lmnode {
  uintptr_t node, addr, ld, next;
} ljp_lmnode;
#define LJP_LM_MAX 1024

typedef struct ljp_objsnap {
  uint64_t print;               /* link-map fingerprint when it was built */
  uint32_t nlm;                 /* nodes in lm (0: the list was unreadable) */
  ljp_lmnode *lm;               /* the loader's list when it was built */
  unsigned long long dlgen;     /* loader's adds + subs when it was built */
  uint32_t nobj, nspan;
  ljp_object **obj;
  ljp_span span[];              /* sorted by lo, disjoint */
} ljp_objsnap;

/* Signal context, inside an epoch section: the current snapshot (NULL
** before the first refresh) and the span holding pc (NULL: none). */
const ljp_objsnap *ljp_objects_snap(void);
const ljp_span *ljp_objects_find(const ljp_objsnap *s, uintptr_t pc);
/* Signal context: is the interpreter's own span known (split from its
** object's)? */
int ljp_objects_interp_known(void);
/* Does pc lie in ljprof's own library? (Any context: an epoch section.) */
int ljp_objects_is_self(uintptr_t pc);
/* Signal context, inside an epoch section: the unwind table (cfi.h) of the
** object of span e, NULL when it has none. */
struct ljp_ehtab;
const struct ljp_ehtab *ljp_objects_ehtab(const ljp_objsnap *s,
                                          const ljp_span *e);
/* Signal context too: a fingerprint of the loader's list of objects (load
** bias and dynamic section of each), to compare with snap->print (one
** process_vm_readv per node). */
uint64_t ljp_objects_print(void);
/* Signal context too: is the object of span e (pc in it) still the one
** the loader has at pc, with the unwind table the snapshot copied? 1 yes;
** 0 no (unloaded since the snapshot, another object mapped in its place):
** its table must not be read; -1 cannot tell (glibc without
** _dl_find_object, or pc in none of the loader's objects): ask
** ljp_objects_unchanged. LuaJIT's and ljprof's own objects, and objects
** without a table, are always 1: nothing of theirs can go while Lua runs,
** or nothing is read. One lock-free lookup in the loader's table. */
int ljp_objects_current(const ljp_objsnap *s, const ljp_span *e,
                        uintptr_t pc);
/* Signal context: is the loader's list still the one s was built from?
** The nodes recorded in s are read back in one process_vm_readv per 32
** (a freed node reads as garbage or fails: then 0). */
int ljp_objects_unchanged(const ljp_objsnap *s);

/* -- Refresh and set-up (normal context) ---------------------------------- */

/* The loader's count of objects added plus removed. */
unsigned long long ljp_dl_generation(void);
/* Rebuild the snapshot if the loader generation changed (or none yet). */
void ljp_objects_refresh(void);
/* Free the registry and everything retired: only when the library is
** unloaded and no run ever started (no handler can be reading). */
void ljp_objects_release(void);
/* Was LuaJIT's object found (by the address of lua_atpanic, looked up
** at run time: 0 when LuaJIT is not loaded, or loaded RTLD_LOCAL)? */
int ljp_objects_have_vm(void);
/* The interpreter's extent [lo, hi); must lie in LuaJIT's object.
** 0, or -1 (rejected). Rebuilds the snapshot. */
int ljp_objects_set_interp(uintptr_t lo, uintptr_t hi);
/* The function holding pc, from its unwind entry (FDE): 1 and [*lo, *hi),
** or 0: unknown. */
int ljp_objects_proc(uintptr_t pc, uintptr_t *lo, uintptr_t *hi);

/* Is pc the start of the kernel's way back from a signal handler, the
** sigreturn trampoline (glibc's __restore_rt, which has no symbol in a
** stripped libc: "mov $15,%rax; syscall" on x86-64)? Fault-safe read;
** normal context. */
int ljp_objects_is_sigreturn(uintptr_t pc);

/* What holds address a, for naming (symbols loaded on first use). */
typedef struct ljp_objinfo {
  int kind;                /* LJP_SPAN_* (the interpreter reads as VM) */
  uintptr_t base;          /* load bias */
  char short_name[128];    /* file name (the main program: /proc/self/exe's) */
  uintptr_t sym_lo, sym_hi;/* the symbol covering a (sym_lo 0: none) */
  char sym[320];           /* its name (C++: demangled) */
} ljp_objinfo;
/* 1 and *out filled when a lies in a loaded object (refreshing once when
** it lies in none), else 0. */
int ljp_objects_lookup(uintptr_t a, ljp_objinfo *out);

#endif
