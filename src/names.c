/*
** Names of C functions and fast functions (see names.h): fast-function
** ids, C-function names from package.loaded, and naming a C function at
** the safe point or in the call hook; Lua functions named by the variable
** or field holding them, through an index in the registry whose walks
** are bounded per run (ljp_lname_by_value).
**
** Rules: normal context only (a mutex and malloc; never the signal
** handler). Lua is called only by ljp_ffid_learn and by ljp_put_ffunc
** with a helper; everything else reads tables raw and may run at the safe
** point and in hooks. Two process-wide tables (a binary's entry points
** are the same for every state) under one mutex, plus a per-OS-thread
** cache.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "names.h"
#include "table.h"
#include "ljp.h"
#include "luastack.h"
#include "objects.h"
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
#define FF_AMBIGUOUS (-1)
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
      if (!by_obj && e->ffid != ffid) e->ffid = FF_AMBIGUOUS;
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
      if ((e->name = malloc(len + 1))) {
        memcpy(e->name, name, len);
        e->name[len] = '\0';
        e->cf = cf;
        cn_n++;
      }
      return;
    }
    if (e->cf == cf) {
      size_t ol = strlen(e->name);
      if (len < ol || (len == ol && memcmp(name, e->name, len) < 0)) {
        char *n = malloc(len + 1);
        if (!n) return;
        memcpy(n, name, len);
        n[len] = '\0';
        free(e->name);
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
  if (!(n = malloc(len + 1))) return;
  memcpy(n, name, len);
  n[len] = '\0';
  free(o);
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

static void learn_fn(lua_State *L, int fi, int idx, const char *name,
                     size_t len)
{
  lua_CFunction cf = lua_tocfunction(L, idx);
  const void *fn = lua_topointer(L, idx);
  int ffid;
  const ffentry *known;
  pthread_mutex_lock(&ff_mu);
  if (name) cname_put(cf, name, len);
  known = fi ? ff_get(ff_obj, ff_objcap, 1, fn, cf) : NULL;
  if (!fi || known) {  /* fi 0: names only */
    if (known && name) ffname_put(known->ffid, name, len);
    pthread_mutex_unlock(&ff_mu);
    return;
  }
  pthread_mutex_unlock(&ff_mu);
  ffid = call_funcinfo(L, fi, idx);
  pthread_mutex_lock(&ff_mu);
  ff_put(&ff_obj, &ff_nobj, &ff_objcap, 1, fn, cf, ffid);
  if (ffid) ff_put(&ff_entry, &ff_nentry, &ff_entrycap, 0, NULL, cf, ffid);
  if (name) ffname_put(ffid, name, len);
  pthread_mutex_unlock(&ff_mu);
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
                        const char *prefix, const char *sep)
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
      learn_fn(L, fi, v, len >= 0 ? name : NULL, len >= 0 ? (size_t)len : 0);
    } else if (depth > 0 && lua_istable(L, v) && len >= 0) {
      int global = !strcmp(name, "_G");
      learn_table(L, fi, v, depth - 1, global ? "" : name, ".");
    }
    lua_pop(L, 1);
  }
}

void ljp_ffid_learn(lua_State *L)
{
  int top = lua_gettop(L), fi;
  push_funcinfo(L);
  fi = lua_gettop(L);
  if (lua_isfunction(L, fi)) {
    lua_getglobal(L, "package");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "loaded");
      learn_table(L, fi, lua_gettop(L), 1, "", ".");
    }
    lua_settop(L, fi);
    lua_pushliteral(L, "");                  /* string methods */
    if (lua_getmetatable(L, -1)) {
      lua_getfield(L, -1, "__index");
      learn_table(L, fi, lua_gettop(L), 0, "string", ".");
    }
    lua_settop(L, fi);
    lua_getfield(L, LUA_REGISTRYINDEX, "FILE*"); /* file methods */
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "__index");
      learn_table(L, fi, lua_gettop(L), 0, "file", ":");
    }
    lua_settop(L, fi);
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
            learn_table(L, fi, lua_gettop(L), 0, "ffi.meta", ".");
          lua_settop(L, fi + 3);
          lua_getfield(L, -1, "C");          /* ffi.C.name lookups */
          if (lua_getmetatable(L, -1))
            learn_table(L, fi, lua_gettop(L), 0, "ffi.clib", ".");
        }
      }
    }
    lua_settop(L, fi);
    lua_getglobal(L, "coroutine");           /* a wrap closure's entry */
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "wrap");
      lua_getglobal(L, "type");
      if (lua_isfunction(L, -2) && lua_isfunction(L, -1) &&
          lua_pcall(L, 1, 1, 0) == 0 && lua_isfunction(L, -1))
        learn_fn(L, fi, lua_gettop(L), NULL, 0);
    }
  }
  lua_settop(L, top);
}

void ljp_names_release(void)
{
  uint32_t i;
  pthread_mutex_lock(&ff_mu);
  for (i = 0; i < cn_cap; i++) free(cn_tab[i].name);
  for (i = 0; i < FFNAME_MAX; i++) {
    free(ff_names[i]);
    ff_names[i] = NULL;
  }
  free(cn_tab);
  free(ff_obj);
  free(ff_entry);
  cn_tab = NULL;
  ff_obj = ff_entry = NULL;
  cn_n = cn_cap = ff_nobj = ff_objcap = ff_nentry = ff_entrycap = 0;
  pthread_mutex_unlock(&ff_mu);
}

void ljp_ffid_learn_own(void)
{
  lua_State *S;
  if (ljp_ffid_known() || !(S = ljp_own_newstate(NULL, NULL))) return;  /* never auto-profiled */
  lua_getglobal(S, "require");      /* ffi's metatables are learnt too */
  lua_pushliteral(S, "ffi");
  lua_pcall(S, 1, 0, 0);
  lua_settop(S, 0);
  ljp_ffid_learn(S);
  lua_close(S);
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

int ljp_ffid_known(void)
{
  int n;
  pthread_mutex_lock(&ff_mu);
  n = ff_nentry != 0;
  pthread_mutex_unlock(&ff_mu);
  return n;
}

/* ffid of the C function at the top of L (left in place): 0 for a plain
** C function, FF_AMBIGUOUS when it cannot be told without calling Lua.
** With a helper (a running thread, normal context) unknown functions are
** asked from jit.util.funcinfo; without one no Lua is called. */
static int c_ffid(lua_State *L, lua_State *helper)
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
  if (ffid == FF_AMBIGUOUS && helper) {
    int top = lua_gettop(helper), fi;
    push_funcinfo(helper);
    fi = lua_gettop(helper);
    lua_pushvalue(L, -1);
    if (L != helper) lua_xmove(L, helper, 1);
    if (lua_isfunction(helper, fi)) learn_fn(helper, fi, fi + 1, NULL, 0);
    lua_settop(helper, top);
    pthread_mutex_lock(&ff_mu);
    k = ff_get(ff_obj, ff_objcap, 1, fn, cf);
    ffid = k ? k->ffid : FF_AMBIGUOUS;
    pthread_mutex_unlock(&ff_mu);
  }
  if (ffid != FF_AMBIGUOUS) {
    e->fn = fn;
    e->cf = cf;
    e->ffid = ffid;
    e->used = 1;
  }
  return ffid;
}

/* -- C function names ------------------------------------------------------- */

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
    if (lua_istable(L, -1)) learn_table(L, 0, lua_gettop(L), 1, "", ".");
  }
  lua_settop(L, top);
}

int ljp_put_cfunc(ljp_buf *sb, lua_CFunction cf)
{
  const char *name;
  const ffentry *k;
  int ffid = 0;
  pthread_mutex_lock(&ff_mu);
  name = cname_get(cf);
  if (name) {
    ljp_buf_put(sb, name, strlen(name));
  } else if ((k = ff_get(ff_entry, ff_entrycap, 0, NULL, cf))) {
    ffid = k->ffid;
  }
  pthread_mutex_unlock(&ff_mu);
  if (name) return 1;
  if (ffid > 0) {
    ljp_buf_put(sb, "[builtin#", 9);
    ljp_buf_int(sb, ffid);
    ljp_buf_putc(sb, ']');
  } else {
    ljp_buf_putc(sb, '@');
    ljp_buf_ptr(sb, (const void *)cf);
  }
  return 0;
}


void ljp_put_code_name(ljp_buf *sb, uintptr_t cf)
{
  const char *name;
  ljp_objinfo ob;
  pthread_mutex_lock(&ff_mu);
  name = cname_get((lua_CFunction)cf);
  if (name) ljp_buf_put(sb, name, strlen(name));
  pthread_mutex_unlock(&ff_mu);
  if (name) return;
  if (cf && ljp_objects_lookup(cf, &ob)) {
    if (ob.sym_lo && ob.sym_lo <= cf && cf < ob.sym_hi && ob.sym[0]) {
      ljp_buf_put(sb, ob.sym, strlen(ob.sym));
    } else {
      ljp_buf_put(sb, ob.short_name, strlen(ob.short_name));
      ljp_buf_put(sb, "+0x", 3);
      ljp_buf_hex(sb, cf - ob.base);
    }
    return;
  }
  ljp_buf_putc(sb, '@');
  ljp_buf_ptr(sb, (const void *)cf);
}

int ljp_ffid_top(lua_State *L)
{
  int ffid = c_ffid(L, NULL);
  return ffid == FF_AMBIGUOUS ? -1 : ffid;
}

void ljp_put_ffunc(ljp_buf *sb, lua_State *L, lua_State *helper)
{
  int ffid = c_ffid(L, helper);
  if (ffid == FF_AMBIGUOUS) {
    ljp_buf_put(sb, "[builtin#?]", 11);
  } else if (ffid) {
    ljp_buf_put(sb, "[builtin#", 9);
    ljp_buf_int(sb, ffid);
    ljp_buf_putc(sb, ']');
  } else {
    ljp_buf_putc(sb, '@');
    ljp_buf_ptr(sb, (const void *)lua_tocfunction(L, -1));
  }
}

void ljp_put_ffunc_at(ljp_buf *sb, lua_State *L, int idx)
{
  if (ljp_vml.frame_ok) {
    /* The function-kind byte the probe proved holds the fast function's
    ** id (vmprobe.c); the object is live on the stack. */
    int ffid = ((const unsigned char *)lua_topointer(L, idx))[ljp_vml.fn_ffid];
    ljp_buf_put(sb, "[builtin#", 9);
    ljp_buf_int(sb, ffid);
    ljp_buf_putc(sb, ']');
  } else {
    lua_pushvalue(L, idx);
    ljp_put_ffunc(sb, L, NULL);
    lua_pop(L, 1);
  }
}

/* -- Naming at the safe point and in the call hook ------------------------ */

void ljp_cname_memo_reset(ljp_cname_memo *m)
{
  m->n = 0;
}

int ljp_name_cfunc(ljp_cname_memo *m, lua_State *L, lua_CFunction cf,
                   ljp_buf *sb)
{
  uint32_t i, n = m->n;
  sb->n = 0;
  if (ljp_put_cfunc(sb, cf)) return 1;
  if (m->limit && n >= m->limit) return 0;
  if (!m->each) {  /* once per function: was it looked up already? */
    for (i = 0; i < n && i < LJP_CNAME_TRIED; i++)
      if (m->tried[i] == (uintptr_t)cf) return 0;
    m->tried[n % LJP_CNAME_TRIED] = (uintptr_t)cf;
  }
  m->n = n + 1;
  ljp_cname_refresh(L);  /* a module loaded after the start */
  sb->n = 0;
  return ljp_put_cfunc(sb, cf);
}

/* -- Lua functions seen live ------------------------------------------------ */

void ljp_fnames_init(ljp_fnames *t)
{
  memset(t, 0, sizeof(*t));
  t->ref = LUA_NOREF;
}

static ljp_fname *fn_slot(const ljp_fnames *t, uintptr_t fn)
{
  uint32_t i = ljp_hash_addr(fn) & (t->cap - 1);
  while (t->e[i].fn && t->e[i].fn != fn) i = (i + 1) & (t->cap - 1);
  return &t->e[i];
}

static int fn_grow(ljp_fnames *t)
{
  ljp_fnames old = *t;
  uint32_t i, cap = t->cap ? t->cap * 2 : 256;
  ljp_fname *e = calloc(cap, sizeof(*e));
  if (!e) return -1;
  t->e = e;
  t->cap = cap;
  for (i = 0; i < old.cap; i++)
    if (old.e[i].fn) *fn_slot(t, old.e[i].fn) = old.e[i];
  free(old.e);
  return 0;
}

static char *dup_or_null(const char *s)
{
  return s ? strdup(s) : NULL;
}

static ljp_pname *pn_slot(const ljp_fnames *t, uintptr_t bc)
{
  uint32_t i = ljp_hash_addr(bc) & (t->pcap - 1);
  while (t->p[i].bc && t->p[i].bc != bc) i = (i + 1) & (t->pcap - 1);
  return &t->p[i];
}

static void pn_learn(ljp_fnames *t, uintptr_t bc, const char *name)
{
  ljp_pname *e;
  if (!bc || !name) return;
  if ((t->pn + 1) * 4 >= t->pcap * 3) {
    ljp_fnames old = *t;
    uint32_t i, cap = t->pcap ? t->pcap * 2 : 256;
    ljp_pname *p = calloc(cap, sizeof(*p));
    if (!p) return;
    t->p = p;
    t->pcap = cap;
    for (i = 0; i < old.pcap; i++)
      if (old.p[i].bc) *pn_slot(t, old.p[i].bc) = old.p[i];
    free(old.p);
  }
  e = pn_slot(t, bc);
  if (!e->bc) t->pn++;
  else if (e->name && !strcmp(e->name, name)) {
    e->sig = ljp_proto_sig(bc);
    return;
  }
  free(e->name);
  e->bc = bc;
  e->sig = ljp_proto_sig(bc);
  e->name = strdup(name);
}

void ljp_fnames_proto_learn(ljp_fnames *t, uintptr_t bc, const char *name)
{
  pn_learn(t, bc, name);
}

/* -- Lua functions named by where they are kept ----------------------------- */

/* An index, per Lua state (in the registry), of the Lua functions kept
** under a string key: prototype (first instruction, a light userdata) ->
** one function of it (weak values: a collected function takes its entry
** with it, so a prototype's address reused later is not named by the
** old one) and -> the key's name; the first name found for a prototype
** is kept. A lookup is two raw table reads, whatever the size of the
** program. Tables with an array part are not looked through (see
** byval_table). On a miss, the locals and upvalues of the innermost
** BYVAL_LEVELS live levels (and a table held there, one level deep) are
** put in, at most BYVAL_LIVE_BUDGET table entries (bounded by the stack,
** not by the program); if still missing, the globals (and the tables they
** hold) and the fields of loaded modules are walked, at most BYVAL_BUDGET
** entries, but only after twice as many misses as at the last walk and at
** most BYVAL_WALKS times per state. The global search so costs at most
** BYVAL_WALKS walks per run (about 0.56M instructions each), not one per
** prototype as before (1,126 prototypes cost 275M instructions on a
** program with 2,000 functions). A function none of these finds keeps
** its chunk and first line. */
#define BYVAL_BUDGET 4096
#define BYVAL_WALKS 4
#define BYVAL_LEVELS 8
#define BYVAL_LIVE_BUDGET 256

static int byval_key;  /* its address: the registry key of the index */

enum { BV_FN = 1, BV_NAME, BV_WALKS, BV_MISSES, BV_NEXT };

typedef struct byval {
  int fn, name;             /* stack slots of the index's two tables */
  int budget;               /* table entries left to look at */
} byval;

/* The value at idx, found under name: a Lua function is put in the index
** unless its prototype is there already. */
static void byval_put(lua_State *L, int idx, const char *name, byval *b)
{
  uintptr_t bc;
  if (!name || !*name || name[0] == '(' || !lua_isfunction(L, idx) ||
      lua_iscfunction(L, idx))
    return;
  bc = ljp_fn_bc((uintptr_t)lua_topointer(L, idx));
  if (!bc) return;
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  lua_pushlightuserdata(L, (void *)bc);
  lua_rawget(L, b->fn);
  if (!lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_pushlightuserdata(L, (void *)bc);
  lua_pushvalue(L, idx);
  lua_rawset(L, b->fn);
  lua_pushlightuserdata(L, (void *)bc);
  lua_pushstring(L, name);
  lua_rawset(L, b->name);
}

/* The string keys of the table at idx (absolute); with deep, also the
** fields of the tables held there (a class's methods: Device.step is
** called as task:step()). A table with an array part (a list of
** objects, of functions under numbers) is not looked through: its
** entries have no names, and walking them would spend the budget before
** the tables that do (test_inline's class V came after two lists of
** 1,000 objects). */
static void byval_table(lua_State *L, int idx, byval *b, int deep)
{
  if (lua_objlen(L, idx) > 0) return;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      if (deep && lua_istable(L, -1))
        byval_table(L, lua_gettop(L), b, 0);
      else
        byval_put(L, -1, lua_tostring(L, -2), b);
    }
    lua_pop(L, 1);
    if (--b->budget <= 0) {
      lua_pop(L, 1);                          /* the key */
      return;
    }
  }
}

/* The value at the top: the function itself, or a table holding it. */
static void byval_value(lua_State *L, const char *name, byval *b)
{
  if (lua_istable(L, -1)) {
    if (name && name[0] != '(') byval_table(L, lua_gettop(L), b, 0);
  } else {
    byval_put(L, -1, name, b);
  }
}

/* The locals and upvalues of the innermost BYVAL_LEVELS live levels (and
** the tables held there, one level deep), into the index's tables at
** slots b->fn, b->name. */
static void byval_live(lua_State *L, byval *b)
{
  lua_Debug ar;
  const char *nm;
  int level, i, top = lua_gettop(L);
  for (level = 0; b->budget > 0 && level < BYVAL_LEVELS &&
                  lua_getstack(L, level, &ar); level++) {
    for (i = 1; i <= 64 && b->budget > 0 && (nm = lua_getlocal(L, &ar, i));
         i++) {
      byval_value(L, nm, b);
      lua_pop(L, 1);
    }
    if (lua_getinfo(L, "f", &ar)) {            /* pushes the function */
      for (i = 1; i <= 64 && b->budget > 0 &&
                  (nm = lua_getupvalue(L, -1, i)); i++) {
        byval_value(L, nm, b);
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
}

/* The globals (and the tables they hold), then the fields of loaded
** modules. */
static void byval_walk(lua_State *L, byval *b)
{
  int top = lua_gettop(L);
  if (b->budget > 0) {
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    byval_table(L, lua_gettop(L), b, 1);
    lua_settop(L, top);
  }
  if (b->budget > 0) {
    lua_pushliteral(L, "package");
    lua_rawget(L, LUA_GLOBALSINDEX);
    if (lua_istable(L, -1)) {
      int loaded;
      lua_pushliteral(L, "loaded");
      lua_rawget(L, -2);
      loaded = lua_gettop(L);
      if (lua_istable(L, loaded)) {
        lua_pushnil(L);
        while (b->budget > 0 && lua_next(L, loaded)) {
          if (lua_istable(L, -1)) byval_table(L, lua_gettop(L), b, 0);
          lua_pop(L, 1);
        }
      }
    }
  }
  lua_settop(L, top);
}

static lua_Integer byval_geti(lua_State *L, int t, int k)
{
  lua_Integer v;
  lua_rawgeti(L, t, k);
  v = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}

static void byval_seti(lua_State *L, int t, int k, lua_Integer v)
{
  lua_pushinteger(L, v);
  lua_rawseti(L, t, k);
}

/* Is bc in the index (at slot ix)? Then the function is pushed and the
** name copied. */
static int byval_find(lua_State *L, int ix, uintptr_t bc, char *buf, size_t n)
{
  const char *name;
  lua_rawgeti(L, ix, BV_FN);
  lua_pushlightuserdata(L, (void *)bc);
  lua_rawget(L, -2);
  if (!lua_isfunction(L, -1) ||
      ljp_fn_bc((uintptr_t)lua_topointer(L, -1)) != bc) {
    lua_pop(L, 2);
    return 0;
  }
  lua_rawgeti(L, ix, BV_NAME);
  lua_pushlightuserdata(L, (void *)bc);
  lua_rawget(L, -2);
  name = lua_tostring(L, -1);
  if (!name) {
    lua_pop(L, 4);
    return 0;
  }
  snprintf(buf, n, "%s", name);
  lua_pop(L, 2);                              /* the name and its table */
  lua_remove(L, -2);                          /* the function table */
  return 1;
}

int ljp_lname_by_value(lua_State *L, uintptr_t bc, char *buf, size_t n)
{
  int top = lua_gettop(L), ix, found;
  lua_Integer walks, misses;
  if (!bc || n < 2) return 0;
  lua_pushlightuserdata(L, &byval_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (!lua_istable(L, -1)) {                  /* the first search */
    lua_pop(L, 1);
    lua_createtable(L, 4, 0);
    lua_newtable(L);                          /* BV_FN: weak values */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_rawseti(L, -2, BV_FN);
    lua_newtable(L);
    lua_rawseti(L, -2, BV_NAME);
    lua_pushlightuserdata(L, &byval_key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
  }
  ix = lua_gettop(L);
  found = byval_find(L, ix, bc, buf, n);
  if (!found) {
    byval b;
    lua_rawgeti(L, ix, BV_FN);
    b.fn = lua_gettop(L);
    lua_rawgeti(L, ix, BV_NAME);
    b.name = lua_gettop(L);
    b.budget = BYVAL_LIVE_BUDGET;
    byval_live(L, &b);
    found = byval_find(L, ix, bc, buf, n);
    walks = byval_geti(L, ix, BV_WALKS);
    misses = byval_geti(L, ix, BV_MISSES) + 1;
    if (!found) byval_seti(L, ix, BV_MISSES, misses);
    if (!found && walks < BYVAL_WALKS &&
        misses >= byval_geti(L, ix, BV_NEXT)) {
      b.budget = BYVAL_BUDGET;
      byval_walk(L, &b);
      byval_seti(L, ix, BV_WALKS, walks + 1);
      byval_seti(L, ix, BV_NEXT, misses * 2);
      found = byval_find(L, ix, bc, buf, n);
    }
    if (found) lua_replace(L, ix + 1);        /* the function */
    lua_settop(L, found ? ix + 1 : ix);
  }
  if (found) {
    lua_replace(L, ix);                       /* the function */
    lua_settop(L, top + 1);
  } else {
    lua_settop(L, top);
  }
  return found;
}

static const ljp_pname *pn_get(const ljp_fnames *t, uintptr_t bc,
                               uint64_t sig)
{
  const ljp_pname *e;
  if (!t->pcap || !bc) return NULL;
  e = pn_slot(t, bc);
  return e->bc == bc && e->sig == sig && e->name ? e : NULL;
}

const char *ljp_fnames_proto_name(const ljp_fnames *t, uintptr_t bc,
                                  uint64_t sig)
{
  const ljp_pname *e = pn_get(t, bc, sig);
  return e && e->name[0] ? e->name : NULL;   /* "": searched, none found */
}

int ljp_fnames_proto_searched(const ljp_fnames *t, uintptr_t bc,
                              uint64_t sig)
{
  return pn_get(t, bc, sig) != NULL;
}

void ljp_fnames_learn(ljp_fnames *t, lua_State *L, int fidx,
                      const char *source, const char *name, int linedefined)
{
  uintptr_t fn = (uintptr_t)lua_topointer(L, fidx);
  ljp_fname *e;
  if (!fn || !source) return;
  if (fidx < 0 && fidx > LUA_REGISTRYINDEX) fidx = lua_gettop(L) + fidx + 1;
  if (t->ref == LUA_NOREF) {
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "v");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    t->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  if ((t->n + 1) * 4 >= t->cap * 3 && fn_grow(t) != 0) return;
  e = fn_slot(t, fn);
  if (!e->fn) t->n++;
  free(e->source);
  free(e->name);
  e->fn = fn;
  e->bc = ljp_fn_bc(fn);
  e->source = dup_or_null(source);
  e->name = dup_or_null(name);
  e->linedefined = linedefined;
  pn_learn(t, e->bc, name);
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref);
  lua_pushlightuserdata(L, (void *)fn);
  lua_pushvalue(L, fidx);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

int ljp_fnames_has(const ljp_fnames *t, uintptr_t fn)
{
  const ljp_fname *e;
  if (!t->cap) return 0;
  e = fn_slot(t, fn);
  /* An address reused by another function since: not known. */
  return e->fn == fn && e->bc == ljp_fn_bc(fn);
}

const ljp_fname *ljp_fnames_peek(const ljp_fnames *t, uintptr_t fn,
                                 uintptr_t bc)
{
  const ljp_fname *e;
  if (!t->cap || !bc) return NULL;
  e = fn_slot(t, fn);
  return e->fn == fn && e->bc == bc && e->source ? e : NULL;
}

const ljp_fname *ljp_fnames_get(const ljp_fnames *t, lua_State *L,
                                uintptr_t fn)
{
  const ljp_fname *e;
  int alive;
  if (!t->cap || t->ref == LUA_NOREF) return NULL;
  e = fn_slot(t, fn);
  if (e->fn != fn || !e->source) return NULL;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->ref);
  lua_pushlightuserdata(L, (void *)fn);
  lua_rawget(L, -2);
  alive = lua_isfunction(L, -1) && (uintptr_t)lua_topointer(L, -1) == fn;
  lua_pop(L, 2);
  return alive ? e : NULL;
}

void ljp_fnames_free(ljp_fnames *t, lua_State *L)
{
  uint32_t i;
  for (i = 0; i < t->cap; i++) {
    free(t->e[i].source);
    free(t->e[i].name);
  }
  free(t->e);
  for (i = 0; i < t->pcap; i++) free(t->p[i].name);
  free(t->p);
  if (L && t->ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, t->ref);
  ljp_fnames_init(t);
}
