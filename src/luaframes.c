/*
** The LuaJIT side of completing samples (complete.c runs the record loop):
** the stack and function of where a ring record's time was spent, named
** from LuaJIT's frames at the safe point (normal context, on the
** profiled thread, inside the hook's busy fence; no Lua calls), or
** without the Lua stack after an exit signal; and the trace exit
** self-check. Reached through vm.h's ljp_frames_* and ljp_snapcheck_*.
**
** A stack is an array of frame ids (store.h), innermost first: native
** frames, then the frames captured at the signal that have returned since
** (synthetic), then the levels of the live stack. Each distinct frame is
** interned once; no text is built here. The live stack is walked once per
** safe point (luastack.c, O(depth)) and its levels are named through
** caches keyed by bytecode addresses, so completing a record costs
** O(depth) hash lookups; lua_getstack (O(level) per level) is used only
** on a cache miss and where the walk's layout is not proven. The levels a
** safe point's live stack shares with the previous one's from the bottom
** up (same functions, slots and PCs) take their ids from it, with no
** lookup (reuse_prev); a leaf's function text is cached by frame id.
*/
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ljp.h"
#include "luastack.h"
#include "objects.h"
#include "tracemem.h"
#include "tracesnap.h"
#include "irmap.h"
#include "ffid.h"
#include "names.h"
#include "traces.h"
#include "vmprobe.h"
#include "symbols.h"
#include "unwind.h"

_Static_assert(LJP_VM_NATIVE_MAX == LJP_NATIVE_MAX,
               "vm_luajit.h's variant holds a record's native frames");

/* -- Where the time was spent ---------------------------------------------- */

/* Where the time of record r was spent, beyond what the stack at the safe
** point shows:
**   'C' with a known C function: that function, as a frame on top;
**   'N' in a trace whose start is known: the trace's start function and
**       line. The stack is cut at the innermost activation of that
**       function, which then shows the trace's start line. When the
**       function is no longer on the stack (the trace, or a side trace
**       linked to it, returned from it before the exit), the sample takes
**       the key of the trace's last sample that did find it; failing
**       that, the function is put on top of the stack. A side trace that
**       left its start function keeps the safe-point stack.
** At a safe point that is a call event entering a C function
** (ctx->sp_callee), live level 0 is that function, which has not run yet:
** the stack starts below it. */
static void leaf_for(ljp_ctx *ctx, lua_State *L, const ljp_record *r,
                     ljp_leaf *lf)
{
  const ljp_trinfo *ti;
  memset(lf, 0, sizeof(*lf));
  lf->skip = ctx->sp_callee ? 1 : 0;
  if (r->vmstate == 'C' && r->cfunc) {
    /* A C function with no name yet: package.loaded is looked through
    ** once for it (a module loaded after the start). */
    ljp_name_cfunc(&ctx->cnames, L, (lua_CFunction)r->cfunc, &ctx->scratch);
    lf->nsyn = 1;
    lf->syn[0].kind = LJP_LEAF_C;
    lf->syn[0].cfunc = (lua_CFunction)r->cfunc;
    lf->syn[0].ffid = r->nlua && r->lua[0].kind > 1 && r->lua[0].cf == r->cfunc
                          ? r->lua[0].kind : 0;
  } else if (r->vmstate == 'N' && (ti = ljp_trace_info(ctx, L, r->trace))) {
    lua_Debug ar;
    int level, k;
    lf->line = ti->line;
    /* The line of the trace's base frame at the sample (inline_frames:
    ** its snapshot's or the record map's), else the trace's start. */
    for (k = 0; k < r->nlua && r->lua[k].inl; k++) {}
    if (k < r->nlua && r->lua[k].kind == 0 && r->lua[k].pc && ti->bc &&
        r->lua[k].bc == ti->bc) {
      int line = ljp_luastack_line_pc(ti->bc, r->lua[k].pc);
      if (line > 0) lf->line = line;
    }
    /* A trace runs in the top few frames: look at most 32 levels deep
    ** (each lua_getstack walks from the top). */
    for (level = lf->skip; level < 32 && lua_getstack(L, level, &ar);
         level++) {
      lua_getinfo(L, "S", &ar);
      if (ar.linedefined == ti->linedefined && ar.source &&
          !strcmp(ar.source, ti->source)) {
        lf->skip = level;
        return;
      }
    }
    /* A side trace that left the function it started in has usually run
    ** on into its caller and beyond (returns, the next calls): where it
    ** stopped, the safe point, is the better guess. A root trace's
    ** function is where its loop or body is. */
    if (ti->side) {
      lf->line = 0;
      return;
    }
    lf->nsyn = 1;
    lf->syn[0].kind = LJP_LEAF_LUA;
    lf->syn[0].source = ti->source;
    lf->syn[0].name = ti->name;
    lf->syn[0].linedefined = ti->linedefined;
    lf->syn[0].line = lf->line;
    lf->line = 0;
  }
}

/* -- The live stack of one safe point ------------------------------------------ */

#define LIVE_MAX LJP_VM_LIVE_MAX  /* live frames walked (and compared with a
                                    capture): vm_luajit.h's livestack */
#define LEARN_TOP 8    /* live frames whose names are remembered */

static void live_walk(ljp_ctx *ctx, lua_State *L, livestack *ls);

/* -- Naming caches: bytecode addresses -> texts ------------------------------- */

/* A Lua function's prototype, by its first instruction's address (the
** function is live when looked up, so its prototype is; a prototype
** freed since and another allocated in its place differs in its first
** line, line count or first instruction, which are part of the key). */
#define PROTO_CACHE 2048
#define NAME_CACHE 4096
typedef struct protoent {
  uintptr_t bc;
  uint64_t sig;                    /* first line, line count, first ins */
  uint32_t source;                 /* chunk name (text id) */
  int32_t linedefined;
} protoent;

/* A frame's name where it was called: by the caller's bytecode, the
** return PC into it and the callee's first instruction. */
typedef struct nameent {
  uintptr_t cbc, pc, bc;
  uint32_t ins;                    /* the call instruction */
  uint32_t name;                   /* text id, 0: no name */
} nameent;

/* A whole level: by its prototype (and signature), its PC, and its
** caller's first instruction, return PC and call instruction (0s under a
** C caller): the frame id, with no text looked at and nothing interned. */
#define LEVEL_CACHE 4096
typedef struct levelent {
  uintptr_t bc, pc, cbc, cpc;
  uint64_t sig;
  uint32_t cins;
  uint32_t fid;
} levelent;

/* Prototypes of returned frames that fnames does not know: a trace
** that started there (its number, tried first next time), or when to
** look for one again and whether a search by value found nothing. The
** search reads every trace (thousands in a large program): after a miss
** the next one waits twice as many safe points, up to RET_GAP_MAX, so a
** frame that keeps being sampled costs a search now and then, not one per
** sample. */
#define RET_CACHE 512
#define RET_GAP_MAX 1024
typedef struct retent {
  uintptr_t bc;
  int32_t trace;                   /* > 0: that trace started there */
  uint32_t gap;                    /* safe points between searches */
  uint64_t retry_sp;               /* no search before this safe point */
  int byval_none;                  /* no variable or field holds one */
} retent;

/* inline=exact: a trace's function-change checks (tracesnap.h), found
** once per trace object and machine code. */
#define PROF_CACHE 32
#define PROF_MAX 256
typedef struct profent {
  uintptr_t T, mcode;
  uint32_t size, nsnap;            /* (with T and mcode: the same trace) */
  int n;                           /* checks, -1: not found as they must be */
  uint16_t ofs[PROF_MAX];
} profent;

/* A level of the previous safe point's live stack (prev_*): what its
** frame id depends on (live_frame), and the id when a record asked. */
typedef struct prevent {
  uintptr_t fn, pc, cf;
  uint64_t sig;                    /* a Lua frame's prototype's */
  uint32_t slot, fid;
  uint8_t kind;
} prevent;

/* The function ("chunk:firstline", or a C function's name) of a frame
** id, by the id: a leaf's, named once, not written out per record. */
#define FUNC_CACHE 256
typedef struct funcent {
  uint32_t fid, func;
} funcent;

/* The text ids of a synthetic frame's chunk and name, by the learning
** its names came from (ljp_fname.gen: one per pair of strings), so that a
** returned frame named from fnames interns no text per record. */
#define SYNTEXT_CACHE 512
typedef struct syntextent {
  uint32_t gen, source, name;
} syntextent;

/* The PC of the code that follows a snapshot, for its innermost frame
** (tracesnap.h: ljp_ts_code_pc), by trace object, machine code, snapshot
** and the PC the snapshot holds. */
#define CODEPC_CACHE 256
typedef struct codepcent {
  uintptr_t T, mcode, pc, code;
  int32_t sn;
} codepcent;

/* Functions for the run's end (ljp_frames_name_late): those that no
** call site, live level or the index named at a safe point (a trace's
** start function, a live frame called through a table, by pcall or from
** C), searched for by value there once, never at a safe point (a search
** walks the program's tables: 0.5 M instructions and more); and trace
** start functions named by value (name set), whose frames seen live,
** unnamed where a call site gave no name, take that name then. The first LATE_MAX prototypes, each
** once (late_ix: by prototype, open addressing). */
#define LATE_MAX 1024
#define LATE_IX 2048
typedef struct lateent {
  uintptr_t bc;
  uint64_t sig;                    /* its prototype's (ljp_proto_sig) */
  uint32_t source;                 /* text id of its chunk */
  uint32_t name;                   /* text id of its name (0: to search) */
  int32_t linedefined;
} lateent;

struct ljp_namecache {
  protoent proto[PROTO_CACHE];
  nameent name[NAME_CACHE];
  profent *prof;                   /* [PROF_CACHE], inline=exact only */
  codepcent *codepc;               /* [CODEPC_CACHE], at the first use */
  unsigned prof_next;
  levelent level[LEVEL_CACHE];
  retent ret[RET_CACHE];
  funcent func[FUNC_CACHE];
  syntextent syntext[SYNTEXT_CACHE];
  int prev_m;                      /* levels in prev (0: none) */
  int prev_same;                   /* of the last walk's levels, the
                                      outermost that were prev's */
  uintptr_t prev_stack;
  prevent prev[LIVE_MAX];          /* innermost first, as ls->f */
  uint32_t nlate;
  lateent late[LATE_MAX];
  uint16_t late_ix[LATE_IX];       /* entry + 1, by prototype */
};

static struct ljp_namecache *caches(ljp_ctx *ctx)
{
  if (!ctx->namecache) ctx->namecache = calloc(1, sizeof(*ctx->namecache));
  return ctx->namecache;
}

void ljp_frames_reset(ljp_ctx *ctx)
{
  if (ctx->namecache) {
    free(ctx->namecache->prof);
    free(ctx->namecache->codepc);
  }
  free(ctx->namecache);  /* its text ids belong to the store */
  ctx->namecache = NULL;
  ctx->own_frame = 0;
}

/* -- Frames -------------------------------------------------------------------- */

static uint32_t text(ljp_ctx *ctx, const char *s)
{
  return s ? ljp_store_intern(&ctx->store, s, strlen(s)) : 0;
}

static uint32_t lua_frame(ljp_ctx *ctx, uint32_t source, uint32_t name,
                          int linedefined, int line)
{
  ljp_frame f;
  memset(&f, 0, sizeof(f));
  f.kind = LJP_FR_LUA;
  f.source = source;
  f.name = name;
  f.linedefined = linedefined;
  f.line = line;
  return ljp_store_frame(&ctx->store, &f);
}

static uint32_t c_frame(ljp_ctx *ctx, int kind, uintptr_t cf, int ffid)
{
  ljp_frame f;
  memset(&f, 0, sizeof(f));
  f.kind = (uint32_t)kind;
  f.ptr = cf;
  f.aux = ffid > 0 ? (uint32_t)ffid : 0;
  return ljp_store_frame(&ctx->store, &f);
}

/* Level `level` of L through lua_getstack (O(level)): where the walk's
** layout is unproven, beyond its reach, or to fill a cache. line > 0
** overrides the current line. 0 when the level does not exist. */
static uint32_t getstack_frame(ljp_ctx *ctx, lua_State *L, int level, int line)
{
  lua_Debug ar;
  uint32_t id;
  if (!lua_getstack(L, level, &ar)) return 0;
  lua_getinfo(L, "nSlf", &ar);     /* pushes the function */
  if (ar.what[0] != 'C') {
    int cur = line > 0 ? line : ar.currentline;
    id = lua_frame(ctx, text(ctx, ar.source), text(ctx, ar.name),
                   ar.linedefined, cur >= 0 ? cur : ar.linedefined);
  } else {
    int ffid = ljp_ffid_top(L);
    id = ffid ? c_frame(ctx, LJP_FR_FFUNC, (uintptr_t)lua_tocfunction(L, -1),
                        ffid)
              : c_frame(ctx, LJP_FR_C, (uintptr_t)lua_tocfunction(L, -1), 0);
  }
  lua_pop(L, 1);
  return id;  /* 0: out of memory, the stack ends here */
}

/* The chunk name and first line of the Lua function at live level
** `level` (bytecode bc), cached. A miss reads them from the prototype,
** which the live frame keeps alive, where its layout is proven
** (tracemem.h: what lua_getinfo "S" gives as source and linedefined),
** else asks lua_getinfo (through lua_getstack, O(level)). */
static const protoent *proto_of(ljp_ctx *ctx, lua_State *L, int level,
                                uintptr_t bc)
{
  struct ljp_namecache *c = caches(ctx);
  uint64_t sig = ljp_proto_sig(bc);
  const char *src;
  protoent *e;
  lua_Debug ar;
  if (!c) return NULL;
  e = &c->proto[ljp_hash_addr(bc) & (PROTO_CACHE - 1)];
  if (e->bc == bc && e->sig == sig) return e;
  if ((src = ljp_tm_chunkname(bc)) != NULL) {
    ar.source = src;
    ar.linedefined = ljp_proto_firstline(bc);
  } else if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "S", &ar)) {
    return NULL;
  }
  e->bc = bc;
  e->sig = sig;
  e->source = text(ctx, ar.source);
  e->linedefined = ar.linedefined;
  return e;
}

/* The name of live level `level`, as lua_getinfo "n" gives it: from its
** caller's call instruction when the caller is a Lua frame linked by a
** return PC (cached); none under a C caller; else asked (continuations,
** pcall frames: rare). */
static uint32_t name_of(ljp_ctx *ctx, lua_State *L, livestack *ls, int level,
                        uintptr_t bc)
{
  struct ljp_namecache *c = caches(ctx);
  lua_Debug ar;
  nameent *e = NULL;
  uintptr_t cbc = 0, pc = 0;
  uint32_t ins = 0, name;
  if (level + 1 < ls->m) {
    const ljp_lframe *caller = &ls->f[level + 1];
    if (caller->kind != 0) return 0;          /* called by C: no name */
    if (caller->pc && c) {
      uint64_t h;
      cbc = ljp_fn_bc(caller->fn);
      pc = caller->pc;
      memcpy(&ins, (const void *)(pc - 4), 4);
      h = (uint64_t)cbc * 31 + pc * 7 + bc;
      e = &c->name[ljp_hash_addr((uintptr_t)h) & (NAME_CACHE - 1)];
      if (e->cbc == cbc && e->pc == pc && e->bc == bc && e->ins == ins)
        return e->name;
    }
  } else if (ls->bottom && level == ls->m - 1) {
    return 0;                                 /* the outermost frame */
  }
  if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "n", &ar)) return 0;
  name = text(ctx, ar.name);
  if (e) {
    e->cbc = cbc;
    e->pc = pc;
    e->bc = bc;
    e->ins = ins;
    e->name = name;
  }
  return name;
}

/* Live level `level` as a frame (0: no such level). line > 0 overrides
** the current line. */
/* The level cache's entry for live level `level` (a Lua frame with a known
** PC), keyed now: a hit has its frame id; a miss has fid 0 and the key, to
** be filled. NULL when the caller's link is not a return PC (the name
** then comes from lua_getinfo) or without caches. */
static levelent *level_entry(ljp_ctx *ctx, const livestack *ls, int level)
{
  struct ljp_namecache *c = caches(ctx);
  const ljp_lframe *f = &ls->f[level];
  uintptr_t bc = ljp_fn_bc(f->fn), cbc = 0, cpc = 0;
  uint32_t cins = 0;
  uint64_t sig, h;
  levelent *e;
  if (!c) return NULL;
  if (level + 1 < ls->m) {
    const ljp_lframe *caller = &ls->f[level + 1];
    if (caller->kind == 0) {
      if (!caller->pc) return NULL;
      cbc = ljp_fn_bc(caller->fn);
      cpc = caller->pc;
      memcpy(&cins, (const void *)(cpc - 4), 4);  /* the call */
    }
  } else if (!(ls->bottom && level == ls->m - 1)) {
    return NULL;
  }
  sig = ljp_proto_sig(bc);
  h = ((uint64_t)bc * 31 + f->pc) * 31 + cbc * 7 + cpc;
  e = &c->level[ljp_hash_addr((uintptr_t)(h ^ (h >> 29))) & (LEVEL_CACHE - 1)];
  if (e->bc == bc && e->pc == f->pc && e->cbc == cbc && e->cpc == cpc &&
      e->sig == sig && e->cins == cins)
    return e;
  e->bc = bc;
  e->pc = f->pc;
  e->cbc = cbc;
  e->cpc = cpc;
  e->sig = sig;
  e->cins = cins;
  e->fid = 0;
  return e;
}

/* A level's frame id known already at this safe point (named before, or
** taken from the last one: reuse_prev), without a line of its own; 0. */
static inline uint32_t known_frame(const livestack *ls, int level, int line)
{
  return ls->walked && ljp_lsl.lines_ok && line <= 0 && level >= 0 &&
                 level < ls->m
             ? ls->fid[level]
             : 0;
}

static void late_add(ljp_ctx *ctx, uintptr_t bc, uint64_t sig,
                     uint32_t source, int32_t linedefined, const char *name);

static uint32_t live_frame(ljp_ctx *ctx, lua_State *L, livestack *ls,
                           int level, int line)
{
  const ljp_lframe *f;
  const protoent *p;
  levelent *le = NULL;
  uint32_t id;
  uintptr_t bc;
  int cur;
  live_walk(ctx, L, ls);
  if (ls->m < 0 || !ljp_lsl.lines_ok || level >= ls->m) {
    if (ls->m >= 0 && ls->bottom && level >= ls->m) return 0;
    return getstack_frame(ctx, L, level, line);
  }
  if ((id = known_frame(ls, level, line)) != 0) return id;
  f = &ls->f[level];
  if (f->kind == 1) {
    id = c_frame(ctx, LJP_FR_C, f->cf, 0);
  } else if (f->kind > 1) {
    id = c_frame(ctx, LJP_FR_FFUNC, f->cf, f->kind);
  } else if (line <= 0 && f->pc && (le = level_entry(ctx, ls, level)) &&
             le->fid) {
    id = le->fid;              /* the whole level seen before */
  } else {
    bc = ljp_fn_bc(f->fn);
    if (!(p = proto_of(ctx, L, level, bc)))
      return getstack_frame(ctx, L, level, line);
    if (line > 0) {
      cur = line;
    } else if (f->pc) {
      cur = ljp_luastack_line(f->fn, f->pc);
    } else if (level == 0) {
      if (ls->curline == -2) {
        lua_Debug ar;
        ls->curline = lua_getstack(L, 0, &ar) && lua_getinfo(L, "l", &ar)
                          ? ar.currentline : -1;
      }
      cur = ls->curline;
    } else {
      lua_Debug ar;           /* linked by a continuation or pcall frame */
      cur = lua_getstack(L, level, &ar) && lua_getinfo(L, "l", &ar)
                ? ar.currentline : -1;
    }
    {
      uint32_t nm = name_of(ctx, L, ls, level, bc);
      /* no call site names it: the run's end may (ljp_frames_name_late) */
      if (!nm) late_add(ctx, bc, p->sig, p->source, p->linedefined, NULL);
      id = lua_frame(ctx, p->source, nm, p->linedefined,
                     cur >= 0 ? cur : p->linedefined);
    }
    if (le) le->fid = id;       /* filled by level_entry's key */
  }
  if (line <= 0) ls->fid[level] = id;
  return id;  /* 0: out of memory, the stack ends here */
}

/* -- Frames captured at the signal ---------------------------------------------- */

static int same_frame(const ljp_lframe *a, const ljp_lframe *b)
{
  return a->fn == b->fn && a->slot == b->slot;
}

static int same_frame_sp(const ljp_spine *a, const ljp_lframe *b)
{
  return a->fn == b->fn && a->slot == b->slot;
}

/* The live level of the nearest spine entry of r (ring.h) still live at
** the same slot of the same stack, or -1. */
static int spine_join(const ljp_record *r, const ljp_lframe *live, int m,
                      uintptr_t lstack, uintptr_t L, int *ent)
{
  int e, j;
  /* the same thread: its stack may have been reallocated since (slots
  ** are kept) */
  if (lstack != r->lstack && L != r->lthread) return -1;
  for (e = 0; e < r->nspine; e++)
    for (j = 0; j < m; j++)
      if (same_frame_sp(&r->spine[e], &live[j])) {
        *ent = e;
        return j;
      }
  return -1;
}

/* Remember the names of the innermost live Lua frames, for samples that
** will capture them after they have returned. */
static void learn_live(ljp_ctx *ctx, lua_State *L, const ljp_lframe *live,
                       int m)
{
  int j;
  for (j = 0; j < m && j < LEARN_TOP; j++) {
    lua_Debug ar;
    if (live[j].kind != 0 || ljp_fnames_has(&ctx->fnames, live[j].fn))
      continue;
    if (!lua_getstack(L, j, &ar) || !lua_getinfo(L, "Snf", &ar)) break;
    if ((uintptr_t)lua_topointer(L, -1) == live[j].fn)
      ljp_fnames_learn(&ctx->fnames, L, -1, ar.source, ar.name,
                       ar.linedefined);
    lua_pop(L, 1);
  }
}

/* Is live frame f the previous safe point's p, named the same way? The
** same function (for a Lua frame, at the same PC, of a prototype with the
** same signature: level_entry's key) at the same slot. */
static int same_as_prev(const ljp_lframe *f, const prevent *p)
{
  if (f->kind != p->kind || f->fn != p->fn || f->slot != p->slot) return 0;
  if (f->kind != 0) return f->cf == p->cf;
  return f->pc && f->pc == p->pc && ljp_proto_sig(ljp_fn_bc(f->fn)) == p->sig;
}

/* The levels of the live stack that are the previous safe point's, from
** the bottom up while both stacks agree (both walked to their bottom, on
** the same Lua stack), get the frame ids they had: a level's id depends
** on its frame and its caller's only (live_frame), and those are the
** same. A program's outer levels rarely change between two samples: the
** ids are not looked up again, level by level, in the caches. */
static void reuse_prev(ljp_ctx *ctx, livestack *ls)
{
  struct ljp_namecache *c = ctx->namecache;
  int k, n;
  if (!c) return;
  c->prev_same = 0;
  if (!c->prev_m || !ls->bottom || ls->stack != c->prev_stack ||
      !ljp_lsl.lines_ok)
    return;
  n = ls->m < c->prev_m ? ls->m : c->prev_m;
  for (k = 1; k <= n; k++) {
    const ljp_lframe *f = &ls->f[ls->m - k];
    const prevent *p = &c->prev[c->prev_m - k];
    if (!same_as_prev(f, p)) break;
    ls->fid[ls->m - k] = p->fid;
  }
  c->prev_same = k - 1;
}

/* At the end of a safe point: its live stack and the ids its records
** gave its levels, for the next one (reuse_prev). */
void ljp_frames_end(ljp_ctx *ctx, ljp_frames_pass *pass)
{
  struct ljp_namecache *c = ctx->namecache;
  const livestack *ls = &pass->ls;
  int i, top;
  if (!c || !ls->walked) return;   /* (not walked: the one before stays) */
  if (ls->m <= 0 || !ls->bottom || !ljp_lsl.lines_ok) {
    c->prev_m = 0;
    return;
  }
  /* The outermost levels that were prev's are there already, at the
  ** same places when the depth is the same: only their ids may be new. */
  top = c->prev_m == ls->m ? ls->m - c->prev_same : ls->m;
  for (i = top; i < ls->m; i++)
    if (ls->fid[i]) c->prev[i].fid = ls->fid[i];
  for (i = 0; i < top; i++) {
    const ljp_lframe *f = &ls->f[i];
    prevent *p = &c->prev[i];
    p->fn = f->fn;
    p->pc = f->pc;
    p->cf = f->kind != 0 ? f->cf : 0;
    p->sig = f->kind == 0 && f->fn ? ljp_proto_sig(ljp_fn_bc(f->fn)) : 0;
    p->slot = f->slot;
    p->kind = f->kind;
    p->fid = ls->fid[i];
  }
  c->prev_m = ls->m;
  c->prev_stack = ls->stack;
}

static void live_walk(ljp_ctx *ctx, lua_State *L, livestack *ls)
{
  if (ls->walked) return;
  ls->walked = 1;
  ls->curline = -2;
  ls->m = ljp_luastack_live(L, ls->f, LIVE_MAX, &ls->bottom, &ls->stack);
  if (ls->m > 0) {
    memset(ls->fid, 0, (size_t)ls->m * sizeof(ls->fid[0]));
    reuse_prev(ctx, ls);
    learn_live(ctx, L, ls->f, ls->m);
  }
}

/* Does captured Lua frame f run the prototype trace ti started in? (The
** first instruction read at the signal names the prototype.) */
static int runs_trace_start(const ljp_trinfo *ti, const ljp_lframe *f)
{
  return ti && ti->bc && f->kind == 0 && f->bc == ti->bc;
}

static void name_trace_start(ljp_ctx *ctx, lua_State *L, livestack *ls,
                             ljp_trinfo *ti);

/* A returned Lua frame f that fnames does not know and that is not of
** the sample's trace's start prototype: named from its prototype when
** that is shown alive another way. Another trace started in it (every
** trace's object keeps its start prototype: the events used to teach
** fnames every trace's start function), or a variable or field holds a
** function of it (found by value; that function is then learnt). The
** names go into s; 0 when the prototype cannot be shown alive. */
static int name_returned(ljp_ctx *ctx, lua_State *L, livestack *ls,
                         const ljp_lframe *f, ljp_synframe *s)
{
  struct ljp_namecache *c = caches(ctx);
  retent *r;
  ljp_trinfo *t;
  int32_t tr;
  int bv = 0;
  char buf[128];
  if (!c || !ctx->tr.mem || !f->bc) return 0;
  r = &c->ret[ljp_hash_addr(f->bc) & (RET_CACHE - 1)];
  if (r->bc != f->bc) {
    memset(r, 0, sizeof(*r));
    r->bc = f->bc;
  }
  if (ctx->safepoints >= r->retry_sp &&
      (tr = ljp_tm_find_proto(ctx->vm_g, f->bc, r->trace)) > 0 &&
      (t = ljp_trace_info(ctx, L, tr)) != NULL && t->bc == f->bc) {
    r->trace = tr;
    r->gap = 0;
    if (!t->name) name_trace_start(ctx, L, ls, t);
    s->source = t->source;
    s->name = t->name;
    s->linedefined = t->linedefined;
    return 1;
  }
  if (ctx->safepoints >= r->retry_sp) {
    r->gap = r->gap ? (r->gap < RET_GAP_MAX ? r->gap * 2 : RET_GAP_MAX) : 1;
    r->retry_sp = ctx->safepoints + r->gap;
  }
  if (!r->byval_none &&
      (bv = ljp_lname_by_value(L, f->bc, buf, sizeof(buf))) > 0) {
    lua_Debug ar;
    const ljp_fname *e;
    int fi = lua_gettop(L);
    lua_pushvalue(L, fi);
    if (lua_getinfo(L, ">S", &ar) && ar.source)
      ljp_fnames_learn(&ctx->fnames, L, fi, ar.source, buf, ar.linedefined);
    e = ljp_fnames_peek(&ctx->fnames, (uintptr_t)lua_topointer(L, fi), f->bc);
    lua_pop(L, 1);
    if (e) {
      s->source = e->source;
      s->name = e->name;
      s->linedefined = e->linedefined;
      return 1;
    }
  }
  if (bv >= 0) r->byval_none = 1;   /* (a deferred search: asked again) */
  return 0;
}

/* A frame a trace had inlined that no other way names: from its
** prototype, which the trace keeps alive (its function is a constant of
** the trace read at this safe point): the name learnt for the prototype,
** else none (chunk:line). */
static int name_inlined(ljp_ctx *ctx, const ljp_lframe *f, ljp_synframe *s)
{
  const char *src = f->bc ? ljp_tm_chunkname(f->bc) : NULL;
  if (!src) return 0;
  s->source = src;
  s->name = ljp_fnames_proto_name(&ctx->fnames, f->bc, ljp_proto_sig(f->bc));
  if (s->name && !*s->name) s->name = NULL;
  s->linedefined = ljp_proto_firstline(f->bc);
  return 1;
}

/* The leaf of a record whose Lua frames were captured at the signal: the
** frames still live at this safe point (same function at the same slot of
** the same stack, from the outermost captured one up) are shown as real
** levels, the captured frames above them as synthetic frames named from
** what live frames showed before. A captured frame that cannot be named
** ends the stack there (an honest shorter stack, never another path).
** Returns -1 when the safe point cannot compare (use the old way). */
static int leaf_exact(ljp_ctx *ctx, lua_State *L, const ljp_record *r,
                      livestack *ls, ljp_leaf *lf)
{
  const ljp_lframe *live = ls->f;
  int m, lbottom, n = r->nlua, i, j = -1, top, k, e = 0;
  uintptr_t lstack;
  const ljp_trinfo *ti = r->vmstate == 'N' ? ljp_trace_info(ctx, L, r->trace)
                                           : NULL;
  memset(lf, 0, sizeof(*lf));
  live_walk(ctx, L, ls);
  m = ls->m;
  lbottom = ls->bottom;
  lstack = ls->stack;
  if (m < 0) return -1;
  /* The outermost captured frame among the live ones. */
  if (lstack == r->lstack) {
    for (j = m - 1; j >= 0; j--)
      if (same_frame(&r->lua[n - 1], &live[j])) break;
    if (j >= 0 && (r->lflags & LJP_LUA_BOTTOM) && lbottom && j != m - 1)
      j = -1;                       /* both whole stacks: bottoms align */
  }
  i = n - 1;
  if (j >= 0) {                     /* walk up while the frames agree */
    while (i > 0 && j > 0 && same_frame(&r->lua[i - 1], &live[j - 1])) {
      i--;
      j--;
    }
    lf->skip = j;                   /* live levels above are hidden */
    top = i;                        /* captured frames above: synthetic */
  } else if ((j = spine_join(r, live, m, lstack, (uintptr_t)L, &e)) >= 0) {
    /* The captured frames all returned, a frame below them is still
    ** live: its live levels are their callers; frames between that were
    ** not captured are marked (none when it is the one right below). */
    lf->skip = j;
    lf->truncated = r->spine[e].dist != 0;
    top = n;
  } else {
    if (!lbottom) return -1;        /* cannot hide what was not counted */
    lf->skip = m;                   /* nothing in common */
    top = n;
    /* a capture that did not reach the bottom: its callers are unknown */
    lf->truncated = n == LJP_LUA_MAX && !(r->lflags & LJP_LUA_BOTTOM);
  }
  /* Synthetic frames, outermost first into syn[top-1 .. 0]; stop at the
  ** first one that cannot be named (drop it and everything above). */
  for (k = top - 1; k >= 0; k--) {
    const ljp_lframe *f = &r->lua[k];
    ljp_synframe *s = &lf->syn[k];
    if (f->kind != 0) {
      if (!f->cf) break;
      s->kind = LJP_LEAF_C;
      s->cfunc = (lua_CFunction)f->cf;
      s->ffid = f->kind > 1 ? f->kind : 0;
      ljp_name_cfunc(&ctx->cnames, L, s->cfunc, &ctx->scratch);
    } else {
      const ljp_fname *e = ljp_fnames_get(&ctx->fnames, L, f->fn);
      s->kind = LJP_LEAF_LUA;
      if (e) {
        s->source = e->source;
        s->name = e->name;
        s->linedefined = e->linedefined;
        s->fgen = e->gen;
      } else if (runs_trace_start(ti, f)) {
        /* A function of the prototype the sample's trace started in,
        ** which that trace keeps alive: named from the prototype. */
        s->source = ti->source;
        s->name = ti->name;
        s->linedefined = ti->linedefined;
      } else if (!name_returned(ctx, L, ls, f, s) &&
                 !(f->inl && name_inlined(ctx, f, s))) {
        break;
      }
      /* Its line from its PC at the signal (read through its prototype,
      ** alive as just shown); in a trace, the innermost frame runs the
      ** trace's own code: the trace's start line. */
      s->line = f->pc && f->bc ? ljp_luastack_line_pc(f->bc, f->pc) : -1;
      if (s->line <= 0)
        s->line = k == 0 && runs_trace_start(ti, f) ? ti->line : 0;
    }
  }
  if (k >= 0) {                     /* syn[k] unnamed: keep those below it */
    int keep = top - 1 - k;
    memmove(&lf->syn[0], &lf->syn[k + 1], (size_t)keep * sizeof(lf->syn[0]));
    lf->nsyn = keep;
  } else {
    lf->nsyn = top;
  }
  if (top < n && r->lua[top].kind == 0 && r->lua[top].pc) {
    /* The innermost live frame shown: where it was at the signal (it
    ** may have moved on since its callee returned), or in a trace the
    ** line its snapshot or record map gave (inline_frames). */
    int line = ljp_luastack_line(r->lua[top].fn, r->lua[top].pc);
    if (line > 0) lf->line = line;
    else if (lf->nsyn == 0 && top == 0 && runs_trace_start(ti, &r->lua[0]))
      lf->line = ti->line;
  } else if (lf->nsyn == 0 && top == 0 && runs_trace_start(ti, &r->lua[0])) {
    lf->line = ti->line;            /* the trace's start line */
  }
  return 0;
}

/* -- A record's stack ------------------------------------------------------------- */

static uint32_t syn_frame(ljp_ctx *ctx, const ljp_synframe *s)
{
  struct ljp_namecache *c = ctx->namecache;
  syntextent *t = c && s->fgen ? &c->syntext[s->fgen & (SYNTEXT_CACHE - 1)]
                               : NULL;
  uint32_t src, nm;
  if (s->kind == LJP_LEAF_C)   /* a fast function's id kept */
    return c_frame(ctx, LJP_FR_CNAMED, (uintptr_t)s->cfunc, s->ffid);
  if (t && t->gen == s->fgen) {
    src = t->source;
    nm = t->name;
  } else {
    src = text(ctx, s->source);
    nm = text(ctx, s->name);
    if (t && src && (nm || !s->name)) {
      t->gen = s->fgen;
      t->source = src;
      t->name = nm;
    }
  }
  return lua_frame(ctx, src, nm, s->linedefined,
                   s->line > 0 ? s->line : s->linedefined);
}

/* ljprof's own frame, "[ljprof]" (a native frame: symbols.c names every
** frame of ljprof's code so). */
static uint32_t own_frame(ljp_ctx *ctx)
{
  if (!ctx->own_frame) {
    ljp_frame f;
    memset(&f, 0, sizeof(f));
    f.kind = LJP_FR_NATIVE;
    f.source = text(ctx, "[ljprof]");
    ctx->own_frame = f.source ? ljp_store_frame(&ctx->store, &f) : 0;
  }
  return ctx->own_frame;
}

/* A frame named by text alone: "[truncated]" (Lua frames that were not
** captured, between the frames of a sample and the callers still live at
** its safe point, or the root when none is known) and "[host]" (a tick
** in the host's own code, ring.h's LJP_LUA_HOST, with no native frame of
** its own). */
static uint32_t marker_frame(ljp_ctx *ctx, const char *what)
{
  ljp_frame f;
  memset(&f, 0, sizeof(f));
  f.kind = LJP_FR_NATIVE;
  f.source = text(ctx, what);
  return f.source ? ljp_store_frame(&ctx->store, &f) : 0;
}

/* Was the time of record r ljprof's own work (the safe point, a trace
** event, ljprof.record starting, a wrapper's own code)? Then it is shown
** once, as the stack "[ljprof]", never inside the program's stacks: its
** native frames hold ljprof's frame, or its PC or its leaf C function
** lies in ljprof's library. */
static int own_work(ljp_ctx *ctx, lua_State *L, livestack *ls, int selfpc,
                    const ljp_leaf *lf, const uint32_t *nat, int nn)
{
  int i;
  uintptr_t cf = 0;
  if (selfpc) return 1;
  for (i = 0; i < nn; i++)
    if (nat[i] == own_frame(ctx)) return 1;
  if (lf->nsyn) {
    if (lf->syn[0].kind == LJP_LEAF_C) cf = (uintptr_t)lf->syn[0].cfunc;
  } else if (ls) {
    live_walk(ctx, L, ls);
    if (ls->m > lf->skip && ls->f[lf->skip].kind == 1)
      cf = ls->f[lf->skip].cf;
  }
  return cf && ljp_objects_is_self(cf);
}

/* The stack of leaf lf: the native frames nat[0..nn), the synthetic
** frames, then the live levels from lf->skip on (ls NULL: none), the
** innermost |depth| of them. *leaf: the innermost frame that is not
** native (0: none). */
static uint32_t stack_of(ljp_ctx *ctx, lua_State *L, livestack *ls,
                         int selfpc, const ljp_leaf *lf,
                         const uint32_t *nat, int nn, uint32_t *leaf)
{
  uint32_t ids[LJP_STACK_FRAMES];
  int depth = ctx->opt.stack_depth, limit, n = 0, i, level;
  if (own_work(ctx, L, ls, selfpc, lf, nat, nn)) {
    *leaf = ids[0] = own_frame(ctx);
    return ljp_store_stack(&ctx->store, ids, ids[0] ? 1 : 0);
  }
  limit = depth == INT32_MIN ? LJP_STACK_FRAMES : depth < 0 ? -depth : depth;
  if (limit > LJP_STACK_FRAMES) limit = LJP_STACK_FRAMES;
  *leaf = 0;
  for (i = 0; i < nn && n < limit; i++) ids[n++] = nat[i];
  for (i = 0; i < lf->nsyn && n < limit; i++) {
    if (!(ids[n] = syn_frame(ctx, &lf->syn[i]))) break;  /* out of memory */
    if (!*leaf) *leaf = ids[n];
    n++;
  }
  if (lf->truncated && i == lf->nsyn && n < limit &&
      !(ids[n] = marker_frame(ctx, "[truncated]")))
    i = -1;                          /* out of memory: the stack ends */
  else if (lf->truncated && i == lf->nsyn && n < limit)
    n++;
  for (level = lf->skip; ls && i == lf->nsyn && n < limit; level++) {
    int line = level == lf->skip ? lf->line : 0;
    uint32_t id = known_frame(ls, level, line);   /* (without the call) */
    if (!id) id = live_frame(ctx, L, ls, level, line);
    if (!id) break;
    ids[n++] = id;
    if (!*leaf) *leaf = id;
  }
  if (!*leaf) {  /* the depth asked for ends among the native frames */
    if (lf->nsyn) *leaf = syn_frame(ctx, &lf->syn[0]);
    else if (ls) *leaf = live_frame(ctx, L, ls, lf->skip, lf->line);
  }
  return ljp_store_stack(&ctx->store, ids, (uint32_t)n);
}

/* The function of frame id: "chunk:firstline" for Lua, the name for C. */
static uint32_t func_text(ljp_ctx *ctx, uint32_t id)
{
  ljp_buf *b = &ctx->scratch;
  ljp_frame f;
  ljp_store_frame_get(&ctx->store, id, &f);
  b->n = 0;
  if (f.kind == LJP_FR_LUA) {
    ljp_put_location(b, ljp_store_text(&ctx->store, f.source)->s,
                     f.linedefined, f.linedefined);
  } else if (f.kind == LJP_FR_NATIVE) {
    return f.source;
  } else {
    ljp_put_cfunc(b, (lua_CFunction)(uintptr_t)f.ptr);
  }
  return ljp_store_intern(&ctx->store, b->b, b->n);
}

/* func_text, cached by the frame id (the store's ids never change). */
static uint32_t func_of(ljp_ctx *ctx, uint32_t id)
{
  struct ljp_namecache *c = caches(ctx);
  funcent *e = c ? &c->func[id & (FUNC_CACHE - 1)] : NULL;
  uint32_t fn;
  if (!id) return 0;
  if (e && e->fid == id) return e->func;
  fn = func_text(ctx, id);
  if (e && fn) {
    e->fid = id;
    e->func = fn;
  }
  return fn;
}

/* The trace's location text, made once per trace info (kept in it with
** the stack keys' lifetime: traces.c clears both). */
static uint32_t trace_loc(ljp_ctx *ctx, lua_State *L, int32_t trace)
{
  ljp_trinfo *ti = ljp_trace_info(ctx, L, trace);
  if (!ti) return 0;
  if (ti->tloc) return ti->tloc;
  ctx->scratch.n = 0;
  ljp_put_location(&ctx->scratch, ti->source, ti->linedefined, ti->line);
  return ti->tloc = ljp_store_intern(&ctx->store, ctx->scratch.b,
                                     ctx->scratch.n);
}

/* Records completed by one safe point usually share one leaf; a few
** distinct leaves are resolved once each. */
#define NVARIANT LJP_VM_NVARIANT  /* vm_luajit.h's variant */

/* A prototype (bc, its signature, its chunk's text id and first line)
** for the run's end, with its name by value (NULL: to be searched for);
** once per prototype. */
static void late_add(ljp_ctx *ctx, uintptr_t bc, uint64_t sig,
                     uint32_t source, int32_t linedefined, const char *name)
{
  struct ljp_namecache *c = caches(ctx);
  uint32_t i;
  lateent *e;
  if (!c || !bc || !source || c->nlate >= LATE_MAX) return;
  i = ljp_hash_addr(bc) & (LATE_IX - 1);
  while (c->late_ix[i]) {
    if (c->late[c->late_ix[i] - 1].bc == bc) return;
    i = (i + 1) & (LATE_IX - 1);
  }
  c->late_ix[i] = (uint16_t)(c->nlate + 1);
  e = &c->late[c->nlate++];
  e->bc = bc;
  e->sig = sig;
  e->source = source;
  e->name = name ? text(ctx, name) : 0;
  e->linedefined = linedefined;
  if (!name) ctx->names_late++;
}

static void late_add_trace(ljp_ctx *ctx, const ljp_trinfo *ti, uint64_t sig,
                           const char *name)
{
  if (ti->source)
    late_add(ctx, ti->bc, sig, text(ctx, ti->source), ti->linedefined, name);
}

/* A trace read from memory whose start function has no name yet: the
** name a function of that prototype was called by, as a live frame
** showed it (now or at an earlier safe point: the live stack's walk
** teaches fnames its innermost frames); else, once per trace, the name
** of a variable or field that holds one (a function that runs only in
** traces linked to each other may never be live at a safe point): in the
** index or the live levels now, in the globals and loaded modules at the
** run's end (late_add). The prototype is alive: the trace, read at this
** safe point, holds it. */
static void name_trace_start(ljp_ctx *ctx, lua_State *L, livestack *ls,
                             ljp_trinfo *ti)
{
  const char *name, *byval;
  char buf[128];
  uint64_t sig = ljp_proto_sig(ti->bc);
  int j;
  live_walk(ctx, L, ls);
  byval = name = ljp_fnames_proto_name(&ctx->fnames, ti->bc, sig);
  for (j = 0; !name && j < ls->m; j++) {
    lua_Debug ar;
    if (ls->f[j].kind != 0 || ls->f[j].bc != ti->bc) continue;
    if (lua_getstack(L, j, &ar) && lua_getinfo(L, "n", &ar)) name = ar.name;
    break;
  }
  if (!name && !ti->name_tried &&
      !ljp_fnames_proto_searched(&ctx->fnames, ti->bc, sig)) {
    /* (once per prototype: the index and the live levels, no walk of the
    ** globals; "" when none is found. Not found, or the search waiting
    ** after many misses (-1): searched for again at the run's end,
    ** ljp_frames_name_late) */
    int bv = ljp_lname_live(L, ti->bc, buf, sizeof(buf));
    ti->name_tried = 1;
    if (bv > 0) {
      byval = name = buf;
      lua_pop(L, 1);
    }
    if (bv >= 0)
      ljp_fnames_proto_learn(&ctx->fnames, ti->bc, name ? name : "");
    if (!name) late_add_trace(ctx, ti, sig, NULL);
  }
  if (byval && *byval) late_add_trace(ctx, ti, sig, byval);
  if (name) ti->name = strdup(name);
}

void ljp_frames_name_late(ljp_ctx *ctx, lua_State *L)
{
  struct ljp_namecache *c = ctx->namecache;
  ljp_late_name *v;
  uint32_t i, n = 0;
  char buf[128];
  if (!c || !c->nlate || !L) return;
  if (!(v = malloc(c->nlate * sizeof(*v)))) return;
  if (ctx->names_late) ljp_lname_search_all(L);
  for (i = 0; i < c->nlate; i++) {
    const lateent *e = &c->late[i];
    /* found: a function of it is alive (the index holds it), so its
    ** prototype is, and the signature tells it is the one sampled */
    if (e->name) {
      v[n].name = e->name;
    } else if (ljp_lname_indexed(L, e->bc, buf, sizeof(buf)) > 0 &&
               ljp_proto_sig(e->bc) == e->sig &&
               (v[n].name = text(ctx, buf))) {
      ctx->names_late_found++;
    } else {
      continue;
    }
    v[n].source = e->source;
    v[n].linedefined = e->linedefined;
    n++;
  }
  ljp_store_name_lua(&ctx->store, v, n);
  free(v);
  c->nlate = 0;
  memset(c->late_ix, 0, sizeof(c->late_ix));
}

/* (Inlined into ljp_frames_record, as it was into the record loop before
** the split: called per record, a call of its own cost completion +2.5%
** per signal under callgrind.) */
static inline __attribute__((always_inline)) const variant *
variant_for(ljp_ctx *ctx, lua_State *L, const ljp_record *r, livestack *ls,
            variant *v, int *nv)
{
  uintptr_t cf = r->vmstate == 'C' ? r->cfunc : 0;
  int32_t tr = r->vmstate == 'N' ? r->trace : 0;
  ljp_trinfo *ti = tr ? ljp_trace_info(ctx, L, tr) : NULL;
  uint32_t nat[LJP_NATIVE_MAX], leaf;
  int nn = ljp_native_names(ctx, L, r, nat);
  int selfpc = ljp_objects_is_self(r->pc);
  int host = (r->lflags & LJP_LUA_HOST) != 0;
  ljp_leaf lf;
  variant *e;
  int i, exact = -1;
  if (ti && !ti->name && ctx->tr.mem) name_trace_start(ctx, L, ls, ti);
  if (host && !nn && (nat[0] = marker_frame(ctx, "[host]")) != 0) nn = 1;
  for (i = 0; i < *nv; i++)
    if (v[i].cfunc == cf && v[i].trace == tr && v[i].nn == nn &&
        v[i].selfpc == selfpc && v[i].host == host &&
        !memcmp(v[i].nat, nat, (size_t)nn * sizeof(uint32_t)) &&
        v[i].nlua == r->nlua && v[i].lstack == r->lstack &&
        v[i].nspine == r->nspine &&
        !memcmp(v[i].spine, r->spine, (size_t)r->nspine * sizeof(r->spine[0])) &&
        !memcmp(v[i].lua, r->lua, (size_t)r->nlua * sizeof(r->lua[0])))
      return &v[i];
  e = &v[*nv < NVARIANT ? (*nv)++ : NVARIANT - 1];
  e->cfunc = cf;
  e->trace = tr;
  e->selfpc = selfpc;
  e->host = host;
  e->nn = nn;
  memcpy(e->nat, nat, (size_t)nn * sizeof(uint32_t));
  e->tloc = tr ? trace_loc(ctx, L, tr) : 0;
  e->nlua = r->nlua;
  e->nspine = r->nspine;
  memcpy(e->spine, r->spine, (size_t)r->nspine * sizeof(r->spine[0]));
  e->lstack = r->lstack;
  memcpy(e->lua, r->lua, (size_t)r->nlua * sizeof(r->lua[0]));
  if (host) {            /* the host's own frames only, never the live ones */
    memset(&lf, 0, sizeof(lf));
    e->stack = stack_of(ctx, L, NULL, selfpc, &lf, nat, nn, &leaf);
    e->func = func_of(ctx, leaf ? leaf : nn ? nat[0] : 0);
    return e;
  }
  if (!r->nlua || (exact = leaf_exact(ctx, L, r, ls, &lf)) != 0)
    leaf_for(ctx, L, r, &lf);
  if (exact != 0 && ti && lf.nsyn && lf.syn[0].kind == LJP_LEAF_LUA &&
      ti->have_key && !nn && !selfpc) {
    e->stack = ti->stack;  /* start function not on the stack */
    e->func = ti->func;
    return e;
  }
  e->stack = stack_of(ctx, L, ls, selfpc, &lf, nat, nn, &leaf);
  e->func = func_of(ctx, leaf);
  if (exact != 0 && ti && !lf.nsyn && !nn && !selfpc) {
    ti->have_key = 1;
    ti->stack = e->stack;
    ti->func = e->func;
  }
  return e;
}

/* The function-change checks of trace object T (alive), or NULL. */
static const profent *prof_sites(ljp_ctx *ctx, uintptr_t T)
{
  struct ljp_namecache *c = caches(ctx);
  uintptr_t mc;
  uint32_t sz, ns;
  profent *e;
  int i;
  if (!c || !T) return NULL;
  if (!c->prof && !(c->prof = calloc(PROF_CACHE, sizeof(*c->prof))))
    return NULL;
  mc = *(const uintptr_t *)(T + (uintptr_t)ljp_tml.t_mcode);
  sz = *(const uint32_t *)(T + (uintptr_t)ljp_tml.t_szmcode);
  ns = *(const uint16_t *)(T + (uintptr_t)ljp_tsl.t_nsnap);
  for (i = 0; i < PROF_CACHE; i++) {
    e = &c->prof[i];
    if (e->T == T && e->mcode == mc && e->size == sz && e->nsnap == ns)
      return e->n >= 0 ? e : NULL;
  }
  e = &c->prof[c->prof_next++ % PROF_CACHE];
  e->T = T;
  e->mcode = mc;
  e->size = sz;
  e->nsnap = ns;
  e->n = ljp_ts_profsites(T, e->ofs, PROF_MAX);
  return e->n >= 0 ? e : NULL;
}

/* The PC of the code that follows snapshot sn of trace T, for its
** innermost frame (function fn, the snapshot's PC pc): tracesnap.h's
** ljp_ts_code_pc, cached. */
static uintptr_t code_pc(ljp_ctx *ctx, uintptr_t T, int sn, uintptr_t fn,
                         uintptr_t pc)
{
  struct ljp_namecache *c = caches(ctx);
  uintptr_t mc;
  codepcent *e;
  if (sn <= 0 || !pc) return pc;
  if (!c || (!c->codepc &&
             !(c->codepc = calloc(CODEPC_CACHE, sizeof(*c->codepc)))))
    return ljp_ts_code_pc(T, sn, ljp_fn_bc(fn), pc);
  mc = *(const uintptr_t *)(T + (uintptr_t)ljp_tml.t_mcode);
  e = &c->codepc[(ljp_hash_addr(T ^ mc) + (uint32_t)sn * 0x9e3779b1u) &
                 (CODEPC_CACHE - 1)];
  if (e->T != T || e->mcode != mc || e->sn != sn || e->pc != pc) {
    e->T = T;
    e->mcode = mc;
    e->sn = sn;
    e->pc = pc;
    e->code = ljp_ts_code_pc(T, sn, ljp_fn_bc(fn), pc);
  }
  return e->code;
}

/* The frames a trace had inlined where record r's time was spent (the
** snapshot whose code holds its PC, or for a C function called from trace
** code the return address into it: tracesnap.h's rules), put above the
** trace's base frame that the signal captured, which gets its PC there
** (the snapshot's line, not the trace's start line). Only while the trace
** is still the object the signal saw (the caller checked tobj). */
static inline __attribute__((always_inline)) void  /* (as variant_for) */
inline_frames(ljp_ctx *ctx, ljp_record *r)
{
  ljp_tsframe f[LJP_TS_MAX];
  uintptr_t basepc = 0, mpc = r->pc;
  const profent *pe;
  int n, i, keep, est, recorded, sn = -1;
  int off = ctx->opt.inline_frames == LJPROF_INLINE_OFF;
  /* LJPROF_INLINE=certain|split: other rules, for measurements */
  static _Atomic int certain = -1, split = -1;
  if (!r->tobj || !r->nlua || r->lua[0].kind != 0 || r->lua[0].inl)
    return;
  /* The snapshot layouts, learnt here once per process by the first
  ** record in compiled code, before it is decoded: it and the rest of its
  ** safe point's records get the trace's inlined frames (a trace entered
  ** once completes all of its samples at the one safe point after it;
  ** learnt after that point, they had none: 100% on the loop's function).
  ** Safe in the middle of a completion, at a safe point (in a recording
  ** too) or at stop: vmlearn.c learns in a Lua state of ljprof's own,
  ** never in L, and no handler merges into the records claimed. */
  if (!ljp_tsl.ok) {
    if (!ljp_tsl.tried) ljp_vm_learn_snapshots();
    if (!ljp_tsl.ok) return;
  }
  if (!ljp_vm_trace_holds(r->tobj, mpc)) {     /* C called from the trace */
    if (!r->tret || !ljp_vm_trace_holds(r->tobj, r->tret - 1)) return;
    mpc = r->tret - 1;
  }
  pe = ctx->jitmode_on ? prof_sites(ctx, r->tobj) : NULL;
  /* inline=recorded: the frames the code at mpc was recorded in, where
  ** the record map knows them (irmap.h); else the snapshots' rule. */
  n = ctx->irmap && ctx->opt.inline_frames == LJPROF_INLINE_RECORDED
          ? ljp_irmap_frames(ctx, r->trace, r->tobj, mpc, f, LJP_TS_MAX,
                             &basepc, &est)
          : -1;
  if (n >= 0 && basepc && !ljp_ts_pc_in(r->lua[0].bc, basepc)) n = -1;
  recorded = n >= 0;
  if (!recorded) n = ljp_ts_sample_frames(r->tobj, mpc,
                     ctx->jitmode_on ? LJP_TS_EXACT
                     : off ? LJP_TS_OWN
                     : ljp_env_is(&certain, "LJPROF_INLINE", "certain")
                         ? LJP_TS_CERTAIN
                     : ljp_env_is(&split, "LJPROF_INLINE", "split")
                         ? LJP_TS_SPLIT : LJP_TS_OWN,
                     f, LJP_TS_MAX, &basepc, &est,
                     pe ? pe->ofs : NULL, pe ? pe->n : -1, &sn);
  /* The frames join the captured base frame only where the snapshot's
  ** base PC lies in its function (a check: the capture's base is the
  ** trace's, but for a linking trace's last bytes, tracesnap.c). */
  if (n < 0 || (basepc && !ljp_ts_pc_in(r->lua[0].bc, basepc))) {
    if (!off) ctx->inline_undecoded++;
    return;
  }
  /* Lines: the innermost frame's PC from a snapshot is where an exit
  ** would resume; the code that follows was recorded from another
  ** bytecode after a comparison, a loop's check or a function's entry.
  ** (The record map's PCs are the recorded bytecodes' own.) */
  if (!recorded && sn > 0) {
    if (n) f[0].pc = code_pc(ctx, r->tobj, sn, f[0].fn, f[0].pc);
    else if (basepc) basepc = code_pc(ctx, r->tobj, sn, r->lua[0].fn, basepc);
  }
  if (!r->lua[0].pc) r->lua[0].pc = basepc;
  if (off) return;          /* inline=off: the line only, no frames */
  if (!n) return;
  keep = r->nlua;
  if (keep + n > LJP_LUA_MAX) {        /* the outermost captured ones go */
    keep = LJP_LUA_MAX - n;
    r->lflags &= (uint8_t)~LJP_LUA_BOTTOM;
    for (i = 0; i < r->nspine; i++)    /* the spine lies further below */
      r->spine[i].dist += (uint32_t)(r->nlua - keep);
  }
  memmove(&r->lua[n], &r->lua[0], (size_t)keep * sizeof(r->lua[0]));
  for (i = 0; i < n; i++) {
    ljp_lframe *l = &r->lua[i];
    memset(l, 0, sizeof(*l));
    l->fn = f[i].fn;
    l->bc = ljp_fn_bc(f[i].fn);
    l->pc = f[i].pc;
    l->slot = r->lua[n].slot + (uint32_t)f[i].slot;
    l->inl = 1;
  }
  r->nlua = (uint8_t)(n + keep);
  ctx->inline_samples++;
  if (recorded) ctx->inline_recorded++;
  if (est) ctx->inline_estimated++;
}

/* -- The record loop's VM part (complete.c) ------------------------------ */

void ljp_frames_begin(ljp_ctx *ctx, lua_State *L, ljp_frames_pass *p)
{
  p->ls.walked = 0;
  p->nv = 0;
  if (ctx->exact_on && ljp_luastack_checking()) {
    int ok = ljp_luastack_check(L);
    if (ok >= 0) {
      ctx->stack_checks++;
      if (!ok) ctx->stack_mismatches++;
    }
  }
}

void ljp_frames_record(ljp_ctx *ctx, lua_State *L, ljp_record *r,
                       ljp_frames_pass *p)
{
  const variant *e;
  /* A trace freed since the signal (a flush) is not named after the
  ** trace that took its number. */
  if (r->vmstate == 'N' && ctx->tr.mem && r->tobj &&
      ljp_vm_trace(ctx->vm_g, r->trace) != r->tobj)
    r->trace = 0;
  else if (r->vmstate == 'N')
    ljp_trace_locate(ctx, L, r->pc, &r->trace);
  if (r->vmstate == 'N' && r->trace && ctx->tr.mem) inline_frames(ctx, r);
  e = variant_for(ctx, L, r, &p->ls, p->v, &p->nv);
  r->stack = e->stack;
  r->func = e->func;
  r->tloc = e->tloc;
}

/* -- The trace exit self-check (LJPROF_STACKS=check) -------------------------- */

int ljp_snapcheck_note(ljp_ctx *ctx, int32_t tr, int32_t ex)
{
  uintptr_t T;
  if (!ljp_tsl.ok || !ctx->tr.mem || ctx->snapchk.pending ||
      !(T = ljp_vm_trace(ctx->vm_g, tr)))
    return 0;
  ctx->snapchk.tr = tr;
  ctx->snapchk.ex = ex;
  ctx->snapchk.T = T;
  ctx->snapchk.pending = 1;
  return 1;
}

/* At the first bytecode after a trace exit through snapshot ex, LuaJIT
** has restored exactly the frames that snapshot describes: the decoded
** frames must be the live ones, function by function, at the same slots
** above the same base frame, which must be at the PC the outermost
** decoded frame's link names. Snapshots that cannot be decoded whole are
** not counted (they are not used either). */
void ljp_snapcheck_run(ljp_ctx *ctx, lua_State *L)
{
  ljp_tsframe f[LJP_TS_MAX];
  ljp_lframe live[LJP_TS_MAX + 1];
  uintptr_t basepc, stack;
  int n, m, bottom, i, ok = 1;
  ctx->snapchk.pending = 0;
  if (ljp_vm_trace(ctx->vm_g, ctx->snapchk.tr) != ctx->snapchk.T) return;
  n = ljp_ts_frames(ctx->snapchk.T, ctx->snapchk.ex, f, LJP_TS_MAX, &basepc);
  if (n <= 0) return;
  m = ljp_luastack_live(L, live, n + 1, &bottom, &stack);
  if (m < 0) return;
  if (m < n + 1) {
    ok = 0;
  } else {
    for (i = 0; i < n && ok; i++)
      ok = live[i].kind == 0 && live[i].fn == f[i].fn &&
           live[i].slot - live[n].slot == (uint32_t)f[i].slot;
    ok = ok && live[n].pc == basepc;
  }
  ctx->snap_checks++;
  if (!ok) ctx->snap_mismatches++;
}

/* -- After an exit signal, without the Lua stack ------------------------------ */

/* Record r (its state resolved: complete.c) completed without the Lua
** stack: an honest shorter stack from what is known without one: native
** frames, then in a trace its start function (or the key of the trace's
** last sample that found it on the stack), in a C function that function. 0 when nothing is known. E: a
** thread with no frames of the helper's state, to name C functions in,
** or NULL (then they are not looked up: the export helper, whose state
** lacks the program's modules, must not mark them tried). */
int ljp_frames_offline(ljp_ctx *ctx, lua_State *E, ljp_record *r)
{
  uint32_t nat[LJP_NATIVE_MAX], leaf;
  const ljp_trinfo *ti;
  ljp_leaf lf;
  int nn;
  ti = r->vmstate == 'N' && ljp_trace_learn_offline(ctx, r->trace, r->tobj)
           ? ljp_trace_info(ctx, NULL, r->trace) : NULL;
  r->stack = r->func = r->tloc = 0;
  memset(&lf, 0, sizeof(lf));
  nn = ctx->opt.cb ? 0 : ljp_native_names(ctx, NULL, r, nat);
  if (r->lflags & LJP_LUA_HOST) {            /* the host's own frames */
    if (!nn && !ctx->opt.cb && (nat[0] = marker_frame(ctx, "[host]")) != 0) nn = 1;
  } else if (r->vmstate == 'C' && r->cfunc) {
    if (E)
      ljp_name_cfunc(&ctx->cnames, E, (lua_CFunction)r->cfunc, &ctx->scratch);
    lf.nsyn = 1;
    lf.syn[0].kind = LJP_LEAF_C;
    lf.syn[0].cfunc = (lua_CFunction)r->cfunc;
    lf.syn[0].ffid = r->nlua && r->lua[0].kind > 1 &&
                     r->lua[0].cf == r->cfunc ? r->lua[0].kind : 0;
  } else if (ti && ti->have_key && !nn) {
    r->stack = ti->stack;
    r->func = ti->func;
  } else if (ti && ti->source) {
    lf.nsyn = 1;
    lf.syn[0].kind = LJP_LEAF_LUA;
    lf.syn[0].source = ti->source;
    lf.syn[0].name = ti->name;
    lf.syn[0].linedefined = ti->linedefined;
    lf.syn[0].line = ti->line;
  } else if (!nn) {
    return 0;                                 /* nothing known */
  }
  if (!ctx->opt.cb && !r->stack) {
    r->stack = stack_of(ctx, E, NULL, ljp_objects_is_self(r->pc), &lf, nat,
                        nn, &leaf);
    r->func = func_of(ctx, leaf);
  }
  r->tloc = ti ? trace_loc(ctx, NULL, r->trace) : 0;
  return 1;
}
