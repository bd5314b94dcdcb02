/*
** Names of C functions, fast functions and Lua functions (see names.h):
** a C function by its entry ("string.rep", [builtin#N], its symbol),
** from the tables ffid.c learns and the object registry's symbols;
** naming a C function at the safe point or in the call hook; Lua
** functions seen live, and named by the variable or field holding them,
** through an index in the registry whose walks are bounded per run
** (ljp_lname_by_value).
**
** Rules: normal context only (malloc; never the signal handler). Lua is
** called only by ljp_put_ffunc with a helper (through ljp_ffid_of);
** everything else reads tables raw and may run at the safe point and in
** hooks. The process-wide tables are ffid.c's, under its mutex; this
** file keeps only per-context state (ljp_fnames, ljp_cname_memo).
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "names.h"
#include "ffid.h"
#include "table.h"
#include "luastack.h"
#include "objects.h"
#include "vmprobe.h"

/* -- C function names ------------------------------------------------------- */

int ljp_put_cfunc(ljp_buf *sb, lua_CFunction cf)
{
  int ffid = 0;
  if (ljp_cfunc_learnt(sb, cf, &ffid)) return 1;
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
  ljp_objinfo ob;
  if (ljp_cfunc_learnt(sb, (lua_CFunction)cf, NULL)) return;
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

void ljp_put_ffunc(ljp_buf *sb, lua_State *L, lua_State *helper)
{
  int ffid = ljp_ffid_of(L, helper);
  if (ffid == LJP_FFID_AMBIGUOUS) {
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
  m->walked = 0;
}

void ljp_cname_memo_limit(ljp_cname_memo *m, uint32_t limit, int each)
{
  m->limit = limit;
  m->each = each;
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
  /* A module loaded after the start: walk package.loaded again, unless
  ** nothing it would see has changed since the last walk (no object
  ** loaded, as many entries in package.loaded and _G): luacheck's safe
  ** points walked it 9-11 times for different unnamed functions, 336k
  ** instructions each, 2.9k a signal, and found none. */
  if (m->walked && ljp_cname_sig(L) == m->sig) return 0;
  ljp_cname_walk(m, L);
  sb->n = 0;
  return ljp_put_cfunc(sb, cf);
}

void ljp_cname_walk(ljp_cname_memo *m, lua_State *L)
{
  m->walked = 1;
  m->sig = ljp_cname_sig(L);
  ljp_cname_refresh(L);
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
** its chunk and first line.
**
** The live levels' scan costs about 30k instructions (some 40 locals and
** upvalues through lua_getlocal): run for every new function of a program
** whose functions no variable holds (2,000 of them under integer keys),
** it was most of a safe point's cost (bench/cost, docs/cost.md). After
** BYVAL_STREAK searches in a row that found nothing, the next search
** waits 1, 2, 4... up to BYVAL_GAP_MAX searches (a search that finds a
** name starts over): a search in the gap is deferred (-1), nothing is
** read and the caller may ask again later for that prototype, so a
** function missed in a gap is not named wrongly, at worst by chunk:line.
** A global walk comes after 1, 4, 16, 64 misses (at most BYVAL_WALKS). */
#define BYVAL_BUDGET 4096
#define BYVAL_WALKS 4
#define BYVAL_LEVELS 8
#define BYVAL_LIVE_BUDGET 256
#define BYVAL_STREAK 4
#define BYVAL_GAP_MAX 64
#define BYVAL_RESCAN 64

static int byval_key;  /* its address: the registry key of the index */

enum { BV_FN = 1, BV_NAME, BV_WALKS, BV_MISSES, BV_NEXT,
       BV_SEARCHES,   /* searches the index could not answer */
       BV_SCANS,      /* of them, searches run (live levels, maybe a walk) */
       BV_STREAK,     /* searches run in a row that found nothing */
       BV_LIVE_NEXT,  /* the search number the next one may run at */
       BV_LEVELS,     /* function -> the scan that last read its level
                         (weak keys) */
       BV_NSLOTS = BV_LEVELS };

/* Tables a search looked through already (by address; open addressing):
** one held in several places (a module under its global and in
** package.loaded, _G as _G._G and package.loaded._G, a module table two
** live levels hold) is looked through once per search. A second pass could
** add nothing (the first name found for a prototype is kept, and a pass
** cut short by the budget ends the search), it only spent the budget. */
#define BYVAL_SEEN 512

typedef struct byval {
  int fn, name;             /* stack slots of the index's two tables */
  int levels;               /* ... of BV_LEVELS (0: every level is read) */
  lua_Integer scan;         /* this scan's number (BV_SCANS) */
  int budget;               /* table entries left to look at */
  const void *seen[BYVAL_SEEN];
  int nseen;
} byval;

/* Was the table at idx looked through in this search? Marks it. (A full
** set answers no: the table is looked through again, as before.) */
static int byval_seen(lua_State *L, int idx, byval *b)
{
  const void *p = lua_topointer(L, idx);
  uint32_t i = ljp_hash_addr((uintptr_t)p) & (BYVAL_SEEN - 1);
  while (b->seen[i]) {
    if (b->seen[i] == p) return 1;
    i = (i + 1) & (BYVAL_SEEN - 1);
  }
  if (b->nseen >= BYVAL_SEEN * 3 / 4) return 0;
  b->seen[i] = p;
  b->nseen++;
  return 0;
}

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
  if (lua_objlen(L, idx) > 0 || byval_seen(L, idx, b)) return;
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
** slots b->fn, b->name. With b->levels, a level whose function was read
** by one of the last BYVAL_RESCAN scans is passed over: the outer levels
** (a main chunk, a frame loop, a server's handler) stay the same from one
** scan to the next, and reading their locals again (about 30k
** instructions for some 40 of them) found what the index holds already.
** A variable such a level sets later waits for its next read, or the
** run's end (ljp_lname_search_all reads every level). */
static void byval_live(lua_State *L, byval *b)
{
  lua_Debug ar;
  const char *nm;
  int level, i, top = lua_gettop(L);
  for (level = 0; b->budget > 0 && level < BYVAL_LEVELS &&
                  lua_getstack(L, level, &ar); level++) {
    int fi;
    if (!lua_getinfo(L, "f", &ar)) continue;   /* pushes the function */
    fi = lua_gettop(L);
    if (b->levels) {
      lua_Integer last;
      lua_pushvalue(L, fi);
      lua_rawget(L, b->levels);
      last = lua_tointeger(L, -1);
      lua_pop(L, 1);
      if (last > 0 && b->scan - last < BYVAL_RESCAN) {
        lua_settop(L, top);
        continue;
      }
      lua_pushvalue(L, fi);
      lua_pushinteger(L, b->scan);
      lua_rawset(L, b->levels);
    }
    for (i = 1; i <= 64 && b->budget > 0 && (nm = lua_getlocal(L, &ar, i));
         i++) {
      byval_value(L, nm, b);
      lua_pop(L, 1);
    }
    for (i = 1; i <= 64 && b->budget > 0 && (nm = lua_getupvalue(L, fi, i));
         i++) {
      byval_value(L, nm, b);
      lua_pop(L, 1);
    }
    lua_settop(L, top);
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

/* A table with weak mode ("k" or "v"), pushed. */
static void byval_weak(lua_State *L, const char *mode)
{
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, mode);
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
}

/* The index (made at the first use), pushed; its stack slot. */
static int byval_index(lua_State *L)
{
  lua_pushlightuserdata(L, &byval_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (!lua_istable(L, -1)) {                  /* the first search */
    lua_pop(L, 1);
    lua_createtable(L, BV_NSLOTS, 0);
    byval_weak(L, "v");
    lua_rawseti(L, -2, BV_FN);
    lua_newtable(L);
    lua_rawseti(L, -2, BV_NAME);
    byval_weak(L, "k");
    lua_rawseti(L, -2, BV_LEVELS);
    lua_pushlightuserdata(L, &byval_key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
  }
  return lua_gettop(L);
}

int ljp_lname_indexed(lua_State *L, uintptr_t bc, char *buf, size_t n)
{
  int top = lua_gettop(L), found;
  if (!bc || n < 2) return 0;
  found = byval_find(L, byval_index(L), bc, buf, n);
  lua_settop(L, top);
  return found;
}

/* A search's state over the index at ix: its two tables pushed, the
** live levels' table too when levels (else every level is read), no table
** seen yet, the live levels' budget. */
static void byval_open(lua_State *L, int ix, byval *b, lua_Integer scan,
                       int levels)
{
  lua_rawgeti(L, ix, BV_FN);
  b->fn = lua_gettop(L);
  lua_rawgeti(L, ix, BV_NAME);
  b->name = lua_gettop(L);
  b->levels = 0;
  if (levels) {
    lua_rawgeti(L, ix, BV_LEVELS);
    b->levels = lua_istable(L, -1) ? lua_gettop(L) : 0;
  }
  b->scan = scan;
  b->budget = BYVAL_LIVE_BUDGET;
  memset(b->seen, 0, sizeof(b->seen));
  b->nseen = 0;
}

void ljp_lname_search_all(lua_State *L)
{
  int top = lua_gettop(L), ix = byval_index(L);
  byval b;
  byval_open(L, ix, &b, 0, 0);
  byval_live(L, &b);
  b.budget = BYVAL_BUDGET;
  byval_walk(L, &b);
  lua_settop(L, top);
}

/* ljp_lname_by_value; walk: the globals may be walked (else never). */
static int byval_search(lua_State *L, uintptr_t bc, char *buf, size_t n,
                        int walk)
{
  int top = lua_gettop(L), ix, found;
  lua_Integer walks, misses, searches, streak;
  if (!bc || n < 2) return 0;
  ix = byval_index(L);
  found = byval_find(L, ix, bc, buf, n);
  if (!found) {
    byval b;
    searches = byval_geti(L, ix, BV_SEARCHES) + 1;
    byval_seti(L, ix, BV_SEARCHES, searches);
    if (searches < byval_geti(L, ix, BV_LIVE_NEXT)) {
      lua_settop(L, top);                     /* in a gap: deferred */
      return -1;
    }
    byval_seti(L, ix, BV_SCANS, byval_geti(L, ix, BV_SCANS) + 1);
    byval_open(L, ix, &b, byval_geti(L, ix, BV_SCANS), 1);
    byval_live(L, &b);
    found = byval_find(L, ix, bc, buf, n);
    walks = byval_geti(L, ix, BV_WALKS);
    misses = byval_geti(L, ix, BV_MISSES) + 1;
    if (!found) byval_seti(L, ix, BV_MISSES, misses);
    if (!found && walk && walks < BYVAL_WALKS &&
        misses >= byval_geti(L, ix, BV_NEXT)) {
      b.budget = BYVAL_BUDGET;
      byval_walk(L, &b);
      byval_seti(L, ix, BV_WALKS, walks + 1);
      byval_seti(L, ix, BV_NEXT, misses * 4);
      found = byval_find(L, ix, bc, buf, n);
    }
    /* the gap before the next search that may run */
    streak = found ? 0 : byval_geti(L, ix, BV_STREAK) + 1;
    byval_seti(L, ix, BV_STREAK, streak);
    byval_seti(L, ix, BV_LIVE_NEXT,
               streak < BYVAL_STREAK ? 0 :
               searches + (streak - BYVAL_STREAK >= 6 ? BYVAL_GAP_MAX :
                           (lua_Integer)1 << (streak - BYVAL_STREAK)));
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

int ljp_lname_by_value(lua_State *L, uintptr_t bc, char *buf, size_t n)
{
  return byval_search(L, bc, buf, n, 1);
}

int ljp_lname_live(lua_State *L, uintptr_t bc, char *buf, size_t n)
{
  return byval_search(L, bc, buf, n, 0);
}

int ljp_lname_by_value_at(lua_State *L, int idx, char *buf, size_t n)
{
  int r;
  if (!lua_isfunction(L, idx) || lua_iscfunction(L, idx)) return 0;
  r = ljp_lname_by_value(L, ljp_fn_bc((uintptr_t)lua_topointer(L, idx)), buf,
                         n);
  if (r > 0) lua_pop(L, 1);
  return r;
}

void ljp_lname_byval_counts(lua_State *L, uint64_t *searches,
                            uint64_t *scans)
{
  *searches = *scans = 0;
  lua_pushlightuserdata(L, &byval_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (lua_istable(L, -1)) {
    int ix = lua_gettop(L);
    *searches = (uint64_t)byval_geti(L, ix, BV_SEARCHES);
    *scans = (uint64_t)byval_geti(L, ix, BV_SCANS);
  }
  lua_pop(L, 1);
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

/* Learnings of every context (ljp_fname.gen): a number names one pair of
** strings, whatever context or table learnt them. */
static _Atomic uint32_t fname_gen;

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
  while (!(e->gen = atomic_fetch_add(&fname_gen, 1) + 1)) {}  /* 0: none */
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
