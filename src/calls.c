/*
** Exact call counts, opt-in (ljprof_options.calls, record{calls=true},
** -jprof=.../calls=on, ljprof --calls): every call of every function,
** Lua, C and builtin, is counted while sampling goes on as usual.
**
** A Lua state has one hook. While counting, ljprof's hook (ljp_hook)
** stays installed between samples with the program's own mask plus
** LUA_MASKCALL (hook.c's rest state); the signal handler arms the
** sample's count bit on top of that, and the safe point puts the counting
** state back instead of the program's hook. Every event the program's hook asked for is
** forwarded to it. Call hooks do not fire in compiled code, so counting
** turns the JIT off and flushes the traces, and puts the engine back as
** it was at stop. debug.sethook and debug.gethook are wrapped while
** counting, so that a program that sets or reads its hook keeps working
** and counting goes on.
**
** Rules: ljp_calls_count runs in the hook for every call. For a function
** seen before it is a lookup in a weak-keyed Lua table (function -> id)
** and an increment: no allocation, no Lua call. Keys are functions, so
** closures of one prototype count together (their ids are interned by
** "chunk:linedefined"), and a collected function's entry goes with it,
** so a new function at a reused address starts afresh. The hook state
** itself is hook.c's. Normal context.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <luajit.h>

#include "ljp.h"
#include "vm.h"

typedef struct ljp_callfn {
  uint64_t calls;
  uint32_t func;            /* text: "chunk:linedefined" or the C name */
  uint32_t name;            /* text: name at the first call site, or 0 */
  uint32_t source;          /* text: chunk name as in lua_Debug (Lua) */
  int linedefined, lastlinedefined;
  char what;                /* 'L' Lua, 'M' main chunk, 'C' C/builtin */
} ljp_callfn;

typedef struct ljp_calls {
  ljp_strtab keys;          /* id -> key ("L<source>\n<line>", "C<name>") */
  ljp_strtab text;          /* display strings */
  ljp_callfn *fn;           /* by key id (0 unused) */
  uint32_t cap;
  int ref;                  /* registry: weak-keyed table function -> id */
  int jit_was_on;           /* restore the engine at stop */
  int debug_ref;            /* the debug table we patched, or LUA_NOREF */
  int sethook_ref, gethook_ref;    /* the originals */
  int sethook_wrap, gethook_wrap;  /* our wrappers */
  const void *sethook_fn;   /* the original sethook: its call is ours */
  const void *gethook_fn;
  ljp_cname_memo cnames;    /* C name look-ups done at first calls */
  ljp_buf buf;
} ljp_calls;


/* -- Counting ------------------------------------------------------------------ */

static uint32_t text_id(ljp_calls *c, const char *s, size_t len)
{
  uint32_t id = ljp_strtab_intern(&c->text, s, len);
  return id == UINT32_MAX ? 0 : id;
}

/* Name the C function at fi into c->buf as the rest of ljprof does: by its
** C entry (string.rep, cjson.encode, print, [builtin#N], @0x...); a fast
** function without a C entry by its id, [builtin#N]. */
static void name_cfunc(ljp_calls *c, lua_State *L, int fi)
{
  lua_CFunction cf = lua_tocfunction(L, fi);
  if (cf) {
    ljp_name_cfunc(&c->cnames, L, cf, &c->buf);
  } else {
    c->buf.n = 0;
    ljp_put_ffunc_at(&c->buf, L, fi);
  }
}

static int grow(ljp_calls *c, uint32_t id)
{
  if (id >= c->cap) {
    uint32_t ncap = c->cap ? c->cap * 2 : 256;
    ljp_callfn *f;
    while (ncap <= id) ncap *= 2;
    if (!(f = realloc(c->fn, ncap * sizeof(*f)))) return -1;
    memset(f + c->cap, 0, (ncap - c->cap) * sizeof(*f));
    c->fn = f;
    c->cap = ncap;
  }
  return 0;
}

/* First call of the function at fi (weak table at ti): give it its id. */
static void first_call(ljp_calls *c, lua_State *L, lua_Debug *ar, int fi,
                       int ti)
{
  lua_Debug d;
  ljp_buf *b = &c->buf;
  uint32_t id, n0;
  lua_pushvalue(L, fi);
  if (!lua_getinfo(L, ">S", &d)) return;
  b->n = 0;
  if (d.what[0] == 'C') {
    name_cfunc(c, L, fi);
    if (ljp_buf_reserve(b, 1) != 0) return;
    memmove(b->b + 1, b->b, b->n);
    b->b[0] = 'C';
    b->n++;
  } else {
    int n;
    size_t sl = strlen(d.source);
    if (ljp_buf_reserve(b, sl + 24) != 0) return;
    b->b[0] = 'L';
    memcpy(b->b + 1, d.source, sl);
    n = snprintf(b->b + 1 + sl, 24, "\n%d", d.linedefined);
    b->n = 1 + sl + (size_t)n;
  }
  n0 = c->keys.n;
  id = ljp_strtab_intern(&c->keys, b->b, b->n);
  if (id == UINT32_MAX || grow(c, id) != 0) return;
  if (id >= n0) {  /* a new key: describe it */
    ljp_callfn *f = &c->fn[id];
    if (d.what[0] == 'C') {
      f->what = 'C';
      f->func = text_id(c, b->b + 1, b->n - 1);
      f->linedefined = f->lastlinedefined = -1;
    } else {
      f->what = d.what[0] == 'm' ? 'M' : 'L';
      f->source = text_id(c, d.source, strlen(d.source));
      f->linedefined = d.linedefined;
      f->lastlinedefined = d.lastlinedefined;
      b->n = 0;
      ljp_put_location(b, d.source, d.linedefined, d.linedefined);
      f->func = text_id(c, b->b ? b->b : "", b->n);
    }
    d = *ar;  /* the hook's own record goes on to the program's hook */
    if (lua_getinfo(L, "n", &d) && d.name)
      f->name = text_id(c, d.name, strlen(d.name));
  }
  c->fn[id].calls++;
  lua_pushvalue(L, fi);
  lua_pushnumber(L, (lua_Number)id);
  lua_rawset(L, ti);
}

int ljp_calls_count(ljp_ctx *ctx, lua_State *L, lua_Debug *ar)
{
  ljp_calls *c = ctx->calls;
  int top = lua_gettop(L);
  lua_Number id;
  if (!c || !lua_getinfo(L, "f", ar)) return 0;
  if (ctx->calls_skip) {  /* the wrappers' call of the original function */
    const void *p = lua_topointer(L, -1);
    ctx->calls_skip = 0;
    if (p == c->sethook_fn || p == c->gethook_fn) {
      lua_settop(L, top);
      return 1;
    }
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
  lua_pushvalue(L, top + 1);
  lua_rawget(L, top + 2);
  id = lua_tonumber(L, top + 3);
  if (id > 0)
    c->fn[(uint32_t)id].calls++;
  else if (lua_istable(L, top + 2))
    first_call(c, L, ar, top + 1, top + 2);
  lua_settop(L, top);
  return 0;
}

static void patch_one(lua_State *L, int dt, const char *k,
                      lua_CFunction wrap, int *orig_ref, int *wrap_ref,
                      const void **orig_fn)
{
  lua_getfield(L, dt, k);
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  *orig_fn = lua_topointer(L, -1);
  lua_pushvalue(L, -1);
  *orig_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcclosure(L, wrap, 1);
  lua_pushvalue(L, -1);
  *wrap_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_setfield(L, dt, k);
}

static void unpatch_one(lua_State *L, int dt, const char *k, int *orig_ref,
                        int *wrap_ref)
{
  if (*orig_ref == LUA_NOREF) return;
  lua_getfield(L, dt, k);
  lua_rawgeti(L, LUA_REGISTRYINDEX, *wrap_ref);
  if (lua_rawequal(L, -1, -2)) {  /* still ours: put the original back */
    lua_rawgeti(L, LUA_REGISTRYINDEX, *orig_ref);
    lua_setfield(L, dt, k);
  }
  lua_pop(L, 2);
  luaL_unref(L, LUA_REGISTRYINDEX, *orig_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, *wrap_ref);
  *orig_ref = *wrap_ref = LUA_NOREF;
}

static void patch_debug(lua_State *L, ljp_calls *c, const ljp_entries *e)
{
  int top = lua_gettop(L);
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "loaded");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "debug");
      if (lua_istable(L, -1)) {
        int dt = lua_gettop(L);
        lua_pushvalue(L, dt);
        c->debug_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        patch_one(L, dt, "sethook", e->sethook_wrap, &c->sethook_ref,
                  &c->sethook_wrap, &c->sethook_fn);
        patch_one(L, dt, "gethook", e->gethook_wrap, &c->gethook_ref,
                  &c->gethook_wrap, &c->gethook_fn);
      }
    }
  }
  lua_settop(L, top);
}

static void unpatch_debug(lua_State *L, ljp_calls *c)
{
  int dt;
  if (c->debug_ref == LUA_NOREF) return;
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->debug_ref);
  dt = lua_gettop(L);
  unpatch_one(L, dt, "sethook", &c->sethook_ref, &c->sethook_wrap);
  unpatch_one(L, dt, "gethook", &c->gethook_ref, &c->gethook_wrap);
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, c->debug_ref);
  c->debug_ref = LUA_NOREF;
}

/* -- JIT ------------------------------------------------------------------------ */

/* jit.status(): is the engine on? -1 without a jit module. */
static int jit_status(lua_State *L)
{
  int top = lua_gettop(L), on = -1;
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "loaded");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "jit");
      if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "status");
        if (lua_isfunction(L, -1) && lua_pcall(L, 0, 1, 0) == 0)
          on = lua_toboolean(L, -1);
      }
    }
  }
  lua_settop(L, top);
  return on;
}

/* luaJIT_setmode, protected: LuaJIT refuses it inside a __gc metamethod
** (a run stopped by a finalizer, as at lua_close). 1 on success. */
static int setmode_cp(lua_State *L)
{
  luaJIT_setmode(L, 0, *(int *)lua_touserdata(L, 1));
  return 0;
}

static int jit_mode(lua_State *L, int mode)
{
  if (lua_cpcall(L, setmode_cp, &mode) == 0) return 1;
  lua_pop(L, 1);
  return 0;
}

/* -- Run ------------------------------------------------------------------------- */

static void calls_release(ljp_calls *c)
{
  ljp_strtab_free(&c->keys);
  ljp_strtab_free(&c->text);
  free(c->fn);
  c->fn = NULL;
  c->cap = 0;
  ljp_buf_free(&c->buf);
}

int ljp_calls_start(ljp_ctx *ctx, lua_State *L, char *err, size_t errlen)
{
  ljp_calls *c = ctx->calls;
  if (!c) {
    if (!(c = calloc(1, sizeof(*c)))) goto oom;
    ctx->calls = c;
  } else {
    calls_release(c);
  }
  c->ref = c->debug_ref = LUA_NOREF;
  c->sethook_ref = c->gethook_ref = LUA_NOREF;
  c->sethook_wrap = c->gethook_wrap = LUA_NOREF;
  c->sethook_fn = c->gethook_fn = NULL;
  ljp_cname_memo_limit(&c->cnames, 32, 1);  /* at most 32 look-ups a run,
                                            ** each function looked up */
  ljp_cname_memo_reset(&c->cnames);
  if (ljp_strtab_init(&c->keys) != 0 || ljp_strtab_init(&c->text) != 0 ||
      grow(c, 1) != 0)
    goto oom;
  lua_newtable(L);                    /* function -> id, weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  c->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  /* Call hooks do not fire in compiled code: no new traces, and the
  ** existing ones (still entered from their loops while the engine is
  ** off) flushed. */
  c->jit_was_on = jit_status(L) == 1;
  if ((c->jit_was_on && !jit_mode(L, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF)) ||
      !jit_mode(L, LUAJIT_MODE_ENGINE | LUAJIT_MODE_FLUSH)) {
    snprintf(err, errlen, "ljprof: cannot count calls here: the JIT cannot "
             "be turned off (inside a __gc metamethod?)");
    luaL_unref(L, LUA_REGISTRYINDEX, c->ref);
    c->ref = LUA_NOREF;
    calls_release(c);
    return -1;
  }
  patch_debug(L, c, ctx->entries);
  ctx->calls_skip = 0;
  ljp_hook_count_calls(&ctx->hook, 1);
  return 0;
oom:
  snprintf(err, errlen, "ljprof: out of memory (call counts)");
  if (c) calls_release(c);
  return -1;
}

void ljp_calls_stop(ljp_ctx *ctx, lua_State *L)
{
  ljp_calls *c = ctx->calls;
  if (!ctx->hook.counting) return;
  ljp_hook_count_calls(&ctx->hook, 0);  /* the program's own hook back */
  ctx->calls_skip = 0;
  if (!c) return;
  unpatch_debug(L, c);
  luaL_unref(L, LUA_REGISTRYINDEX, c->ref);
  c->ref = LUA_NOREF;
  /* Inside a finalizer (stopped at lua_close) the JIT stays off. */
  if (c->jit_was_on) jit_mode(L, LUAJIT_MODE_ENGINE | LUAJIT_MODE_ON);
  c->jit_was_on = 0;
}

void ljp_calls_free(ljp_ctx *ctx)
{
  if (!ctx->calls) return;
  calls_release(ctx->calls);
  free(ctx->calls);
  ctx->calls = NULL;
}

/* -- Results ---------------------------------------------------------------------- */

static void push_text(lua_State *L, ljp_calls *c, uint32_t id)
{
  const ljp_str *s = ljp_strtab_get(&c->text, id);
  lua_pushlstring(L, s->s, s->len);
}

/* Is the func of entry i of the list at idx a builtin, [builtin#N]? Leaves
** the entry and its func pushed. */
static int is_builtin(lua_State *L, int idx, int i)
{
  const char *s;
  lua_rawgeti(L, idx, i);
  lua_getfield(L, -1, "func");
  s = lua_tostring(L, -1);
  return s && !strncmp(s, "[builtin#", 9);
}

/* [builtin#N] -> the library name ("pcall", "string.byte"), as the
** reports name fast functions: jit.prof.model's builtin_name, the one
** owner of that mapping, on the func of each builtin entry of the list on
** top. Called after the list is built: these calls may be counted. */
static void map_builtins(lua_State *L, int k)
{
  int i, list = lua_gettop(L), bn;
  for (i = 1; i <= k && !is_builtin(L, list, i); i++) lua_settop(L, list);
  lua_settop(L, list);
  if (i > k) return;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "jit.prof.model");
  if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "builtin_name");
    bn = lua_gettop(L);
    for (; i <= k && lua_isfunction(L, bn); i++) {
      if (is_builtin(L, list, i)) {
        lua_pushvalue(L, bn);
        lua_insert(L, -2);
        if (lua_pcall(L, 1, 1, 0) == 0 && lua_isstring(L, -1))
          lua_setfield(L, -2, "func");
      }
      lua_settop(L, bn);
    }
  }
  lua_settop(L, list);
}

void ljp_calls_push(ljp_ctx *ctx, lua_State *L)
{
  ljp_calls *c = ctx ? ctx->calls : NULL;
  uint32_t id, n;
  int k = 0;
  lua_newtable(L);
  n = c && c->fn ? c->keys.n : 0;
  for (id = 1; id < n; id++) {
    const ljp_callfn *f = &c->fn[id];
    if (!f->calls || !f->func) continue;
    lua_createtable(L, 0, 7);
    push_text(L, c, f->func);
    lua_setfield(L, -2, "func");
    if (f->name) {
      push_text(L, c, f->name);
      lua_setfield(L, -2, "name");
    }
    lua_pushstring(L, f->what == 'C' ? "C" : f->what == 'M' ? "main" : "Lua");
    lua_setfield(L, -2, "what");
    if (f->what == 'C') lua_pushliteral(L, "=[C]");
    else push_text(L, c, f->source);
    lua_setfield(L, -2, "source");
    lua_pushinteger(L, f->linedefined);
    lua_setfield(L, -2, "linedefined");
    lua_pushinteger(L, f->lastlinedefined);
    lua_setfield(L, -2, "lastlinedefined");
    lua_pushnumber(L, (lua_Number)f->calls);
    lua_setfield(L, -2, "calls");
    lua_rawseti(L, -2, ++k);
  }
  if (k) map_builtins(L, k);
}
