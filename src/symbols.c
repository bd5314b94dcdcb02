/*
** Native frame names: what the C frames of a sample are called, read at
** the safe point (normal context only: files, malloc and locks are fine
** here, never in the signal handler).
**
** Each loaded object's symbols come from its file: the full symbol table
** (.symtab, so a module built with symbols shows its static functions),
** else the dynamic one (.dynsym). They are read once per object and kept
** process-wide; an address in an object not seen yet (a library loaded
** after the start) rescans the loaded objects. Per context, every
** address is resolved once and remembered with its interned name.
**
** Rules for the frames of LuaJIT's own object: exported API functions
** keep their names (lua_pushlstring called by a C module); everything
** else there is dropped (library functions already appear by their Lua
** names, "string.rep", and the interpreter's helpers have no names in a
** stripped binary). Code without a symbol is named "object+0xOFFSET" from
** the start of its function (from its unwind info) when known. The frame
** of the C function that Lua called, which the Lua side already names
** ("cjson.encode"), is not repeated. The frames of ljprof's own code
** (the safe point, call counting) are one frame, "[ljprof]": the
** profiler's cost, shown as such.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ljp.h"

/* -- Symbol tables, process-wide -------------------------------------------- */

typedef struct sym {
  uintptr_t lo, hi;
  uint32_t name;      /* offset in the object's name arena */
} sym;

typedef struct symobj {
  uintptr_t base, lo, hi;  /* load bias, span of its executable code */
  char *path;              /* file to read ("" main program: /proc/self/exe) */
  const char *short_name;  /* basename, for "object+0x..." */
  int is_vm, is_self, loaded; /* LuaJIT's object, ljprof's own */
  sym *s;
  uint32_t ns;
  char *names;
} symobj;

static pthread_mutex_t sym_mu = PTHREAD_MUTEX_INITIALIZER;
static symobj *sym_objs;
static uint32_t sym_nobj, sym_cap;

static int sym_cmp(const void *a, const void *b)
{
  const sym *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return x->hi > y->hi ? -1 : x->hi < y->hi;  /* the longest first */
}

/* Read the function symbols of an ELF image of size bytes at map. */
static void parse_symbols(symobj *ob, const void *map, uint64_t size)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh, *tab = NULL;
  struct { uint64_t st_size; } st = {size};
  size_t bytes = 0, i, nsym;
  int pass;
  if (size < sizeof(ElfW(Ehdr)) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) > size)
    return;
  sh = (const ElfW(Shdr) *)((const char *)map + eh->e_shoff);
  for (pass = 0; pass < 2 && !tab; pass++)
    for (i = 0; i < eh->e_shnum; i++)
      if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB) &&
          sh[i].sh_link < eh->e_shnum && sh[i].sh_entsize == sizeof(ElfW(Sym)) &&
          sh[i].sh_offset + sh[i].sh_size <= (uint64_t)st.st_size &&
          sh[sh[i].sh_link].sh_offset + sh[sh[i].sh_link].sh_size <=
              (uint64_t)st.st_size) {
        tab = &sh[i];
        break;
      }
  if (!tab) goto done;
  {
    const ElfW(Sym) *sy = (const ElfW(Sym) *)((const char *)map + tab->sh_offset);
    const ElfW(Shdr) *ss = &sh[tab->sh_link];
    const char *str = (const char *)map + ss->sh_offset;
    size_t n = 0, used = 0;
    nsym = tab->sh_size / sizeof(ElfW(Sym));
    for (i = 0; i < nsym; i++) {
      int t = ELF64_ST_TYPE(sy[i].st_info);
      if ((t == STT_FUNC || t == STT_GNU_IFUNC) && sy[i].st_shndx != SHN_UNDEF &&
          sy[i].st_value && sy[i].st_name < ss->sh_size) {
        n++;
        bytes += strnlen(str + sy[i].st_name, ss->sh_size - sy[i].st_name) + 1;
      }
    }
    if (!n || !(ob->s = malloc(n * sizeof(sym))) || !(ob->names = malloc(bytes))) {
      free(ob->s);
      ob->s = NULL;
      goto done;
    }
    for (i = 0; i < nsym; i++) {
      int t = ELF64_ST_TYPE(sy[i].st_info);
      if ((t == STT_FUNC || t == STT_GNU_IFUNC) && sy[i].st_shndx != SHN_UNDEF &&
          sy[i].st_value && sy[i].st_name < ss->sh_size) {
        const char *nm = str + sy[i].st_name;
        size_t len = strnlen(nm, ss->sh_size - sy[i].st_name);
        sym *e = &ob->s[ob->ns++];
        e->lo = ob->base + sy[i].st_value;
        e->hi = e->lo + (sy[i].st_size ? sy[i].st_size : 1);
        e->name = (uint32_t)used;
        memcpy(ob->names + used, nm, len);
        ob->names[used + len] = '\0';
        used += len + 1;
      }
    }
    qsort(ob->s, ob->ns, sizeof(sym), sym_cmp);
  }
done:
  return;
}

/* Read the function symbols of ob, from its file, or from memory for the
** kernel's vDSO (it has no file). */
static void load_symbols(symobj *ob)
{
  const char *path = ob->path[0] ? ob->path : "/proc/self/exe";
  struct stat st;
  void *map;
  int fd;
  ob->loaded = 1;
  if (!strncmp(ob->path, "linux-vdso", 10) || !strncmp(ob->path, "linux-gate", 10)) {
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    if (eh && (uintptr_t)eh >= ob->base && (uintptr_t)eh < ob->hi &&
        !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= 65536)
      parse_symbols(ob, eh, eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)));
    return;
  }
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return;
  }
  map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  parse_symbols(ob, map, (uint64_t)st.st_size);
  munmap(map, (size_t)st.st_size);
}

typedef struct objscan {
  uintptr_t vm_addr, self_addr;
  int oom;
} objscan;

static int objscan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  objscan *sc = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  symobj *ob;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  uint32_t k;
  int i;
  (void)size;
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_memsz) {
      uintptr_t a = info->dlpi_addr + ph->p_vaddr;
      if (a < lo) lo = a;
      if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
    }
  }
  if (lo >= hi) return 0;
  for (k = 0; k < sym_nobj; k++)  /* known already */
    if (sym_objs[k].base == info->dlpi_addr && sym_objs[k].lo == lo &&
        sym_objs[k].hi == hi && !strcmp(sym_objs[k].path, name))
      return 0;
  for (k = 0; k < sym_nobj; k++)  /* replaced: an unloaded object's range */
    if (sym_objs[k].lo < hi && lo < sym_objs[k].hi) {
      sym_objs[k].lo = sym_objs[k].hi = 0;
    }
  if (sym_nobj == sym_cap) {
    uint32_t c = sym_cap ? sym_cap * 2 : 32;
    symobj *p = realloc(sym_objs, c * sizeof(*p));
    if (!p) { sc->oom = 1; return 1; }
    sym_objs = p;
    sym_cap = c;
  }
  ob = &sym_objs[sym_nobj];
  memset(ob, 0, sizeof(*ob));
  if (!(ob->path = strdup(name))) { sc->oom = 1; return 1; }
  ob->base = info->dlpi_addr;
  ob->lo = lo;
  ob->hi = hi;
  ob->is_vm = sc->vm_addr >= lo && sc->vm_addr < hi;
  ob->is_self = sc->self_addr >= lo && sc->self_addr < hi;
  if (name[0]) {
    const char *slash = strrchr(ob->path, '/');
    ob->short_name = slash ? slash + 1 : ob->path;
  } else {
    ob->short_name = ob->is_vm ? "luajit" : "main";
  }
  sym_nobj++;
  return 0;
}

static symobj *find_obj(uintptr_t a)
{
  uint32_t k;
  for (k = 0; k < sym_nobj; k++)
    if (a >= sym_objs[k].lo && a < sym_objs[k].hi) return &sym_objs[k];
  return NULL;
}

static symobj *obj_for(uintptr_t a)
{
  symobj *ob = find_obj(a);
  if (!ob) {
    objscan sc = {(uintptr_t)(void *)lua_sethook,
                  (uintptr_t)(void *)ljp_native_names, 0};
    dl_iterate_phdr(objscan_cb, &sc);
    ob = find_obj(a);
  }
  if (ob && !ob->loaded) load_symbols(ob);
  return ob;
}

static const sym *find_sym(const symobj *ob, uintptr_t a)
{
  uint32_t lo = 0, hi = ob->ns, k;
  while (lo < hi) {  /* lo: the first symbol starting after a */
    uint32_t mid = (lo + hi) / 2;
    if (ob->s[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  /* The nearest start may be a nested or zero-size symbol: look at a few
  ** before it for one that covers a. */
  for (k = 0; k < 16 && lo > k; k++) {
    const sym *s = &ob->s[lo - 1 - k];
    if (a < s->hi) return s;
  }
  return NULL;
}

static int exported_api(const char *s)
{
  return !strncmp(s, "lua_", 4) || !strncmp(s, "luaL_", 5) ||
         !strncmp(s, "luaJIT_", 7);
}

/* -- Per context: address -> interned name -------------------------------- */

typedef struct natent {
  uintptr_t addr;     /* lookup address (0: free) */
  uintptr_t start;    /* start of its function (0: unknown) */
  uint32_t id;        /* interned name; 0: frame not shown */
  int self;           /* ljprof's own code */
} natent;

/* A function already resolved: every address inside it has its name. */
typedef struct natrange {
  uintptr_t lo, hi;
  natent v;
} natrange;

struct ljp_natcache {
  natent *e;               /* by address (hash) */
  uint32_t n, cap;
  natrange *r;             /* by function, sorted by lo */
  uint32_t nr, capr;
};

static natrange *range_find(struct ljp_natcache *c, uintptr_t a)
{
  return ljp_span_find(c->r, c->nr, sizeof(natrange), a);
}

static void range_add(struct ljp_natcache *c, uintptr_t lo, uintptr_t hi,
                      const natent *v)
{
  uint32_t i = 0, k;
  if (lo >= hi || range_find(c, lo) || range_find(c, hi - 1)) return;
  if (c->nr == c->capr) {
    uint32_t cap = c->capr ? c->capr * 2 : 64;
    natrange *p = realloc(c->r, cap * sizeof(*p));
    if (!p) return;
    c->r = p;
    c->capr = cap;
  }
  while (i < c->nr && c->r[i].lo < lo) i++;
  if (i < c->nr && c->r[i].lo < hi) return;  /* would overlap */
  for (k = c->nr; k > i; k--) c->r[k] = c->r[k - 1];
  c->r[i].lo = lo;
  c->r[i].hi = hi;
  c->r[i].v = *v;
  c->nr++;
}

static uint32_t nat_hash(uintptr_t a)
{
  uint64_t x = (uint64_t)a * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(x >> 32);
}

static natent *nat_slot(struct ljp_natcache *c, uintptr_t a)
{
  uint32_t i = nat_hash(a) & (c->cap - 1);
  while (c->e[i].addr && c->e[i].addr != a) i = (i + 1) & (c->cap - 1);
  return &c->e[i];
}

static int nat_grow(struct ljp_natcache *c)
{
  struct ljp_natcache n = *c;  /* the function ranges stay as they are */
  uint32_t i;
  n.cap = c->cap ? c->cap * 2 : 256;
  if (!(n.e = calloc(n.cap, sizeof(natent)))) return -1;
  for (i = 0; i < c->cap; i++)
    if (c->e[i].addr) *nat_slot(&n, c->e[i].addr) = c->e[i];
  free(c->e);
  c->e = n.e;
  c->cap = n.cap;
  return 0;
}

/* Resolve one lookup address (normal context); [*flo, *fhi) is the
** function it lies in, when known. */
static void resolve(ljp_ctx *ctx, uintptr_t a, natent *out, uintptr_t *flo,
                    uintptr_t *fhi)
{
  char buf[320];
  const char *name = NULL;
  symobj *ob;
  uintptr_t lo, hi;
  int len = -1;
  out->start = 0;
  out->id = 0;
  out->self = 0;
  *flo = *fhi = 0;
  pthread_mutex_lock(&sym_mu);
  ob = obj_for(a);
  if (ob && ob->is_self) {
    /* The profiler's own work (the safe point, call counting): one frame
    ** that says so, not its internals. */
    const sym *s = ob->s ? find_sym(ob, a) : NULL;
    if (s) {
      out->start = *flo = s->lo;
      *fhi = s->hi;
    }
    out->self = 1;
    len = snprintf(buf, sizeof(buf), "[ljprof]");
  } else if (ob) {
    const sym *s = ob->s ? find_sym(ob, a) : NULL;
    if (s) {
      name = ob->names + s->name;
      out->start = *flo = s->lo;
      *fhi = s->hi;
      if (ob->is_vm && !exported_api(name)) name = NULL;  /* dropped */
      if (name) len = snprintf(buf, sizeof(buf), "%s", name);
    } else if (!ob->is_vm) {
      if (ljp_native_proc(a, &lo, &hi)) {
        out->start = *flo = lo;
        *fhi = hi;
        len = snprintf(buf, sizeof(buf), "%s+0x%lx", ob->short_name,
                       (unsigned long)(lo - ob->base));
      } else {
        len = snprintf(buf, sizeof(buf), "%s+0x%lx", ob->short_name,
                       (unsigned long)(a - ob->base));
      }
    } else if (ljp_native_proc(a, &lo, &hi)) {
      out->start = *flo = lo;  /* unnamed VM code: dropped, start known */
      *fhi = hi;
    }
  } else {
    len = snprintf(buf, sizeof(buf), "0x%lx", (unsigned long)a);
  }
  pthread_mutex_unlock(&sym_mu);
  if (len > 0) {
    uint32_t id;
    if (len >= (int)sizeof(buf)) len = (int)sizeof(buf) - 1;
    id = ljp_strtab_intern(&ctx->store.strs, buf, (size_t)len);
    out->id = id == UINT32_MAX ? 0 : id;
  }
}

static natent *lookup(ljp_ctx *ctx, const ljp_record *r, int i)
{
  struct ljp_natcache *c = ctx->natcache;
  /* Return addresses point after their call: look up the call. */
  uintptr_t a = i == 0 ? r->native[0] : r->native[i] - 1;
  natent *e;
  if (!c) {
    if (!(c = calloc(1, sizeof(*c)))) return NULL;
    ctx->natcache = c;
  }
  if ((c->n + 1) * 4 > c->cap * 3 && nat_grow(c) != 0) return NULL;
  e = nat_slot(c, a);
  if (!e->addr) {
    /* Samples in a hot function land on many PCs: a function resolved
    ** once names them all. */
    natrange *rg = range_find(c, a);
    if (rg) {
      *e = rg->v;
    } else {
      uintptr_t lo, hi;
      resolve(ctx, a, e, &lo, &hi);
      range_add(c, lo, hi, e);
    }
    e->addr = a;
    c->n++;
  }
  return e;
}

uintptr_t ljp_native_start(ljp_ctx *ctx, const ljp_record *r, int i)
{
  natent *e = i < r->nnative ? lookup(ctx, r, i) : NULL;
  return e ? e->start : 0;
}

int ljp_native_names(ljp_ctx *ctx, const ljp_record *r, uint32_t *ids)
{
  int i, n = 0;
  for (i = 0; i < r->nnative; i++) {
    natent *e = lookup(ctx, r, i);
    if (!e) break;
    if (r->cfunc && e->start == r->cfunc) continue;  /* Lua names it */
    if (e->self && n > 0 && ids[n - 1] == e->id) continue;  /* one [ljprof] */
    if (e->id) ids[n++] = e->id;
  }
  return n;
}

void ljp_native_names_reset(ljp_ctx *ctx)
{
  if (ctx->natcache) {
    free(ctx->natcache->r);
    free(ctx->natcache->e);
    free(ctx->natcache);
    ctx->natcache = NULL;
  }
}
