/*
** Fast-function ids and C-function names, learnt by walking what Lua can
** reach (see ffid.h): package.loaded, the string and file methods, the
** FFI metamethods, a coroutine.wrap closure. One walk learns three
** process-wide tables (a binary's entry points are the same for every
** state): fast-function ids by function object and by entry point, each
** fast function's Lua name by id, and C-function names by entry point.
** names.c formats what these tables hold.
**
** Rules: normal context only (a mutex and malloc; never the signal
** handler). Lua is called only by ljp_ffid_learn, ljp_ffid_learn_in and
** ljp_ffid_learn_own (in a state of ljprof's own: a run's start learns
** there with LuaJIT's layouts, a dump before any run in one of its own;
** with the VM probe's layout each id is read from the function object,
** without a call) and ljp_ffid_of with a helper; everything
** else reads tables raw and may run at the safe point and in hooks
** (ljp_cname_refresh walks package.loaded with raw reads). The tables
** are guarded by one mutex, ff_mu; ljp_ffid_of's per-OS-thread cache needs
** none.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ffid.h"
#include "objects.h"
#include "vmprobe.h"
#include "ownstate.h"

/* -- Fast-function ids ------------------------------------------------------ */

/* Fast functions print as [builtin#ffid]; the id is only visible through
** jit.util.funcinfo, a Lua call. Calling Lua from the safe-point hook is
** not safe (a module load there crashed LuaJIT), so ids are learnt in
** normal context (ljp_ffid_learn, at start and on first dumpstack): every
** C function reachable from package.loaded, the string and file methods,
** and a coroutine.wrap closure. At a safe point an unknown C function is
** then classified by its entry point: an entry point that no fast
** function uses is a plain C function, one used by exactly one fast
** function gives its id (this covers fast functions created later, like
** coroutine.wrap closures). Only an unseen function object whose entry is
** shared by several fast functions (math.sin/cos/..., band/bor/...) is
** unknown there: it prints as [builtin#?].
**
** Two process-wide tables (the binary's entry points are the same for
** every state), guarded by a mutex; plus a lock-free per-OS-thread cache. */
#define FFCACHE 512
typedef struct ffentry {
  const void *fn;
  lua_CFunction cf;  /* may be NULL: some fast functions have no C entry */
  int ffid;          /* 0: plain C function */
  int used;
} ffentry;
static __thread ffentry ljp_ffcache[FFCACHE];

static pthread_mutex_t ff_mu = PTHREAD_MUTEX_INITIALIZER;
static ffentry *ff_obj;    /* by object (hash on fn), cap ff_objcap */
static uint32_t ff_nobj, ff_objcap;
static ffentry *ff_entry;  /* by entry point (hash on cf); fn unused */
static uint32_t ff_nentry, ff_entrycap;

/* The names' characters (C functions' and fast functions'), in blocks
** freed together (ljp_names_release): a name replaced by a shorter one
** stays in its block. One malloc per name was 0.07 M instructions a
** start (callgrind). Guarded by ff_mu. */
typedef struct nblock { struct nblock *next; size_t used; char b[4064]; } nblock;
static nblock *ff_nblocks;

static char *name_dup(const char *name, size_t len)
{
  nblock *k = ff_nblocks;
  char *p;
  if (len + 1 > sizeof(k->b)) return NULL;
  if (!k || k->used + len + 1 > sizeof(k->b)) {
    if (!(k = malloc(sizeof(*k)))) return NULL;
    k->next = ff_nblocks;
    k->used = 0;
    ff_nblocks = k;
  }
  p = k->b + k->used;
  k->used += len + 1;
  memcpy(p, name, len);
  p[len] = '\0';
  return p;
}

static uint32_t ff_hash(const void *p)
{
  return (uint32_t)(((uintptr_t)p >> 4) * 2654435761u);
}

/* Insert into an open-addressing table; key = fn (by_obj) or cf. */
static void ff_put(ffentry **tab, uint32_t *n, uint32_t *cap, int by_obj,
                   const void *fn, lua_CFunction cf, int ffid)
{
  uint32_t i, h;
  if ((*n + 1) * 2 > *cap) {  /* grow to keep load under 1/2 */
    uint32_t ncap = *cap ? *cap * 2 : 256, j;
    ffentry *t = calloc(ncap, sizeof(ffentry));
    if (!t) return;
    for (j = 0; j < *cap; j++) {
      ffentry *e = &(*tab)[j];
      if (!e->used) continue;
      h = ff_hash(by_obj ? e->fn : (const void *)e->cf) & (ncap - 1);
      while (t[h].used) h = (h + 1) & (ncap - 1);
      t[h] = *e;
    }
    free(*tab);
    *tab = t;
    *cap = ncap;
  }
  h = ff_hash(by_obj ? fn : (const void *)cf) & (*cap - 1);
  for (i = 0; i < *cap; i++, h = (h + 1) & (*cap - 1)) {
    ffentry *e = &(*tab)[h];
    if (!e->used) {
      e->fn = fn; e->cf = cf; e->ffid = ffid; e->used = 1;
      (*n)++;
      return;
    }
    if (by_obj ? (e->fn == fn && e->cf == cf) : e->cf == cf) {
      if (!by_obj && e->ffid != ffid) e->ffid = LJP_FFID_AMBIGUOUS;
      if (by_obj) e->ffid = ffid;
      return;
    }
  }
}

static const ffentry *ff_get(const ffentry *tab, uint32_t cap, int by_obj,
                             const void *fn, lua_CFunction cf)
{
  uint32_t i, h;
  if (!cap) return NULL;
  h = ff_hash(by_obj ? fn : (const void *)cf) & (cap - 1);
  for (i = 0; i < cap && tab[h].used; i++, h = (h + 1) & (cap - 1)) {
    if (tab[h].cf == cf && (!by_obj || tab[h].fn == fn)) return &tab[h];
  }
  return NULL;
}

/* Qualified names of C functions ("string.rep", "cjson.encode", "print"),
** by entry point, learnt on the same walk; a sample that lands in a C
** function shows it as its leaf frame under this name. An entry point
** with several names keeps the shortest (ties: alphabetical), so aliases
** give stable results. Guarded by ff_mu. */
typedef struct cname {
  lua_CFunction cf;
  char *name;
} cname;
static cname *cn_tab;
static uint32_t cn_n, cn_cap;

static void cname_put(lua_CFunction cf, const char *name, size_t len)
{
  uint32_t i, h;
  if (!cf) return;
  if ((cn_n + 1) * 2 > cn_cap) {
    uint32_t ncap = cn_cap ? cn_cap * 2 : 256, j;
    cname *t = calloc(ncap, sizeof(cname));
    if (!t) return;
    for (j = 0; j < cn_cap; j++) {
      if (!cn_tab[j].cf) continue;
      h = ff_hash((const void *)cn_tab[j].cf) & (ncap - 1);
      while (t[h].cf) h = (h + 1) & (ncap - 1);
      t[h] = cn_tab[j];
    }
    free(cn_tab);
    cn_tab = t;
    cn_cap = ncap;
  }
  h = ff_hash((const void *)cf) & (cn_cap - 1);
  for (i = 0; i < cn_cap; i++, h = (h + 1) & (cn_cap - 1)) {
    cname *e = &cn_tab[h];
    if (!e->cf) {
      if ((e->name = name_dup(name, len))) {
        e->cf = cf;
        cn_n++;
      }
      return;
    }
    if (e->cf == cf) {
      size_t ol = strlen(e->name);
      if (len < ol || (len == ol && memcmp(name, e->name, len) < 0)) {
        char *n = name_dup(name, len);
        if (!n) return;
        e->name = n;
      }
      return;
    }
  }
}

/* Caller holds ff_mu. */

/* The Lua name of each fast function ("pcall", "string.byte"), by id,
** learnt on the same walk: what a C host's summary prints instead of
** [builtin#N]. Several names: the shortest (ties: alphabetical). Guarded
** by ff_mu. */
#define FFNAME_MAX 256
static char *ff_names[FFNAME_MAX];

static void ffname_put(int ffid, const char *name, size_t len)
{
  char *o, *n;
  if (ffid <= 0 || ffid >= FFNAME_MAX || !name) return;
  o = ff_names[ffid];
  if (o && (strlen(o) < len || (strlen(o) == len && memcmp(o, name, len) <= 0)))
    return;
  if (!(n = name_dup(name, len))) return;
  ff_names[ffid] = n;
}

int ljp_ffid_name(int ffid, char *buf, size_t n)
{
  int ok = 0;
  if (ffid <= 0 || ffid >= FFNAME_MAX || n == 0) return 0;
  pthread_mutex_lock(&ff_mu);
  if (ff_names[ffid]) {
    snprintf(buf, n, "%s", ff_names[ffid]);
    ok = 1;
  }
  pthread_mutex_unlock(&ff_mu);
  return ok;
}
static const char *cname_get(lua_CFunction cf)
{
  uint32_t i, h;
  if (!cn_cap || !cf) return NULL;
  h = ff_hash((const void *)cf) & (cn_cap - 1);
  for (i = 0; i < cn_cap && cn_tab[h].cf; i++, h = (h + 1) & (cn_cap - 1))
    if (cn_tab[h].cf == cf) return cn_tab[h].name;
  return NULL;
}

static const char funcinfo_key = 'f'; /* registry key: jit.util.funcinfo */

/* Push jit.util.funcinfo (cached in the registry) or nil. Normal context. */
static void push_funcinfo(lua_State *L)
{
  lua_pushlightuserdata(L, (void *)&funcinfo_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (lua_isfunction(L, -1)) return;
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushstring(L, "jit.util");
  if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "funcinfo");
    lua_remove(L, -2);
    lua_pushlightuserdata(L, (void *)&funcinfo_key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
  } else {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
}

/* ffid of the function at idx by calling funcinfo (at fi). Normal context. */
static int call_funcinfo(lua_State *L, int fi, int idx)
{
  int ffid = 0;
  lua_pushvalue(L, fi);
  lua_pushvalue(L, idx);
  if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "ffid");
    ffid = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return ffid;
}

/* fi: the stack slot of jit.util.funcinfo; FI_BYTE: each id read from the
** function object (the VM probe proved the byte, ljp_vml.frame_ok); 0:
** names only. */
#define FI_BYTE (-1)
static void learn_fn(lua_State *L, int fi, int idx, const char *name,
                     size_t len, int held)
{
  lua_CFunction cf = lua_tocfunction(L, idx);
  const void *fn = lua_topointer(L, idx);
  int ffid;
  const ffentry *known;
  if (!held) pthread_mutex_lock(&ff_mu);
  if (name) cname_put(cf, name, len);
  known = fi ? ff_get(ff_obj, ff_objcap, 1, fn, cf) : NULL;
  if (!fi || known) {  /* fi 0: names only */
    if (known && name) ffname_put(known->ffid, name, len);
    if (!held) pthread_mutex_unlock(&ff_mu);
    return;
  }
  if (!held) pthread_mutex_unlock(&ff_mu);
  if (fi == FI_BYTE) {
    /* The object's own function-kind byte, which the VM probe proved
    ** holds the fast-function id (0 Lua, 1 a plain C function): what
    ** funcinfo gives (no "ffid" for a plain C function), without a Lua
    ** call per function (198 of them, 0.3 M instructions at a start). */
    int b = ((const unsigned char *)fn)[ljp_vml.fn_ffid];
    ffid = b > 1 ? b : 0;
  } else {
    ffid = call_funcinfo(L, fi, idx);
  }
  if (!held) pthread_mutex_lock(&ff_mu);
  ff_put(&ff_obj, &ff_nobj, &ff_objcap, 1, fn, cf, ffid);
  if (ffid) ff_put(&ff_entry, &ff_nentry, &ff_entrycap, 0, NULL, cf, ffid);
  if (name) ffname_put(ffid, name, len);
  if (!held) pthread_mutex_unlock(&ff_mu);
}

/* Learn the C functions in the table at idx (and depth levels below),
** named prefix + key; the globals table (_G) adds no prefix. With fi 0
** only names are learnt, by raw table reads and no Lua call, so this may
** run at the safe point (ljp_cname_refresh). */
/* prefix + sep + key into name (sep only after a prefix): its length,
** or -1 when it does not fit. Plain copies: this runs for every key of
** every loaded module, at start and at safe points. */
static int join_name(char *name, size_t cap, const char *prefix,
                     const char *sep, const char *key, size_t klen)
{
  size_t p = strlen(prefix), s = *prefix ? strlen(sep) : 0;
  if (p + s + klen >= cap) return -1;
  memcpy(name, prefix, p);
  memcpy(name + p, sep, s);
  memcpy(name + p + s, key, klen);
  name[p + s + klen] = '\0';
  return (int)(p + s + klen);
}

static void learn_table(lua_State *L, int fi, int idx, int depth,
                        const char *prefix, const char *sep, int held)
{
  char name[128];
  if (!lua_istable(L, idx)) return;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int v = lua_gettop(L);
    size_t klen = 0;
    const char *key = lua_type(L, v - 1) == LUA_TSTRING ?
                      lua_tolstring(L, v - 1, &klen) : NULL;
    int len = -1;
    if (key && (lua_iscfunction(L, v) || (depth > 0 && lua_istable(L, v))))
      len = join_name(name, sizeof(name), prefix, sep, key, klen);
    if (lua_iscfunction(L, v)) {
      learn_fn(L, fi, v, len >= 0 ? name : NULL, len >= 0 ? (size_t)len : 0,
               held);
    } else if (depth > 0 && lua_istable(L, v) && len >= 0) {
      int global = !strcmp(name, "_G");
      learn_table(L, fi, v, depth - 1, global ? "" : name, ".", held);
    }
    lua_pop(L, 1);
  }
}

/* learn_table under one hold of ff_mu when no Lua is called per function
** (fi <= 0: ids read from the objects, or names only; each lookup took
** and released the lock twice: 0.04 M instructions a start). */
static void learn_walk(lua_State *L, int fi, int idx, int depth,
                       const char *prefix, const char *sep)
{
  if (fi > 0) {
    learn_table(L, fi, idx, depth, prefix, sep, 0);
    return;
  }
  pthread_mutex_lock(&ff_mu);
  learn_table(L, fi, idx, depth, prefix, sep, 1);
  pthread_mutex_unlock(&ff_mu);
}

void ljp_ffid_learn(lua_State *L)
{
  int top = lua_gettop(L), fi = FI_BYTE, fs;
  if (!ljp_vml.frame_ok) {
    push_funcinfo(L);
    fi = lua_gettop(L);
  }
  fs = lua_gettop(L);  /* the walk works above this slot */
  if (fi == FI_BYTE || lua_isfunction(L, fi)) {
    lua_getglobal(L, "package");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "loaded");
      learn_walk(L, fi, lua_gettop(L), 1, "", ".");
    }
    lua_settop(L, fs);
    lua_pushliteral(L, "");                  /* string methods */
    if (lua_getmetatable(L, -1)) {
      lua_getfield(L, -1, "__index");
      learn_walk(L, fi, lua_gettop(L), 0, "string", ".");
    }
    lua_settop(L, fs);
    lua_getfield(L, LUA_REGISTRYINDEX, "FILE*"); /* file methods */
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "__index");
      learn_walk(L, fi, lua_gettop(L), 0, "file", ":");
    }
    lua_settop(L, fs);
    lua_getglobal(L, "package");             /* FFI metamethods (a call */
    if (lua_istable(L, -1)) {                /* through the FFI runs in */
      lua_getfield(L, -1, "loaded");         /* ffi.meta.__call) */
      if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "ffi");
        if (lua_istable(L, -1)) {
          lua_getfield(L, -1, "new");
          lua_pushliteral(L, "char");
          if (lua_isfunction(L, -2) && lua_pcall(L, 1, 1, 0) == 0 &&
              lua_getmetatable(L, -1))
            learn_walk(L, fi, lua_gettop(L), 0, "ffi.meta", ".");
          lua_settop(L, fs + 3);
          lua_getfield(L, -1, "C");          /* ffi.C.name lookups */
          if (lua_getmetatable(L, -1))
            learn_walk(L, fi, lua_gettop(L), 0, "ffi.clib", ".");
        }
      }
    }
    lua_settop(L, fs);
    lua_getglobal(L, "coroutine");           /* a wrap closure's entry */
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "wrap");
      lua_getglobal(L, "type");
      if (lua_isfunction(L, -2) && lua_isfunction(L, -1) &&
          lua_pcall(L, 1, 1, 0) == 0 && lua_isfunction(L, -1))
        learn_fn(L, fi, lua_gettop(L), NULL, 0, 0);
    }
  }
  lua_settop(L, top);
}

void ljp_names_release(void)
{
  uint32_t i;
  pthread_mutex_lock(&ff_mu);
  for (i = 0; i < FFNAME_MAX; i++) ff_names[i] = NULL;
  while (ff_nblocks) {
    nblock *k = ff_nblocks;
    ff_nblocks = k->next;
    free(k);
  }
  free(cn_tab);
  free(ff_obj);
  free(ff_entry);
  cn_tab = NULL;
  ff_obj = ff_entry = NULL;
  cn_n = cn_cap = ff_nobj = ff_objcap = ff_nentry = ff_entrycap = 0;
  pthread_mutex_unlock(&ff_mu);
}

void ljp_ffid_learn_in(lua_State *S)
{
  int top = lua_gettop(S);
  lua_getglobal(S, "require");      /* ffi's metatables are learnt too */
  lua_pushliteral(S, "ffi");
  lua_pcall(S, 1, 0, 0);
  lua_settop(S, top);
  ljp_ffid_learn(S);
}

void ljp_ffid_own_closed(void)
{
  /* The objects learnt by address were that state's, now freed: their
  ** addresses may come back as other objects of the program's. Entry
  ** points stay (the same in every state); an entry shared by several
  ** fast functions is told apart in the program's state when a dump has
  ** a helper (c_ffid). */
  pthread_mutex_lock(&ff_mu);
  free(ff_obj);
  ff_obj = NULL;
  ff_nobj = ff_objcap = 0;
  pthread_mutex_unlock(&ff_mu);
}

void ljp_ffid_learn_own(void)
{
  lua_State *S;
  if (ljp_ffid_known() || !(S = ljp_own_newstate(NULL, NULL))) return;  /* never auto-profiled */
  ljp_ffid_learn_in(S);
  lua_close(S);
  ljp_ffid_own_closed();
}

int ljp_ffid_known(void)
{
  int n;
  pthread_mutex_lock(&ff_mu);
  n = ff_nentry != 0;
  pthread_mutex_unlock(&ff_mu);
  return n;
}

int ljp_ffid_of(lua_State *L, lua_State *helper)
{
  const void *fn = lua_topointer(L, -1);
  lua_CFunction cf = lua_tocfunction(L, -1);
  ffentry *e = &ljp_ffcache[((uintptr_t)fn >> 4) % FFCACHE];
  const ffentry *k;
  int ffid;
  if (e->used && e->fn == fn && e->cf == cf) return e->ffid;
  if (ljp_vml.frame_ok && fn) {
    /* The object's own function-kind byte, which the VM probe proved
    ** holds the fast-function id (0 Lua, 1 a plain C function). */
    ffid = ((const unsigned char *)fn)[ljp_vml.fn_ffid];
    return ffid > 1 ? ffid : 0;
  }
  pthread_mutex_lock(&ff_mu);
  if ((k = ff_get(ff_obj, ff_objcap, 1, fn, cf))) ffid = k->ffid;
  else if ((k = ff_get(ff_entry, ff_entrycap, 0, NULL, cf))) ffid = k->ffid;
  else ffid = 0;  /* no fast function has this entry point */
  pthread_mutex_unlock(&ff_mu);
  if (ffid == LJP_FFID_AMBIGUOUS && helper) {
    int top = lua_gettop(helper), fi;
    push_funcinfo(helper);
    fi = lua_gettop(helper);
    lua_pushvalue(L, -1);
    if (L != helper) lua_xmove(L, helper, 1);
    if (lua_isfunction(helper, fi)) learn_fn(helper, fi, fi + 1, NULL, 0, 0);
    lua_settop(helper, top);
    pthread_mutex_lock(&ff_mu);
    k = ff_get(ff_obj, ff_objcap, 1, fn, cf);
    ffid = k ? k->ffid : LJP_FFID_AMBIGUOUS;
    pthread_mutex_unlock(&ff_mu);
  }
  if (ffid != LJP_FFID_AMBIGUOUS) {
    e->fn = fn;
    e->cf = cf;
    e->ffid = ffid;
    e->used = 1;
  }
  return ffid;
}

/* -- Learnt C-function names ----------------------------------------------- */

void ljp_cname_add(lua_CFunction cf, const char *name)
{
  pthread_mutex_lock(&ff_mu);
  cname_put(cf, name, strlen(name));
  pthread_mutex_unlock(&ff_mu);
}

void ljp_cname_refresh(lua_State *L)
{
  int top = lua_gettop(L);
  lua_pushliteral(L, "package");
  lua_rawget(L, LUA_GLOBALSINDEX);
  if (lua_istable(L, -1)) {
    lua_pushliteral(L, "loaded");
    lua_rawget(L, -2);
    if (lua_istable(L, -1)) learn_walk(L, 0, lua_gettop(L), 1, "", ".");
  }
  lua_settop(L, top);
}

static uint64_t count_entries(lua_State *L, int t)
{
  uint64_t n = 0;
  if (!lua_istable(L, t)) return 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    n++;
    lua_pop(L, 1);
  }
  return n;
}

uint64_t ljp_cname_sig(lua_State *L)
{
  int top = lua_gettop(L);
  uint64_t sig = (uint64_t)ljp_dl_generation() << 40;
  sig += count_entries(L, LUA_GLOBALSINDEX) << 20;
  lua_pushliteral(L, "package");
  lua_rawget(L, LUA_GLOBALSINDEX);
  if (lua_istable(L, -1)) {
    lua_pushliteral(L, "loaded");
    lua_rawget(L, -2);
    sig += count_entries(L, lua_gettop(L));
  }
  lua_settop(L, top);
  return sig;
}

int ljp_cfunc_learnt(ljp_buf *sb, lua_CFunction cf, int *ffid)
{
  const char *name;
  const ffentry *k;
  pthread_mutex_lock(&ff_mu);
  name = cname_get(cf);
  if (name) {
    ljp_buf_put(sb, name, strlen(name));
  } else if (ffid && (k = ff_get(ff_entry, ff_entrycap, 0, NULL, cf))) {
    *ffid = k->ffid;
  }
  pthread_mutex_unlock(&ff_mu);
  return name != NULL;
}

int ljp_ffid_top(lua_State *L)
{
  int ffid = ljp_ffid_of(L, NULL);
  return ffid == LJP_FFID_AMBIGUOUS ? -1 : ffid;
}
