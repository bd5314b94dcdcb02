/*
** Native frame names: what the C frames of a sample are called, read at
** the safe point (normal context only: files, malloc and locks are fine
** here, never in the signal handler).
**
** Objects and their symbols are the object registry's (objects.c: the
** full symbol table, .symtab, else a separate debug file's, else .dynsym,
** read once per object on first use, C++ names demangled; an address in
** an object not seen yet refreshes the registry). This
** file keeps, per context, every address resolved once and remembered
** with its interned name (and the last record's lookups, whose outer
** frames the next record usually shares: taken from there, compared by
** address, with no hash lookup), and the rules for which frames are
** shown.
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
** profiler's cost, shown as such. The signal trampoline that a signal
** handler returns through is "__restore_rt", as gdb and perf name it
** (glibc's has no symbol in a stripped libc): found by its code. A
** record the full ring cut to its outermost native frame (ring.h) shows
** "[merged]" above that frame: its ticks' other frames, not kept.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ljp.h"
#include "objects.h"
#include "symbols.h"

static int exported_api(const char *s)
{
  return !strncmp(s, "lua_", 4) || !strncmp(s, "luaL_", 5) ||
         !strncmp(s, "luaJIT_", 7);
}

/* -- Per context: address -> interned name -------------------------------- */

typedef struct natent {
  uintptr_t addr;     /* lookup address (0: free) */
  uintptr_t start;    /* start of its function (0: unknown) */
  uint32_t id;        /* its frame (LJP_FR_NATIVE); 0: not shown */
  int self;           /* ljprof's own code */
} natent;

/* A function already resolved: every address inside it has its name. */
typedef struct natrange {
  uintptr_t lo, hi;
  natent v;
} natrange;

/* The lookups of the last record named (ljp_native_names), outermost
** first: consecutive records share their outer native frames (the
** program's main, the VM's entry, the collector's or the compiler's
** callers), which are taken from here, compared by lookup address from
** the outermost in, with no hash lookup (about 80 instructions a frame:
** a record has 5-17 native frames where LuaJIT's own C code runs, the
** outer half of them usually the last record's). The next record's
** inner frames are written over it in place. An address's entry never
** changes once resolved, so a copy is as good as the table's. */
typedef struct natlast {
  uint32_t n;
  natent v[LJP_NATIVE_MAX];        /* v[j]: frame n - 1 - j */
} natlast;

struct ljp_natcache {
  natent *e;               /* by address (hash) */
  uint32_t n, cap;
  natrange *r;             /* by function, sorted by lo */
  uint32_t nr, capr;
  uint32_t merged;         /* the frame "[merged]" (0: not made yet) */
  natlast last;
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
  k = c->nr;                /* i: the first range with lo >= lo */
  while (i < k) {
    uint32_t mid = i + (k - i) / 2;
    if (c->r[mid].lo < lo) i = mid + 1;
    else k = mid;
  }
  if (i < c->nr && c->r[i].lo < hi) return;  /* would overlap */
  memmove(&c->r[i + 1], &c->r[i], (c->nr - i) * sizeof(*c->r));
  c->r[i].lo = lo;
  c->r[i].hi = hi;
  c->r[i].v = *v;
  c->nr++;
}

static natent *nat_slot(struct ljp_natcache *c, uintptr_t a)
{
  uint32_t i = ljp_hash_addr(a) & (c->cap - 1);
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

/* A function with no symbol that starts at lo, in an object other than
** LuaJIT's: its Lua name when it is a C function the program's modules
** hold ("cjson.encode" for liblua5.1-cjson's static json_encode, not
** "cjson.so+0x45d0"); in L when there is one (ljp_native_names'), which
** walks package.loaded again only when an object, a module or a global
** came since its last walk (names.c: at the start, run.c): the main
** program's own unnamed code (the root frame) costs no walk per run. Its
** length in buf, or 0. */
static int lua_cname(ljp_ctx *ctx, lua_State *L, uintptr_t lo, char *buf,
                     size_t n)
{
  ljp_buf sb = {0};
  int len = 0, named = ljp_cfunc_learnt(&sb, (lua_CFunction)lo, NULL);
  if (!named && L)
    named = ljp_name_cfunc(&ctx->cnames, L, (lua_CFunction)lo, &sb);
  if (named && sb.n && sb.n < n) {
    memcpy(buf, sb.b, sb.n);
    buf[sb.n] = '\0';
    len = (int)sb.n;
  }
  free(sb.b);
  return len;
}

/* Resolve one lookup address (normal context); [*flo, *fhi) is the
** function it lies in, when known. L: the state to name C functions
** without a symbol in (lua_cname), or NULL. */
static void resolve(ljp_ctx *ctx, lua_State *L, uintptr_t a, natent *out,
                    uintptr_t *flo, uintptr_t *fhi)
{
  char buf[320];
  const char *name = NULL;
  ljp_objinfo ob;
  uintptr_t lo, hi;
  int len = -1, vm;
  out->start = 0;
  out->id = 0;
  out->self = 0;
  *flo = *fhi = 0;
  if (!ljp_objects_lookup(a, &ob)) {
    len = snprintf(buf, sizeof(buf), "0x%lx", (unsigned long)a);
  } else if (ob.kind == LJP_SPAN_SELF) {
    /* The profiler's own work (the safe point, call counting): one frame
    ** that says so, not its internals. */
    if (ob.sym_lo) {
      out->start = *flo = ob.sym_lo;
      *fhi = ob.sym_hi;
    }
    out->self = 1;
    name = "[ljprof]";
  } else {
    vm = ob.kind == LJP_SPAN_VM || ob.kind == LJP_SPAN_INTERP;
    if (ob.sym_lo) {
      name = ob.sym;
      out->start = *flo = ob.sym_lo;
      *fhi = ob.sym_hi;
      if (vm && !exported_api(name)) name = NULL;  /* dropped */
    } else if (!vm) {
      if (ljp_objects_proc(a, &lo, &hi)) {
        out->start = *flo = lo;
        *fhi = hi;
        len = lua_cname(ctx, L, lo, buf, sizeof(buf));
        if (len <= 0)
          len = snprintf(buf, sizeof(buf), "%s+0x%lx", ob.short_name,
                         (unsigned long)(lo - ob.base));
      } else {
        len = snprintf(buf, sizeof(buf), "%s+0x%lx", ob.short_name,
                       (unsigned long)(a - ob.base));
      }
    } else if (ljp_objects_proc(a, &lo, &hi)) {
      out->start = *flo = lo;  /* unnamed VM code: dropped, start known */
      *fhi = hi;
    }
  }
  if (name) {            /* (interned as it is: no copy, no snprintf) */
    len = (int)strnlen(name, sizeof(ob.sym) - 1);
  } else if (len > 0) {
    if (len >= (int)sizeof(buf)) len = (int)sizeof(buf) - 1;
    name = buf;
  }
  if (len > 0) {
    ljp_frame f;
    memset(&f, 0, sizeof(f));
    f.kind = LJP_FR_NATIVE;
    f.source = ljp_store_intern(&ctx->store, name, (size_t)len);
    out->id = f.source ? ljp_store_frame(&ctx->store, &f) : 0;
  }
}

/* Native frame i's lookup address: return addresses point after their
** call, so the call is looked up. */
static inline uintptr_t nat_addr(const ljp_record *r, int i)
{
  return i == 0 ? r->native[0] : r->native[i] - 1;
}

static struct ljp_natcache *natcache(ljp_ctx *ctx)
{
  if (!ctx->natcache) ctx->natcache = calloc(1, sizeof(struct ljp_natcache));
  return ctx->natcache;
}

/* Native frame i's entry, resolved in L (resolve) when not cached. */
static natent *lookup(ljp_ctx *ctx, lua_State *L, const ljp_record *r, int i)
{
  struct ljp_natcache *c = natcache(ctx);
  uintptr_t a = nat_addr(r, i);
  natent *e;
  if (!c) return NULL;
  if ((c->n + 1) * 4 > c->cap * 3 && nat_grow(c) != 0) return NULL;
  e = nat_slot(c, a);
  if (!e->addr) {
    /* Samples in a hot function land on many PCs: a function resolved
    ** once names them all. The trampoline lies right after another
    ** function (sigaction's padding): it is checked first, by the
    ** return address itself. */
    natrange *rg = NULL;
    if (ljp_objects_is_sigreturn(r->native[i])) {
      ljp_frame f;
      memset(&f, 0, sizeof(f));
      f.kind = LJP_FR_NATIVE;
      f.source = ljp_store_intern(&ctx->store, "__restore_rt", 12);
      e->id = f.source ? ljp_store_frame(&ctx->store, &f) : 0;
      e->start = r->native[i];
      e->self = 0;
    } else if ((rg = range_find(c, a)) != NULL) {
      *e = rg->v;
    } else {
      uintptr_t lo, hi;
      resolve(ctx, L, a, e, &lo, &hi);
      range_add(c, lo, hi, e);
    }
    e->addr = a;
    c->n++;
  }
  return e;
}

uintptr_t ljp_native_start(ljp_ctx *ctx, const ljp_record *r, int i)
{
  natent *e = i < r->nnative ? lookup(ctx, NULL, r, i) : NULL;
  return e ? e->start : 0;
}

/* The frame a cut record (ring.h: LJP_NATIVE_CUT) shows above its
** outermost native frame: the frames its ticks had there, not kept. */
static uint32_t merged_frame(ljp_ctx *ctx)
{
  struct ljp_natcache *c = natcache(ctx);
  if (!c) return 0;
  if (!c->merged) {
    ljp_frame f;
    memset(&f, 0, sizeof(f));
    f.kind = LJP_FR_NATIVE;
    f.source = ljp_store_intern(&ctx->store, "[merged]", 8);
    c->merged = f.source ? ljp_store_frame(&ctx->store, &f) : 0;
  }
  return c->merged;
}

int ljp_native_names(ljp_ctx *ctx, lua_State *L, const ljp_record *r,
                     uint32_t *ids)
{
  struct ljp_natcache *c;
  natent *v;
  int i, n = 0, nn = r->nnative, shown, k = 0;
  if ((r->nflags & LJP_NATIVE_CUT) && r->nnative &&
      (ids[n] = merged_frame(ctx)) != 0)
    n++;
  if (nn > LJP_NATIVE_MAX) nn = LJP_NATIVE_MAX;
  if (!nn || !(c = natcache(ctx))) return n;
  /* The outer frames the last record had (natlast: v[j] is frame
  ** nn - 1 - j), then the others looked up into it; out of memory, the
  ** frames from the first that failed on are not shown, and only the
  ** shared ones stay for the next record. */
  v = c->last.v;
  while (k < nn && k < (int)c->last.n && v[k].addr == nat_addr(r, nn - 1 - k))
    k++;
  for (shown = 0; shown < nn - k; shown++) {
    natent *e = lookup(ctx, L, r, shown);
    if (!e) break;
    v[nn - 1 - shown] = *e;
  }
  if (shown < nn - k) {
    c->last.n = (uint32_t)k;
  } else {
    c->last.n = (uint32_t)nn;
    shown = nn;
  }
  for (i = 0; i < shown; i++) {
    const natent *e = &v[nn - 1 - i];
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
