/*
** Trace tracking through jit.attach(handler, "trace").
**
** Keeps the code map's trace ranges current ("stop": jit.util.tracemc gives
** the machine code's address and size; "flush": all gone) and tells the
** signal handler when the recorder is active ("start" .. "stop"/"abort"),
** since arming a hook then would abort the trace being recorded.
**
** jit.attach keeps one handler per event, so attaching would silently
** disconnect -jv, -jdump or a user's tool. We find the registry slot of
** the "trace" event at run time, chain to the handler we replaced, restore
** it at stop, and if somebody replaces us while running we re-attach on
** top of them (chaining to theirs). Normal context only.
*/
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"

#define UP_TOKEN  lua_upvalueindex(1)
#define UP_PREV   lua_upvalueindex(2)
#define UP_MC     lua_upvalueindex(3)

static void trace_learn(ljp_ctx *ctx, lua_State *L, int mcidx, lua_Integer tr)
{
  lua_pushvalue(L, mcidx);
  lua_pushinteger(L, tr);
  if (lua_pcall(L, 1, 2, 0) == 0) {
    size_t size = 0;
    if (lua_isstring(L, -2)) {
      lua_tolstring(L, -2, &size);
      if (size && lua_isnumber(L, -1))
        ljp_codemap_trace_set(&ctx->map, (int32_t)tr,
                              (uintptr_t)lua_tonumber(L, -1), size);
    }
  }
  lua_pop(L, 2);
}

/* The jit.attach handler: (what, tr, func, pc, otr, oex). */
static int traces_event(lua_State *L)
{
  int nargs = lua_gettop(L);
  ljp_ctx *ctx = ljp_slot_ctx((uint32_t)lua_tointeger(L, UP_TOKEN));
  const char *what = lua_tostring(L, 1);
  if (ctx && what) {
    if (!strcmp(what, "start")) {
      ctx->recording = 1;
    } else if (!strcmp(what, "stop")) {
      ctx->recording = 0;
      trace_learn(ctx, L, UP_MC, lua_tointeger(L, 2));
    } else if (!strcmp(what, "abort")) {
      ctx->recording = 0;
    } else if (!strcmp(what, "flush")) {
      ctx->recording = 0;
      ljp_codemap_trace_flush(&ctx->map);
    }
    if (!ctx->recording) ljp_settle(ctx); /* samples waited for the recorder */
  }
  if (lua_isfunction(L, UP_PREV)) {
    lua_pushvalue(L, UP_PREV);
    lua_insert(L, 1);
    lua_call(L, nargs, 0);
  }
  return 0;
}

/* Push jit.<name> or require("jit.util").<name>; nil if absent. */
static void push_jitfn(lua_State *L, const char *mod, const char *name)
{
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  if (lua_pcall(L, 1, 1, 0) != 0 || !lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return;
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

static void unref(lua_State *L, int *ref)
{
  if (*ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, *ref);
  *ref = LUA_NOREF;
}

/* Push _VMEVENTS (may be nil before the first jit.attach). */
static void push_vmevents(lua_State *L)
{
  lua_getfield(L, LUA_REGISTRYINDEX, "_VMEVENTS");
}

/* Attach our handler chaining to whatever is in the "trace" slot now.
** Calls only jit.attach (resolved at start): this also runs at a safe
** point, where no module may be loaded. */
static int traces_install(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L), snap, attach, handler;
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->attach_ref);
  attach = lua_gettop(L);
  if (!lua_isfunction(L, attach)) goto out;  /* no JIT in this build */
  /* Snapshot the event table, then attach a fresh closure and find the
  ** slot it landed in: that slot's old value is the handler to chain. */
  lua_newtable(L);
  snap = lua_gettop(L);
  push_vmevents(L);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, snap);
    }
  }
  lua_pop(L, 1);
  lua_pushinteger(L, (lua_Integer)atomic_load(&ctx->token));
  lua_pushnil(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->tracemc_ref);
  lua_pushcclosure(L, traces_event, 3);
  handler = lua_gettop(L);
  lua_pushvalue(L, attach);
  lua_pushvalue(L, handler);
  lua_pushstring(L, "trace");
  if (lua_pcall(L, 2, 0, 0) != 0) goto out;
  push_vmevents(L);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_rawequal(L, -1, handler) && lua_type(L, -2) == LUA_TNUMBER) {
        ctx->traces_key = lua_tointeger(L, -2);
        lua_pushvalue(L, -2);
        lua_rawget(L, snap);          /* previous handler (or nil) */
        lua_setupvalue(L, handler, 2);
        lua_pop(L, 2);
        break;
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (ctx->traces_key) {
    unref(L, &ctx->traces_ref);
    lua_pushvalue(L, handler);
    ctx->traces_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
out:
  lua_settop(L, top);
  return ctx->traces_key != 0;
}

void ljp_traces_attach(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L), mc;
  lua_Integer tr, miss = 0;
  ctx->traces_key = 0;
  ctx->recording = 0;
  unref(L, &ctx->attach_ref);
  unref(L, &ctx->tracemc_ref);
  push_jitfn(L, "jit", "attach");
  ctx->attach_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  push_jitfn(L, "jit.util", "tracemc");
  ctx->tracemc_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (!traces_install(ctx, L)) return;
  /* Traces compiled before the start. Numbers are reused lowest-first, so
  ** live traces are dense; stop after a long run of free numbers. */
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->tracemc_ref);
  mc = lua_gettop(L);
  if (lua_isfunction(L, mc)) {
    for (tr = 1; tr < 65536 && miss < 1024; tr++) {
      uint32_t n0 = ctx->map.traces.n;
      trace_learn(ctx, L, mc, tr);
      miss = ctx->map.traces.n == n0 ? miss + 1 : 0;
    }
  }
  lua_settop(L, top);
}

/* Is our handler still the one in the "trace" slot? */
static int traces_installed(ljp_ctx *ctx, lua_State *L)
{
  int ok = 0;
  if (!ctx->traces_key || ctx->traces_ref == LUA_NOREF) return 0;
  push_vmevents(L);
  if (lua_istable(L, -1)) {
    lua_rawgeti(L, -1, (int)ctx->traces_key);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->traces_ref);
    ok = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  return ok;
}

void ljp_traces_check(ljp_ctx *ctx, lua_State *L)
{
  if (!ctx->traces_key || traces_installed(ctx, L)) return;
  /* Replaced by somebody: we missed events, so forget what we knew about
  ** the recorder, and attach again on top of the newcomer. */
  ctx->recording = 0;
  traces_install(ctx, L);
}

void ljp_traces_detach(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L);
  if (traces_installed(ctx, L)) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->attach_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->traces_ref);
    lua_getupvalue(L, -1, 2);         /* the handler we replaced */
    if (lua_isfunction(L, -1)) {
      lua_pushstring(L, "trace");
      lua_remove(L, -3);
      lua_pcall(L, 2, 0, 0);          /* jit.attach(prev, "trace") */
    } else {
      lua_pop(L, 1);
      lua_pcall(L, 1, 0, 0);          /* jit.attach(ours): detach */
    }
  }
  unref(L, &ctx->traces_ref);
  unref(L, &ctx->attach_ref);
  unref(L, &ctx->tracemc_ref);
  ctx->traces_key = 0;
  ctx->recording = 0;
  lua_settop(L, top);
}
