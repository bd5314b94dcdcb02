/*
** The ELF symbol reader: the function symbols of one loaded object, read
** from its ELF image to name addresses ("memcpy", "realloc@plt",
** "game::Phys::step(unsigned long, int)"), for the object registry
** (objects.c), which keeps what this returns in each object and loads it
** on the first lookup of an address in that object (see elfsyms.h).
**
** What it reads: the object's file (mapped read-only: by its copied
** path, the main program's by /proc/self/exe's), the .symtab of its
** separate debug file when the object has none, else its .dynsym; the
** kernel's vDSO from memory (it has no file). To those it adds the PLT
** stubs (add_plt_syms) and the IFUNC implementations the program calls
** that no symbol names (add_ifunc_impls), and of several symbols at one
** address keeps the one perf shows (pick_aliases). A looked-up name is
** demangled and without its symbol version (ljp_elfsyms_name).
**
** Rules. Normal context only: malloc, mmap, dlopen/dlsym (the loader's
** lock) and a C++ runtime's __cxa_demangle; never a signal handler.
** Callers hold the registry's lock (objects.c's reg_mu), as every
** section below assumes: it serialises the loads and this file's one
** lazily built table (crc32_gnu's). A file's contents are never trusted:
** every offset and size is checked against the file's size (fits) before
** it is read. It keeps no state of the registry's and calls no other src
** file: the unwind-table lookup it needs comes in ljp_elfobj.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfsyms.h"

/* -- Build IDs ------------------------------------------------------------- */

int ljp_elf_build_id(const unsigned char *p, uint64_t n, unsigned char *id,
                     uint64_t *at)
{
  uint64_t off = 0;
  while (off + sizeof(ElfW(Nhdr)) <= n) {
    const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)(p + off);
    uint64_t name = off + sizeof(*nh), desc = name + ((nh->n_namesz + 3ull) & ~3ull);
    uint64_t end = desc + ((nh->n_descsz + 3ull) & ~3ull);
    if (end > n || desc + nh->n_descsz > n) break;
    if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
        !memcmp(p + name, "GNU", 4) && nh->n_descsz > 0 &&
        nh->n_descsz <= LJP_BUILD_ID_MAX) {
      memcpy(id, p + desc, nh->n_descsz);
      if (at) *at = desc;
      return (int)nh->n_descsz;
    }
    off = end;
  }
  return 0;
}

/* -- Symbols (normal context, reg_mu held) --------------------------------- */

static int sym_cmp(const void *a, const void *b)
{
  const ljp_sym *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return x->hi > y->hi ? -1 : x->hi < y->hi;  /* the longest first */
}

/* Sorting the symbols by (lo, the longest first): sort_syms(t, from)
** sorts the entries [from, ns) and merges them into the sorted [0, from),
** so that what add_plt_syms and add_ifunc_impls append is merged, not the
** whole table sorted again. A radix sort on the start less the lowest
** (least significant digit first, 11 bits a digit, a digit every symbol
** shares skipped: an object's text of up to 8 MB is two passes), then the
** few runs of one start (aliases) put longest first by an insertion sort;
** both stable. glibc's qsort through sym_cmp took 8.5 M instructions of
** the 12.4 M a run's symbol loads cost (callgrind, bench/cost many2000:
** four objects, 7,866 symbols), a merge sort with the comparison inline
** 2.7 M, a radix sort on (start, size) in bytes 1.6 M, this 0.4 M. An
** object spanning 4 GB or more, or no memory: qsort. */
#define DIGIT 11

typedef struct symkey {
  uint32_t key, at;
} symkey;

static int sym_before(const ljp_sym *x, const ljp_sym *y)
{
  return x->lo != y->lo ? x->lo < y->lo : x->hi > y->hi;
}

static void sort_syms(ljp_symtab *t, uint32_t from)
{
  uint32_t n = t->ns - from, i, j, k, p, ndig, (*count)[1u << DIGIT] = NULL;
  const ljp_sym *s = t->s + from;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  symkey *keys = NULL, *a, *b, *x;
  ljp_sym *out = NULL;
  enum { MASK = (1u << DIGIT) - 1 };
  if (!n) return;        /* (nothing appended: [0, from) is sorted) */
  for (i = 0; i < n; i++) {
    if (s[i].lo < lo) lo = s[i].lo;
    if (s[i].lo > hi) hi = s[i].lo;
  }
  /* the digits the span needs (none for one start) */
  for (ndig = 0; ndig * DIGIT < 32 && ((uint64_t)(hi - lo) >> (DIGIT * ndig)); ndig++)
    ;
  if (hi - lo > 0xffffffffu || !(out = malloc((size_t)n * sizeof(ljp_sym))) ||
      (n > 32 && ndig && (!(count = calloc(ndig, sizeof(*count))) ||
                          !(keys = malloc(2 * (size_t)n * sizeof(symkey)))))) {
    free(out);
    free(count);
    free(keys);
    qsort(t->s, t->ns, sizeof(ljp_sym), sym_cmp);
    return;
  }
  if (!count) {          /* a few (what the PLT and IFUNC passes append) */
    for (j = 0; j < n; j++) {
      ljp_sym v = s[j];
      for (k = j; k > 0 && sym_before(&v, &out[k - 1]); k--) out[k] = out[k - 1];
      out[k] = v;
    }
    goto merge;
  }
  a = keys;
  b = keys + n;
  for (i = 0; i < n; i++) {
    a[i].key = (uint32_t)(s[i].lo - lo);
    a[i].at = i;
    for (p = 0; p < ndig; p++) count[p][(a[i].key >> (DIGIT * p)) & MASK]++;
  }
  for (p = 0; p < ndig; p++) {
    uint32_t sum = 0;
    for (k = 0; k <= MASK; k++) {
      uint32_t c = count[p][k];
      count[p][k] = sum;
      sum += c;
    }
    for (i = 0; i < n; i++) b[count[p][(a[i].key >> (DIGIT * p)) & MASK]++] = a[i];
    x = a;
    a = b;
    b = x;
  }
  for (j = 0; j < n; j++) {    /* one start's symbols: the longest first */
    ljp_sym v = s[a[j].at];
    for (k = j; k > 0 && out[k - 1].lo == v.lo && out[k - 1].hi < v.hi; k--)
      out[k] = out[k - 1];
    out[k] = v;
  }
merge:
  if (!from) {           /* the whole table: it is the sorted copy */
    free(t->s);
    t->s = out;
    out = NULL;
  }
  /* [0, from) and the sorted rest merged in place from the end (a write
  ** at k = i + j - 1 never reaches t->s[0, i) not yet read); stable:
  ** of two equal symbols the one of [0, from) first */
  for (i = from, j = n, k = t->ns; out && j > 0; )
    t->s[--k] = i > 0 && sym_before(&out[j - 1], &t->s[i - 1]) ? t->s[--i] : out[--j];
  free(out);
  free(keys);
  free(count);
}

/* The first symbol of t (sorted) whose start is at or after a (gt: after). */
static uint32_t first_from(const ljp_symtab *t, uint32_t ns, uintptr_t a, int gt)
{
  uint32_t lo = 0, hi = ns;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (t->s[mid].lo < a || (gt && t->s[mid].lo == a)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static int func_sym(const ElfW(Sym) *sy, const ElfW(Shdr) *ss)
{
  int t = ELF64_ST_TYPE(sy->st_info);
  return (t == STT_FUNC || t == STT_GNU_IFUNC) && sy->st_shndx != SHN_UNDEF &&
         sy->st_value && sy->st_name < ss->sh_size;
}

/* Do len bytes at offset off fit in a file of size bytes? */
static int fits(uint64_t off, uint64_t len, uint64_t size)
{
  return len <= size && off <= size - len;
}

/* The section headers of the ELF image of size bytes at map (a file
** mapped, or the vDSO), NULL when it is not one of this process's class or
** its headers do not fit. */
static const ElfW(Shdr) *elf_shdrs(const void *map, uint64_t size)
{
  const ElfW(Ehdr) *eh = map;
  if (size < sizeof(ElfW(Ehdr)) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      !fits(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)), size))
    return NULL;
  return (const ElfW(Shdr) *)(const void *)((const char *)map + eh->e_shoff);
}

/* The symbol table of type type (SHT_SYMTAB, SHT_DYNSYM) with its strings
** in the image, NULL when it has none (or none stored in the file). */
static const ElfW(Shdr) *elf_symtab(const void *map, uint64_t size, uint32_t type)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh = elf_shdrs(map, size);
  size_t i;
  for (i = 0; sh && i < eh->e_shnum; i++)
    if (sh[i].sh_type == type && sh[i].sh_link < eh->e_shnum &&
        sh[i].sh_entsize == sizeof(ElfW(Sym)) &&
        sh[sh[i].sh_link].sh_type == SHT_STRTAB &&
        fits(sh[i].sh_offset, sh[i].sh_size, size) &&
        fits(sh[sh[i].sh_link].sh_offset, sh[sh[i].sh_link].sh_size, size))
      return &sh[i];
  return NULL;
}

/* Read the function symbols of the ELF image of size bytes at map: its
** .symtab, else (unless symtab_only) its .dynsym. Returns their number. */
static uint32_t parse_symbols(ljp_symtab *t, const ljp_elfobj *ob,
                              const void *map, uint64_t size, int symtab_only)
{
  const ElfW(Shdr) *sh = elf_shdrs(map, size), *tab;
  size_t i, nsym, n = 0;
  if (!sh) return 0;
  if (!(tab = elf_symtab(map, size, SHT_SYMTAB)) &&
      (symtab_only || !(tab = elf_symtab(map, size, SHT_DYNSYM))))
    return 0;
  {
    const ElfW(Sym) *sy = (const ElfW(Sym) *)((const char *)map + tab->sh_offset);
    const ElfW(Shdr) *ss = &sh[tab->sh_link];
    const char *str = (const char *)map + ss->sh_offset;
    nsym = tab->sh_size / sizeof(ElfW(Sym));
    for (i = 0; i < nsym; i++) n += func_sym(&sy[i], ss);
    /* The names: the string table copied whole (one copy, not one per
    ** symbol; its last string ended if the file did not), a symbol's name
    ** at its own offset. */
    if (!n || ss->sh_size >= UINT32_MAX || !(t->s = malloc(n * sizeof(ljp_sym))) ||
        !(t->names = malloc(ss->sh_size + 1))) {
      free(t->s);
      t->s = NULL;
      return 0;
    }
    memcpy(t->names, str, ss->sh_size);
    t->names[ss->sh_size] = '\0';
    t->nnames = ss->sh_size + 1;
    for (i = 0; i < nsym; i++)
      if (func_sym(&sy[i], ss)) {
        ljp_sym *e = &t->s[t->ns++];
        e->lo = ob->base + sy[i].st_value;
        e->hi = e->lo + (sy[i].st_size ? sy[i].st_size : 1);
        e->name = sy[i].st_name;
        e->ifunc = ELF64_ST_TYPE(sy[i].st_info) == STT_GNU_IFUNC;
        e->bind = (uint8_t)ELF64_ST_BIND(sy[i].st_info);
        e->sized = sy[i].st_size != 0;
      }
    sort_syms(t, 0);
  }
  return t->ns;
}

/* Several symbols at one address (aliases: memcpy and __memcpy_avx...,
** malloc and __libc_malloc): keep the one perf shows (its
** choose_best_symbol): one with a size, then not weak, then global, then
** with fewer leading underscores, then the longest name. */
static int leading_(const char *s)
{
  int n = 0;
  while (s[n] == '_') n++;
  return n;
}

static int better_alias(const ljp_symtab *t, const ljp_sym *a, const ljp_sym *b)
{
  const char *na = t->names + a->name, *nb = t->names + b->name;
  size_t la, lb;
  if (a->sized != b->sized) return a->sized;
  if ((a->bind == STB_WEAK) != (b->bind == STB_WEAK)) return b->bind == STB_WEAK;
  if ((a->bind == STB_GLOBAL) != (b->bind == STB_GLOBAL)) return a->bind == STB_GLOBAL;
  if (leading_(na) != leading_(nb)) return leading_(na) < leading_(nb);
  la = strlen(na);
  lb = strlen(nb);
  if (la != lb) return la > lb;
  return strcmp(na, nb) < 0;  /* the same in every run */
}

static void pick_aliases(ljp_symtab *t)
{
  uint32_t i, k, n = 0;
  for (i = 0; i < t->ns; i = k) {
    uint32_t best = i;
    for (k = i + 1; k < t->ns && t->s[k].lo == t->s[i].lo; k++)
      if (better_alias(t, &t->s[k], &t->s[best])) best = k;
    t->s[n] = t->s[best];
    if (t->s[n].hi < t->s[i].hi) t->s[n].hi = t->s[i].hi;  /* the longest */
    n++;
  }
  t->ns = n;
}

/* -- IFUNC implementations --------------------------------------------------
** An STT_GNU_IFUNC symbol ("sin", "memcpy") names the resolver that picks
** an implementation at load time (__sin_fma, __memmove_avx_unaligned_erms);
** in a stripped library the implementation has no symbol of its own, and
** its samples would show as "libm.so.6+0x702c0". dlsym on the object's
** own handle (dlopen RTLD_NOLOAD: never loads anything) returns exactly
** the implementation the program calls, so each one gets a symbol named
** by its public name. Its end is that of its unwind entry (FDE) when the
** object has an unwind table, else the next symbol's start (at
** most 64 KB on). Several public names of one implementation (memcpy and
** memmove): the shortest name, then the first alphabetically ("memcpy").
** An implementation that already has a symbol keeps it. Normal context
** only (dlopen, dlsym and the resolvers take the loader's lock), reg_mu
** held. */

typedef struct impl {
  uintptr_t a;
  uint32_t name;
  uint32_t len;
} impl;

static int impl_cmp(const void *x, const void *y)
{
  const impl *a = x, *b = y;
  if (a->a != b->a) return a->a < b->a ? -1 : 1;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return 0;  /* names compared by the caller's second pass */
}

static int in_object(const ljp_elfobj *ob, uintptr_t a)
{
  int i;
  for (i = 0; i < ob->nseg; i++)
    if (a >= ob->lo[i] && a < ob->hi[i]) return 1;
  return 0;
}

static void add_ifunc_impls(ljp_symtab *t, const ljp_elfobj *ob)
{
  uint32_t i, n = 0, k, nadd = 0, ns = t->ns;
  impl *im;
  ljp_sym *grown;
  void *h;
  for (i = 0; i < ns; i++) n += t->s[i].ifunc;
  if (!n) return;
  if (!(h = dlopen(ob->name[0] ? ob->name : NULL, RTLD_NOLOAD | RTLD_LAZY))) return;
  if (!(im = malloc(n * sizeof(impl)))) {
    dlclose(h);
    return;
  }
  for (i = 0, n = 0; i < ns; i++) {
    const char *nm = t->names + t->s[i].name;
    uintptr_t a;
    const ljp_sym *have;
    /* (a local symbol is in no dynamic symbol table: dlsym would not
    ** find it: 103 of the 246 calls libc with its debug file made) */
    if (!t->s[i].ifunc || t->s[i].bind == STB_LOCAL) continue;
    a = (uintptr_t)dlsym(h, nm);
    if (!a || a == t->s[i].lo || !in_object(ob, a)) continue;
    have = ljp_elfsyms_find(t, a);
    if (have && !have->ifunc) continue;  /* named already */
    im[n].a = a;
    im[n].name = t->s[i].name;
    im[n].len = (uint32_t)strlen(nm);
    n++;
  }
  dlclose(h);
  qsort(im, n, sizeof(impl), impl_cmp);
  /* One per address: the shortest name, then the first alphabetically. */
  for (i = 0; i < n; i = k) {
    uint32_t best = i;
    for (k = i + 1; k < n && im[k].a == im[i].a; k++)
      if (im[k].len == im[best].len &&
          strcmp(t->names + im[k].name, t->names + im[best].name) < 0)
        best = k;
    im[nadd++] = im[best];
  }
  if (nadd && (grown = realloc(t->s, (ns + nadd) * sizeof(ljp_sym)))) {
    t->s = grown;
    for (i = 0; i < nadd; i++) {
      uintptr_t a = im[i].a, lo, hi, next = a + 65536;
      uint32_t j;
      ljp_sym *e = &t->s[t->ns++];
      if (i + 1 < nadd && im[i + 1].a < next) next = im[i + 1].a;
      j = first_from(t, ns, a, 1);  /* the next symbol of the object */
      if (j < ns && t->s[j].lo < next) next = t->s[j].lo;
      if (ob->proc(a, &lo, &hi) && lo <= a && a < hi) next = hi;
      e->lo = a;
      e->hi = next;
      e->name = im[i].name;
      e->ifunc = 0;
      e->bind = STB_GLOBAL;
      e->sized = 1;
    }
    sort_syms(t, ns);
  }
  free(im);
}

/* -- PLT stubs --------------------------------------------------------------
** A call to another object's function (or to an IFUNC of the object's own)
** goes through a stub in .plt, .plt.sec or .plt.got: one indirect jump
** through a GOT slot. A sample that lands there is named "memcpy@plt" as
** perf names it, not "libc.so.6+0x26000" (the stubs share one unwind
** entry). Each stub's jmp *disp(%rip) gives its GOT slot; the relocation
** of that slot gives the name: its dynamic symbol (JUMP_SLOT, GLOB_DAT), or
** for IRELATIVE the IFUNC whose resolver is the addend. x86-64 only; the
** first stub of .plt (the lazy binder's) has no slot of its own and keeps
** its offset. Read from the object's own file (a debug file has no
** contents), before the IFUNC implementations are added. */

#if defined(__x86_64__)
typedef struct pltslot {
  uint64_t got;      /* the GOT slot's address (unrelocated) */
  const char *name;  /* in the file map or the name arena */
  size_t len;
} pltslot;

static int pltslot_cmp(const void *x, const void *y)
{
  const pltslot *a = x, *b = y;
  return a->got < b->got ? -1 : a->got > b->got;
}

/* The name of the IFUNC whose resolver is at vaddr, else NULL. Of its
** aliases (a debug file has many: __GI___strnlen, __strnlen, strnlen) the
** one a program calls: not local, then the fewest leading underscores,
** then the shortest, then the first alphabetically; its symbol version
** ("memcpy@@GLIBC_2.14" in a .symtab) is not part of the name. */
static const char *ifunc_at(const ljp_symtab *t, const ljp_elfobj *ob,
                            uint64_t vaddr)
{
  const char *best = NULL;
  int best_local = 1;
  uint32_t i;   /* (t is sorted: its symbols at that address, in a row) */
  for (i = first_from(t, t->ns, ob->base + vaddr, 0);
       i < t->ns && t->s[i].lo == ob->base + vaddr; i++)
    if (t->s[i].ifunc) {
      const char *nm = t->names + t->s[i].name;
      int local = t->s[i].bind == STB_LOCAL, d;
      if (best && local != best_local) {
        if (local) continue;
      } else if (best) {
        d = leading_(nm) - leading_(best);
        if (!d) d = (int)strcspn(nm, "@") - (int)strcspn(best, "@");
        if (!d) d = strcmp(nm, best);
        if (d >= 0) continue;
      }
      best = nm;
      best_local = local;
    }
  return best;
}

static void add_plt_syms(ljp_symtab *t, const ljp_elfobj *ob, const void *map,
                         uint64_t size)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh = elf_shdrs(map, size), *ds = elf_symtab(map, size, SHT_DYNSYM);
  const ElfW(Shdr) *ss;
  pltslot *slot = NULL;
  ljp_sym *grown;
  char *arena = NULL;
  size_t nslot = 0, cap = 0, i, k, used = 0, bytes = 0, nstub = 0;
  uint32_t ns0 = t->ns;      /* the stubs are appended after these */
  if (!sh || !ds || eh->e_shstrndx >= eh->e_shnum) return;
  ss = &sh[eh->e_shstrndx];
  if (!fits(ss->sh_offset, ss->sh_size, size)) return;
  /* Every relocation of a GOT slot with a name. */
  for (i = 0; i < eh->e_shnum; i++) {
    const ElfW(Rela) *r = (const ElfW(Rela) *)(const void *)((const char *)map + sh[i].sh_offset);
    const ElfW(Sym) *dsym = (const ElfW(Sym) *)(const void *)((const char *)map + ds->sh_offset);
    const ElfW(Shdr) *dstr = &sh[ds->sh_link];
    size_t nr, nd = ds->sh_size / sizeof(ElfW(Sym));
    if (sh[i].sh_type != SHT_RELA || sh[i].sh_entsize != sizeof(ElfW(Rela)) ||
        !fits(sh[i].sh_offset, sh[i].sh_size, size))
      continue;
    nr = sh[i].sh_size / sizeof(ElfW(Rela));
    for (k = 0; k < nr; k++) {
      uint32_t rt = (uint32_t)ELF64_R_TYPE(r[k].r_info), si = (uint32_t)ELF64_R_SYM(r[k].r_info);
      const char *nm = NULL;
      if ((rt == R_X86_64_JUMP_SLOT || rt == R_X86_64_GLOB_DAT) && si && si < nd &&
          dsym[si].st_name < dstr->sh_size)
        nm = (const char *)map + dstr->sh_offset + dsym[si].st_name;
      else if (rt == R_X86_64_IRELATIVE)
        nm = ifunc_at(t, ob, (uint64_t)r[k].r_addend);
      if (!nm || !*nm) continue;
      if (nslot == cap) {
        pltslot *g = realloc(slot, (cap = cap ? 2 * cap : 64) * sizeof(pltslot));
        if (!g) goto out;
        slot = g;
      }
      slot[nslot].got = r[k].r_offset;
      slot[nslot].name = nm;
      slot[nslot].len = nm >= (const char *)map && nm < (const char *)map + size
                            ? strnlen(nm, dstr->sh_size - dsym[si].st_name)
                            : strcspn(nm, "@");  /* "memcpy@@GLIBC_2.14" */
      nslot++;
    }
  }
  if (!nslot) goto out;
  qsort(slot, nslot, sizeof(pltslot), pltslot_cmp);
  /* Two passes over the stubs: count (and size the names), then add. */
  for (k = 0; k < 2; k++) {
    size_t at = 0;
    if (k == 1) {
      used = t->nnames;
      if (!nstub || !(grown = realloc(t->s, (t->ns + nstub) * sizeof(ljp_sym)))) goto out;
      t->s = grown;
      /* A new arena: the slots' IRELATIVE names point into the old one. */
      if (!(arena = malloc(used + bytes))) goto out;
      if (used) memcpy(arena, t->names, used);
    }
    for (i = 0; i < eh->e_shnum; i++) {
      const char *sn = (const char *)map + ss->sh_offset + sh[i].sh_name;
      size_t sl = sh[i].sh_name < ss->sh_size ? strnlen(sn, ss->sh_size - sh[i].sh_name) : 0;
      const unsigned char *p = (const unsigned char *)map + sh[i].sh_offset;
      uint64_t ent = sh[i].sh_entsize ? sh[i].sh_entsize : 16, off;
      if (sh[i].sh_type != SHT_PROGBITS || !(sh[i].sh_flags & SHF_EXECINSTR) ||
          !((sl == 4 && !memcmp(sn, ".plt", 4)) || (sl == 8 && !memcmp(sn, ".plt.sec", 8)) ||
            (sl == 8 && !memcmp(sn, ".plt.got", 8))) ||
          !fits(sh[i].sh_offset, sh[i].sh_size, size) || ent > 32)
        continue;
      for (off = 0; off + ent <= sh[i].sh_size; off += ent) {
        uint64_t j, got;
        int32_t disp;
        pltslot key, *hit;
        for (j = 0; j + 6 <= ent && !(p[off + j] == 0xff && p[off + j + 1] == 0x25); j++)
          ;
        if (j + 6 > ent) continue;
        memcpy(&disp, p + off + j + 2, 4);
        got = sh[i].sh_addr + off + j + 6 + (uint64_t)(int64_t)disp;
        key.got = got;
        if (!(hit = bsearch(&key, slot, nslot, sizeof(pltslot), pltslot_cmp))) continue;
        if (k == 0) {
          nstub++;
          bytes += hit->len + 5;  /* "@plt" and NUL */
          continue;
        }
        if (at++ >= nstub) continue;  /* (the same stubs both times) */
        {
          ljp_sym *e = &t->s[t->ns++];
          e->lo = ob->base + sh[i].sh_addr + off;
          e->hi = e->lo + ent;
          e->name = (uint32_t)used;
          e->ifunc = 0;
          e->bind = STB_GLOBAL;
          e->sized = 1;
          memcpy(arena + used, hit->name, hit->len);
          memcpy(arena + used + hit->len, "@plt", 5);
          used += hit->len + 5;
        }
      }
    }
  }
  free(t->names);
  t->names = arena;
  t->nnames = used;
  arena = NULL;
  sort_syms(t, ns0);
out:
  free(arena);
  free(slot);
}
#else
static void add_plt_syms(ljp_symtab *t, const ljp_elfobj *ob, const void *map,
                         uint64_t size)
{
  (void)t;
  (void)ob;
  (void)map;
  (void)size;
}
#endif

/* -- Separate debug files ---------------------------------------------------
** A stripped library's static functions are named by its separate debug
** file when one is installed (Debian's *-dbg and *-dbgsym packages), found
** as gdb and perf find it:
**  1. by build ID (the object's NT_GNU_BUILD_ID note, read from memory):
**     DIR/.build-id/xx/rest.debug, whose own build ID must be the same;
**  2. by the object's .gnu_debuglink (a file name and a CRC-32 of the
**     debug file): OBJDIR/NAME, OBJDIR/.debug/NAME, DIR/OBJDIR/NAME, the
**     first whose CRC matches (OBJDIR: the object's directory, as loaded
**     and with links resolved);
** for each DIR of LJPROF_DEBUG_DIR (a colon-separated list, default
** /usr/lib/debug; set and empty: no separate debug files at all). Its
** .symtab is read with the object's load bias (a debug file keeps the
** object's addresses). Only for an object without a .symtab of its own. */

static void *map_file(const char *path, uint64_t *size)
{
  struct stat st;
  void *map;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return NULL;
  }
  map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return NULL;
  *size = (uint64_t)st.st_size;
  return map;
}

/* The contents of the section named name, NULL when absent or not in the
** file. */
static const unsigned char *elf_section(const void *map, uint64_t size,
                                        const char *name, uint64_t *len)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh = elf_shdrs(map, size), *ss;
  size_t i, nl = strlen(name) + 1;
  if (!sh || eh->e_shstrndx >= eh->e_shnum) return NULL;
  ss = &sh[eh->e_shstrndx];
  if (!fits(ss->sh_offset, ss->sh_size, size)) return NULL;
  for (i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_name < ss->sh_size &&
        ss->sh_size - sh[i].sh_name >= nl &&
        !memcmp((const char *)map + ss->sh_offset + sh[i].sh_name, name, nl) &&
        fits(sh[i].sh_offset, sh[i].sh_size, size)) {
      *len = sh[i].sh_size;
      return (const unsigned char *)map + sh[i].sh_offset;
    }
  return NULL;
}

/* The CRC-32 of .gnu_debuglink (that of zlib and binutils). */
static uint32_t crc32_gnu(const unsigned char *p, uint64_t n)
{
  static uint32_t tab[256];
  uint32_t c = 0xffffffffu, k;
  uint64_t i;
  if (!tab[1])
    for (i = 0; i < 256; i++) {
      c = (uint32_t)i;
      for (k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      tab[i] = c;
    }
  for (c = 0xffffffffu, i = 0; i < n; i++) c = tab[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

/* Map path if it is a debug file of ob: by build ID (want_id) or by CRC. */
static void *map_debug(const char *path, const ljp_elfobj *ob, int want_id,
                       uint32_t crc, uint64_t *size)
{
  uint64_t len = 0;
  const unsigned char *note;
  unsigned char id[LJP_BUILD_ID_MAX];
  void *map = map_file(path, size);
  int ok;
  if (!map) return NULL;
  if (want_id)
    ok = (note = elf_section(map, *size, ".note.gnu.build-id", &len)) &&
         ljp_elf_build_id(note, len, id, NULL) == ob->build_id_len &&
         !memcmp(id, ob->build_id, (size_t)ob->build_id_len);
  else
    ok = crc32_gnu(map, *size) == crc;
  if (ok && elf_symtab(map, *size, SHT_SYMTAB)) return map;
  munmap(map, (size_t)*size);
  return NULL;
}

/* The debug file of ob (its own file mapped at map), mapped, or NULL. */
#define DBG_PATH 4096

static void *find_debug(const ljp_elfobj *ob, const char *path,
                        const void *map, uint64_t size, uint64_t *dsize)
{
  const char *env = getenv("LJPROF_DEBUG_DIR"), *d, *e;
  const char *dirs = env ? env : "/usr/lib/debug";
  const unsigned char *link;
  char *buf, *real, *odir[2], *slash;  /* 4 paths: off the (Lua) stack */
  uint64_t len = 0;
  size_t at;
  uint32_t crc;
  void *dbg = NULL;
  int i, k, nodir = 0;
  if (!dirs[0] || !(buf = malloc(4 * DBG_PATH))) return NULL;
  real = buf + DBG_PATH;
  odir[0] = buf + 2 * DBG_PATH;
  odir[1] = buf + 3 * DBG_PATH;
  if (ob->build_id_len >= 2)
    for (d = dirs; *d && !dbg; d = *e ? e + 1 : e) {
      int n;
      e = strchr(d, ':');
      if (!e) e = d + strlen(d);
      n = snprintf(buf, DBG_PATH, "%.*s/.build-id/%02x/", (int)(e - d), d,
                   ob->build_id[0]);
      for (i = 1; i < ob->build_id_len && n > 0 && n + 3 < DBG_PATH; i++)
        n += snprintf(buf + n, DBG_PATH - (size_t)n, "%02x", ob->build_id[i]);
      if (n > 0 && n + 7 < DBG_PATH && e > d) {
        memcpy(buf + n, ".debug", 7);
        dbg = map_debug(buf, ob, 1, 0, dsize);
      }
    }
  /* .gnu_debuglink: a file name, padding to 4 bytes, the CRC-32 */
  if (dbg || !(link = elf_section(map, size, ".gnu_debuglink", &len)) ||
      len < 8 || !memchr(link, 0, (size_t)len - 4) ||
      (at = (strlen((const char *)link) + 4) & ~(size_t)3) + 4 > len) {
    free(buf);
    return dbg;
  }
  memcpy(&crc, link + at, 4);
  for (i = 0; i < 2; i++) {  /* the directory as loaded, and resolved */
    const char *p = i ? (realpath(path, real) ? real : NULL) : path;
    if (!p || snprintf(odir[nodir], DBG_PATH, "%s", p) >= DBG_PATH) continue;
    if ((slash = strrchr(odir[nodir], '/'))) *slash = '\0';
    else strcpy(odir[nodir], ".");
    if (!nodir || strcmp(odir[0], odir[1])) nodir++;
  }
  for (k = 0; k < nodir && !dbg; k++) {
    if (snprintf(buf, DBG_PATH, "%s/%s", odir[k], link) < DBG_PATH)
      dbg = map_debug(buf, ob, 0, crc, dsize);
    if (!dbg && snprintf(buf, DBG_PATH, "%s/.debug/%s", odir[k], link) < DBG_PATH)
      dbg = map_debug(buf, ob, 0, crc, dsize);
    for (d = dirs; *d && !dbg; d = *e ? e + 1 : e) {
      e = strchr(d, ':');
      if (!e) e = d + strlen(d);
      if (e > d && odir[k][0] == '/' &&
          snprintf(buf, DBG_PATH, "%.*s%s/%s", (int)(e - d), d, odir[k], link) <
              DBG_PATH)
        dbg = map_debug(buf, ob, 0, crc, dsize);
    }
  }
  free(buf);
  return dbg;
}

/* Read the function symbols of ob, from its file (by the copied path), or
** from memory for the kernel's vDSO (it has no file). */
void ljp_elfsyms_load(ljp_symtab *t, const ljp_elfobj *ob)
{
  const char *path = ob->name[0]       ? ob->name
                     : ob->exe_path[0] ? ob->exe_path
                                       : "/proc/self/exe";
  void *map, *dbg;
  uint64_t size, dsize;
  if (!strncmp(ob->name, "linux-vdso", 10) || !strncmp(ob->name, "linux-gate", 10)) {
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    if (eh && (uintptr_t)eh >= ob->base && (uintptr_t)eh < ob->hi[ob->nseg - 1] &&
        !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= 65536)
      parse_symbols(t, ob, eh, eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)), 0);
    pick_aliases(t);
    return;
  }
  if (!(map = map_file(ob->name[0] ? ob->name : "/proc/self/exe", &size))) return;
  if (!elf_symtab(map, size, SHT_SYMTAB) &&
      (dbg = find_debug(ob, path, map, size, &dsize))) {
    parse_symbols(t, ob, dbg, dsize, 1);
    munmap(dbg, (size_t)dsize);
  }
  if (!t->s) parse_symbols(t, ob, map, size, 0);
  add_plt_syms(t, ob, map, size);
  munmap(map, (size_t)size);
  add_ifunc_impls(t, ob);
  pick_aliases(t);
}

const ljp_sym *ljp_elfsyms_find(const ljp_symtab *t, uintptr_t a)
{
  uint32_t lo = 0, hi = t->ns, k;
  while (lo < hi) {  /* lo: the first symbol starting after a */
    uint32_t mid = (lo + hi) / 2;
    if (t->s[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  /* The nearest start may be a nested or zero-size symbol: look at a few
  ** before it for one that covers a. */
  for (k = 0; k < 16 && lo > k; k++) {
    const ljp_sym *s = &t->s[lo - 1 - k];
    if (a < s->hi) return s;
  }
  return NULL;
}

/* A C++ name demangled ("_ZN4game4Phys4stepEmi" is "game::Phys::step(
** unsigned long, int)"), by the process's own C++ runtime when it has one
** (libstdc++ or libc++abi, loaded by the program, even privately: dlopen
** RTLD_NOLOAD never loads anything, and the handle holds the runtime for
** the call), else by one the program exports. Normal context only (the
** loader's lock, malloc). 1 and the name in buf, or 0: left as it is. */
typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

static int demangle(const char *name, char *buf, size_t len)
{
  static const char *const rt[] = {"libstdc++.so.6", "libc++abi.so.1", "libc++.so.1"};
  cxa_demangle_fn fn = NULL;
  void *h = NULL;
  char *d = NULL;
  int status = -1;
  size_t i;
  if (strncmp(name, "_Z", 2) != 0) return 0;
  for (i = 0; i < sizeof(rt) / sizeof(rt[0]) && !fn; i++)
    if ((h = dlopen(rt[i], RTLD_NOLOAD | RTLD_LAZY)) &&
        !(fn = (cxa_demangle_fn)(uintptr_t)dlsym(h, "__cxa_demangle"))) {
      dlclose(h);
      h = NULL;
    }
  if (!fn) fn = (cxa_demangle_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "__cxa_demangle");
  if (fn) d = fn(name, NULL, NULL, &status);
  if (h) dlclose(h);
  if (!d || status != 0) {
    free(d);
    return 0;
  }
  snprintf(buf, len, "%s", d);
  free(d);
  return 1;
}

/* demangle, keeping a PLT stub's "@plt" ("twice<unsigned long>(...)@plt"). */
static int demangle_sym(const char *name, char *buf, size_t len)
{
  char plain[256];
  size_t n = strlen(name), k;
  if (n <= 4 || strcmp(name + n - 4, "@plt") != 0) return demangle(name, buf, len);
  if (n - 4 >= sizeof(plain)) return 0;
  memcpy(plain, name, n - 4);
  plain[n - 4] = '\0';
  if (!demangle(plain, buf, len)) return 0;
  k = strlen(buf);
  if (k + 5 <= len) memcpy(buf + k, "@plt", 5);
  return 1;
}

/* A symbol's version ("clock_nanosleep@@GLIBC_2.17", "memcpy@GLIBC_2.2.5"
** in a .symtab) is not part of its name, as perf shows it; a PLT stub
** keeps its "@plt". */
static void drop_version(char *s)
{
  char *at = strchr(s, '@');
  size_t n;
  if (!at || at == s) return;
  n = strlen(at);
  if (n > 4 && !strcmp(at + n - 4, "@plt")) memmove(at, at + n - 4, 5);
  else if (n != 4 || strcmp(at, "@plt") != 0) *at = '\0';
}

void ljp_elfsyms_name(const char *sym, char *buf, size_t len)
{
  /* (a C name, the usual one, is copied as snprintf "%s" would: cut to
  ** len - 1 bytes; snprintf cost ~600 instructions a name) */
  if (len && !demangle_sym(sym, buf, len)) {
    size_t n = strnlen(sym, len - 1);
    memcpy(buf, sym, n);
    buf[n] = '\0';
  }
  if (len) drop_version(buf);
}
