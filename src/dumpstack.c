/*
** Stack dumps that are byte-identical to LuaJIT's lj_debug_dumpstack
** (jit.profile.dumpstack / luaJIT_profile_dumpstack), rebuilt on the
** public debug API: lua_getstack numbers levels exactly like the built-in
** (dummy and vararg frames skipped) and lua_getinfo's name is the same
** lj_debug_funcname result.
**
** Per frame, fmt is interpreted char by char:
**   p  keep full paths (sticky for the rest of the dump)
**   f  function name, or chunk:firstline when none can be derived
**   F  like f, with "chunk:" before names of Lua functions
**   l  chunk:currentline
**   Z  remember the length; at the end, cut the dump back to the length
**      remembered at the last frame's Z (zaps a trailing separator)
**   any other byte is copied.
** Non-Lua frames print [builtin#<ffid>] (fast functions) or @<C pointer>;
** bytecode builtins [builtin:<name>]; loadstring chunks [string].
**
** Normal context only (called at the safe point or from Lua).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"

/* Chunk name of a Lua frame; returns 0 for bytecode builtins (no line). */
static int put_chunkname(ljp_buf *sb, const lua_Debug *ar, int pathstrip)
{
  const char *p = ar->source;
  size_t len;
  if (ar->linedefined == -1) {  /* bytecode builtin: [builtin:name] */
    ljp_buf_put(sb, "[builtin:", 9);
    ljp_buf_put(sb, p, strlen(p));
    ljp_buf_putc(sb, ']');
    return 0;
  }
  if (*p == '=' || *p == '@') {
    len = strlen(++p);
    if (pathstrip) {
      size_t i;
      for (i = len; i > 0; i--) {
        if (p[i - 1] == '/' || p[i - 1] == '\\') {
          p += i;
          len -= i;
          break;
        }
      }
    }
    ljp_buf_put(sb, p, len);
  } else {
    ljp_buf_put(sb, "[string]", 8);
  }
  return 1;
}

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
  pthread_mutex_lock(&ff_mu);
  if (name) cname_put(cf, name, len);
  if (!fi || ff_get(ff_obj, ff_objcap, 1, fn, cf)) {  /* fi 0: names only */
    pthread_mutex_unlock(&ff_mu);
    return;
  }
  pthread_mutex_unlock(&ff_mu);
  ffid = call_funcinfo(L, fi, idx);
  pthread_mutex_lock(&ff_mu);
  ff_put(&ff_obj, &ff_nobj, &ff_objcap, 1, fn, cf, ffid);
  if (ffid) ff_put(&ff_entry, &ff_nentry, &ff_entrycap, 0, NULL, cf, ffid);
  pthread_mutex_unlock(&ff_mu);
}

/* Learn the C functions in the table at idx (and depth levels below),
** named prefix + key; the globals table (_G) adds no prefix. With fi 0
** only names are learnt, by raw table reads and no Lua call, so this may
** run at the safe point (ljp_cname_refresh). */
static void learn_table(lua_State *L, int fi, int idx, int depth,
                        const char *prefix, const char *sep)
{
  char name[128];
  if (!lua_istable(L, idx)) return;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int v = lua_gettop(L);
    const char *key = lua_type(L, v - 1) == LUA_TSTRING ?
                      lua_tostring(L, v - 1) : NULL;
    int len = -1;
    if (key) {
      len = snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? sep : "",
                     key);
      if (len >= (int)sizeof(name)) len = -1;
    }
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

void ljp_put_location(ljp_buf *sb, const char *source, int linedefined,
                      int line)
{
  lua_Debug ar;
  ar.source = source;
  ar.linedefined = linedefined;
  if (put_chunkname(sb, &ar, 1)) {
    ljp_buf_putc(sb, ':');
    ljp_buf_int(sb, line);
  }
}

/* -- The dump --------------------------------------------------------------- */

/* Number of stack levels (lua_getstack(L, n) fails, n-1 succeeds), given
** that level 'above' does not exist. */
static int count_levels(lua_State *L, int above)
{
  int lo = 0, hi = above;  /* levels < lo exist; level hi does not */
  lua_Debug ar;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (lua_getstack(L, mid, &ar)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* One frame of a dump: a real stack level (ar valid), or the synthetic
** leaf frame of lf. */
static void put_frame(lua_State *L, lua_State *helper, ljp_buf *sb,
                      const char *fmt, lua_Debug *ar, const ljp_leaf *syn,
                      const char *nat, int line, int *pathstrip,
                      size_t *lastlen)
{
  const char *p = fmt;
  int have_sl = 0, have_n = 0, c, virt = syn || nat;
  while ((c = (unsigned char)*p++)) {
    if (virt && c != 'p' && c != 'Z' && c != 'f' && c != 'F' && c != 'l') {
      ljp_buf_putc(sb, (char)c);
      continue;
    }
    if (virt && c != 'p' && c != 'Z') {
      if (nat) {  /* a native frame: its name for f, F and l alike */
        ljp_buf_put(sb, nat, strlen(nat));
      } else if (syn->kind == LJP_LEAF_C) {
        ljp_put_cfunc(sb, syn->cfunc);
      } else {
        lua_Debug sar;
        sar.source = syn->source;
        sar.linedefined = syn->linedefined;
        if (c != 'l' && syn->name) {   /* named as when the trace began */
          if (c == 'F') {
            put_chunkname(sb, &sar, *pathstrip);
            ljp_buf_putc(sb, ':');
          }
          ljp_buf_put(sb, syn->name, strlen(syn->name));
        } else if (put_chunkname(sb, &sar, *pathstrip)) {
          ljp_buf_putc(sb, ':');
          ljp_buf_int(sb, c == 'l' ? syn->line : syn->linedefined);
        }
      }
      continue;
    }
    switch (c) {
    case 'p':
      *pathstrip = 0;
      break;
    case 'F': case 'f':
      if (!have_n) {  /* one call for all that f/F/l need */
        lua_getinfo(L, have_sl ? "n" : "nSl", ar);
        have_n = have_sl = 1;
      }
      if (ar->name) {
        if (c == 'F' && ar->what[0] != 'C' && ar->linedefined != -1) {
          put_chunkname(sb, ar, *pathstrip);
          ljp_buf_putc(sb, ':');
        }
        ljp_buf_put(sb, ar->name, strlen(ar->name));
        break;
      }
      /* No name: dump chunk:firstline. */
      __attribute__((fallthrough));
    case 'l':
      if (!have_sl) { lua_getinfo(L, "Sl", ar); have_sl = 1; }
      if (ar->what[0] != 'C') {  /* "Lua" or "main" */
        if (put_chunkname(sb, ar, *pathstrip)) {
          int cur = line > 0 ? line : ar->currentline;
          ljp_buf_putc(sb, ':');
          ljp_buf_int(sb, c == 'l' ? (cur >= 0 ? cur : ar->linedefined)
                               : ar->linedefined);
        }
      } else {
        int ffid;
        lua_getinfo(L, "f", ar);  /* pushes the function */
        ffid = c_ffid(L, helper);
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
        lua_pop(L, 1);
      }
      break;
    case 'Z':
      *lastlen = sb->n;
      break;
    default:
      ljp_buf_putc(sb, (char)c);
      break;
    }
  }
}

int ljp_dumpstack_leaf(lua_State *L, lua_State *helper, ljp_buf *sb,
                       const char *fmt, int depth, const ljp_leaf *lf)
{
  /* Virtual levels: first the native frames, then the synthetic frame if
  ** there is one, then the real levels from lf->skip on. */
  int nn = lf ? lf->nnative : 0;
  int leaf = lf && lf->kind != LJP_LEAF_NONE;
  int syn = nn + leaf;
  int skip = lf ? lf->skip : 0;
  int level = 0, dir = 1, pathstrip = 1;
  size_t lastlen = 0;
  sb->n = 0;
  if (ljp_buf_reserve(sb, 0) != 0) return -1;
  if (depth < 0) {
    level = ~depth;
    depth = dir = -1;
  }
  while (level != depth) {
    lua_Debug ar;
    if (level < nn) {
      put_frame(L, helper, sb, fmt, &ar, NULL, lf->native[level], 0,
                &pathstrip, &lastlen);
    } else if (level < syn) {
      put_frame(L, helper, sb, fmt, &ar, lf, NULL, 0, &pathstrip, &lastlen);
    } else if (lua_getstack(L, level - syn + skip, &ar)) {
      int line = lf && !leaf && level == syn ? lf->line : 0;
      put_frame(L, helper, sb, fmt, &ar, NULL, NULL, line, &pathstrip,
                &lastlen);
    } else if (dir == 1) {
      break;
    } else if (level - syn + skip > 0) {
      /* continue at the outermost level */
      level = count_levels(L, level - syn + skip) + syn - skip;
    }
    level += dir;
  }
  if (lastlen) sb->n = lastlen;
  sb->b[sb->n] = '\0';
  return 0;
}

int ljp_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                  const char *fmt, int depth)
{
  return ljp_dumpstack_leaf(L, helper, sb, fmt, depth, NULL);
}
