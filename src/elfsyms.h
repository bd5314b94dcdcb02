/*
** The ELF symbol reader (elfsyms.c): names the addresses of one loaded
** object from its ELF image, for the object registry (objects.c), which
** keeps the table this fills in each of its objects.
**
** Rules: normal context only (malloc, mmap, dlopen, dlsym); callers
** hold the registry's lock (objects.c's reg_mu), which also serialises
** this file's one lazily built table (the debug link's CRC-32). It reads
** files, the vDSO and the loader's answers; it keeps no registry state
** and calls no other src file: what it needs of the registry comes in
** ljp_elfobj.
*/
#ifndef LJP_ELFSYMS_H
#define LJP_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>

#define LJP_BUILD_ID_MAX 64

/* One function symbol of an object. */
typedef struct ljp_sym {
  uintptr_t lo, hi;
  uint32_t name;      /* offset in the table's name arena */
  uint8_t ifunc;      /* an STT_GNU_IFUNC symbol (lo: its resolver) */
  uint8_t bind;       /* STB_* (which alias is shown: pick_aliases) */
  uint8_t sized;      /* st_size was not 0 */
} ljp_sym;

/* An object's function symbols, sorted by lo, one per address; the
** caller frees s and names (both malloc'd). All zero: none loaded. */
typedef struct ljp_symtab {
  ljp_sym *s;
  uint32_t ns;
  char *names;        /* the name arena */
  size_t nnames;      /* its bytes */
} ljp_symtab;

/* What the reader needs to know of an object (copied by the registry
** when the object was scanned). */
typedef struct ljp_elfobj {
  const char *name;              /* as loaded ("": the main program) */
  const char *exe_path;          /* the main program's file ("": unknown) */
  uintptr_t base;                /* load bias */
  int nseg;                      /* executable segments [lo[i], hi[i]) */
  const uintptr_t *lo, *hi;
  const unsigned char *build_id; /* NT_GNU_BUILD_ID, from memory */
  int build_id_len;
  /* The extent [*lo, *hi) of the function holding pc from the object's
  ** unwind table: 1, or 0 unknown (the registry's ljp_objects_proc). */
  int (*proc)(uintptr_t pc, uintptr_t *lo, uintptr_t *hi);
} ljp_elfobj;

/* Fill t (all zero) with the function symbols of ob: its .symtab, else
** the .symtab of its separate debug file, else its .dynsym (the vDSO's
** from memory), plus its PLT stubs ("realloc@plt") and the IFUNC
** implementations the program calls, named by their public names. */
void ljp_elfsyms_load(ljp_symtab *t, const ljp_elfobj *ob);
/* The symbol covering a, NULL when none does. */
const ljp_sym *ljp_elfsyms_find(const ljp_symtab *t, uintptr_t a);
/* A symbol's name as reports show it into buf: C++ demangled, without
** its symbol version ("clock_nanosleep", not "...@@GLIBC_2.17"), a PLT
** stub's "@plt" kept. */
void ljp_elfsyms_name(const char *sym, char *buf, size_t len);

/* The build ID (NT_GNU_BUILD_ID) in the notes [p, p + n) of an object, in
** memory or in a file, into id (LJP_BUILD_ID_MAX bytes), its offset in
** the notes into *at (when at is not NULL): its length, 0 when there is
** none. Any context that may read [p, p + n). */
int ljp_elf_build_id(const unsigned char *p, uint64_t n, unsigned char *id,
                     uint64_t *at);

#endif
