/*
** Trace tracking through jit.attach(handler, "trace").
**
** Keeps the code map's trace ranges current ("stop": jit.util.tracemc gives
** the machine code's address and size; "flush": all gone) and tells the
** signal handler when the recorder is active ("start" .. "stop"/"abort"),
** since arming a hook then would abort the trace being recorded. A hook
** armed before the recorder started (a sample taken in a trace whose exit
** then starts a side trace) is held back by raising g->hookcount, and
** released when recording ends: profiling never aborts a trace.
**
** It also remembers where each trace started (function and line, to
** charge compiled-code samples to it) and why traces were aborted (the
** "hot but interpreted" report). The handler is attached from start to
** stop, or, after ljprof.watch(), from then on until the state closes, so
** that traces compiled between runs are known too.
**
** jit.attach keeps one handler per event, so attaching would silently
** disconnect -jv, -jdump or a user's tool. We find the registry slot of
** the "trace" event at run time, chain to the handler we replaced, restore
** it at stop, and if somebody replaces us while running we re-attach on
** top of them (chaining to theirs). Normal context only.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "ljp.h"
#include "objects.h"

#define UP_GEN    lua_upvalueindex(1)
#define UP_PREV   lua_upvalueindex(2)
#define UP_MC     lua_upvalueindex(3)

/* Learn trace tr's machine code (address and size; 0 when it has none). */
static void trace_learn(ljp_ctx *ctx, lua_State *L, int mcidx, lua_Integer tr,
                        uintptr_t *addr, size_t *size)
{
  *addr = 0;
  *size = 0;
  lua_pushvalue(L, mcidx);
  lua_pushinteger(L, tr);
  if (lua_pcall(L, 1, 2, 0) == 0) {
    size_t n = 0;
    if (lua_isstring(L, -2)) {
      lua_tolstring(L, -2, &n);
      if (n && lua_isnumber(L, -1)) {
        *addr = (uintptr_t)lua_tonumber(L, -1);
        *size = n;
        ljp_codemap_trace_set(&ctx->map, (int32_t)tr, *addr, n);
      }
    }
  }
  lua_pop(L, 2);
}

/* -- Where traces start, why they abort -------------------------------------- */

static void trinfo_clear(ljp_trinfo *t)
{
  free(t->source);
  free(t->name);
  memset(t, 0, sizeof(*t));
}

static void aborts_reset(ljp_ctx *ctx)
{
  uint32_t i;
  for (i = 0; i < ctx->naborts; i++) {
    free(ctx->aborts[i].func);
    free(ctx->aborts[i].info);
    free(ctx->aborts[i].at);
  }
  free(ctx->aborts);
  ctx->aborts = NULL;
  ctx->naborts = 0;
  ctx->aborts_lost = 0;
}

static void trinfo_clear_all(ljp_ctx *ctx)
{
  uint32_t i;
  for (i = 0; i < ctx->ntrinfo; i++) trinfo_clear(&ctx->trinfo[i]);
}

void ljp_traces_reset(ljp_ctx *ctx)
{
  trinfo_clear_all(ctx);
  free(ctx->trinfo);
  ctx->trinfo = NULL;
  ctx->ntrinfo = 0;
  trinfo_clear(&ctx->trpending);
  aborts_reset(ctx);
}

ljp_trinfo *ljp_trace_info(ljp_ctx *ctx, int32_t trace)
{
  if (trace <= 0 || (uint32_t)trace >= ctx->ntrinfo) return NULL;
  return ctx->trinfo[trace].source ? &ctx->trinfo[trace] : NULL;
}

/* Chunk, first line and line at pc of the Lua function at fidx. */
static uint64_t str_hash(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

/* pcidx 0: the first line only (no jit.util.funcinfo call). A trace
** event's (function, pc) recurs (a trace retried after aborts, a side
** trace of a known loop): the line of a (chunk, first line, pc) is
** remembered, as jit.util.funcinfo builds a whole table per call. */
static int func_where(ljp_ctx *ctx, lua_State *L, int fidx, int pcidx,
                      lua_Debug *ar, int *line)
{
  ljp_linecache *c = NULL;
  uint64_t h = 0;
  lua_Integer pc = 0;
  *line = -1;
  if (!lua_isfunction(L, fidx) || lua_iscfunction(L, fidx)) return 0;
  lua_pushvalue(L, fidx);
  if (!lua_getinfo(L, ">S", ar) || !ar->source) return 0;
  if (!pcidx) { *line = ar->linedefined; return 1; }
  if (lua_type(L, pcidx) == LUA_TNUMBER) {
    pc = lua_tointeger(L, pcidx);
    h = str_hash(ar->source) ^ ((uint64_t)(uint32_t)ar->linedefined << 20) ^
        (uint64_t)pc;
    c = &ctx->linecache[(h ^ (h >> 17)) & (LJP_LINECACHE - 1)];
    if (c->h == h && c->linedefined == ar->linedefined && c->pc == pc) {
      *line = c->line;
      return 1;
    }
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->funcinfo_ref);
  if (lua_isfunction(L, -1)) {
    lua_pushvalue(L, fidx);
    lua_pushvalue(L, pcidx);
    if (lua_pcall(L, 2, 1, 0) == 0 && lua_istable(L, -1)) {
      lua_getfield(L, -1, "currentline");
      if (lua_isnumber(L, -1)) *line = (int)lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (*line < 0) *line = ar->linedefined;
  else if (c) {
    c->h = h;
    c->linedefined = ar->linedefined;
    c->pc = pc;
    c->line = *line;
  }
  return 1;
}

static char *buf_take(ljp_buf *b)
{
  char *s = malloc(b->n + 1);
  if (s) {
    memcpy(s, b->b ? b->b : "", b->n);
    s[b->n] = '\0';
  }
  return s;
}

static void trace_started(ljp_ctx *ctx, lua_State *L)
{
  lua_Debug ar;
  int line;
  trinfo_clear(&ctx->trpending);
  if (func_where(ctx, L, 3, 4, &ar, &line)) {
    lua_Debug fr;
    int level;
    ctx->trpending.source = strdup(ar.source);
    ctx->trpending.linedefined = ar.linedefined;
    ctx->trpending.line = line;
    ctx->trpending.side = lua_type(L, 5) == LUA_TNUMBER; /* parent trace */
    /* Its name, as its caller calls it (for samples taken when it is no
    ** longer on the stack): the function is active now, a few levels
    ** below this event handler. */
    for (level = 1; level < 8 && lua_getstack(L, level, &fr); level++) {
      lua_getinfo(L, "nS", &fr);
      if (fr.linedefined == ar.linedefined && fr.source &&
          !strcmp(fr.source, ar.source)) {
        if (fr.name) ctx->trpending.name = strdup(fr.name);
        break;
      }
    }
  }
}

static void trace_stopped(ljp_ctx *ctx, lua_Integer tr, uintptr_t addr,
                          size_t size)
{
  if (tr <= 0 || tr > 65535) return;
  if ((uint32_t)tr >= ctx->ntrinfo) {
    uint32_t n = ctx->ntrinfo ? ctx->ntrinfo : 64;
    ljp_trinfo *t;
    while (n <= (uint32_t)tr) n *= 2;
    if (!(t = realloc(ctx->trinfo, n * sizeof(ljp_trinfo)))) return;
    memset(t + ctx->ntrinfo, 0, (n - ctx->ntrinfo) * sizeof(ljp_trinfo));
    ctx->trinfo = t;
    ctx->ntrinfo = n;
  }
  trinfo_clear(&ctx->trinfo[tr]);
  ctx->trinfo[tr] = ctx->trpending;
  ctx->trinfo[tr].mc_addr = addr;
  ctx->trinfo[tr].mc_size = size;
  memset(&ctx->trpending, 0, sizeof(ctx->trpending));
}

/* Abort event: (what, tr, func, pc, code, info) */
static void trace_aborted(ljp_ctx *ctx, lua_State *L)
{
  ljp_buf b = {0};
  lua_Debug ar;
  char *func = NULL, *info = NULL, *at = NULL;
  int code = (int)lua_tointeger(L, 5), isnum = lua_type(L, 6) == LUA_TNUMBER;
  int line, start = ctx->trpending.line;
  uint32_t i;
  if (!ctx->trpending.source) return;
  ljp_put_location(&b, ctx->trpending.source, ctx->trpending.linedefined,
                   ctx->trpending.linedefined);
  func = buf_take(&b);
  b.n = 0;
  if (func_where(ctx, L, 3, 4, &ar, &line))
    ljp_put_location(&b, ar.source, ar.linedefined, line);
  at = buf_take(&b);
  b.n = 0;
  if (lua_iscfunction(L, 6)) {
    ljp_put_cfunc(&b, lua_tocfunction(L, 6));
  } else if (lua_isfunction(L, 6) && func_where(ctx, L, 6, 0, &ar, &line)) {
    ljp_put_location(&b, ar.source, ar.linedefined, ar.linedefined);
  } else if (lua_isstring(L, 6)) {
    size_t n;
    const char *s = lua_tolstring(L, 6, &n);
    if (ljp_buf_reserve(&b, n) == 0) { memcpy(b.b, s, n); b.n = n; }
  }
  info = buf_take(&b);
  ljp_buf_free(&b);
  if (!func || !at || !info) goto out;
  for (i = 0; i < ctx->naborts; i++) {
    ljp_abort *a = &ctx->aborts[i];
    if (a->code == code && a->line == start && !strcmp(a->func, func) &&
        !strcmp(a->info, info) && !strcmp(a->at, at)) {
      a->count++;
      goto out;
    }
  }
  if (ctx->naborts >= LJP_MAX_ABORTS) {
    ctx->aborts_lost++;
    goto out;
  }
  if (!(ctx->naborts & (ctx->naborts + 1))) {  /* 0, 1, 3, 7...: grow */
    ljp_abort *t = realloc(ctx->aborts,
                           (ctx->naborts + 1) * 2 * sizeof(ljp_abort));
    if (!t) goto out;
    ctx->aborts = t;
  }
  ctx->aborts[ctx->naborts].func = func;
  ctx->aborts[ctx->naborts].line = start;
  ctx->aborts[ctx->naborts].code = code;
  ctx->aborts[ctx->naborts].info = info;
  ctx->aborts[ctx->naborts].info_is_num = isnum;
  ctx->aborts[ctx->naborts].at = at;
  ctx->aborts[ctx->naborts].count = 1;
  ctx->naborts++;
  return;
out:
  free(func);
  free(info);
  free(at);
}

/* -- The event handler ------------------------------------------------------- */

/* Recording is over: a hook held back at its start fires at the next
** bytecode. */
static void release_hook(ljp_ctx *ctx)
{
  if (!ctx->hook_held) return;
  ctx->hook_held = 0;
  if (ljp_armed(ctx)) ljp_vm_hookcount(ctx->vm_g, 1);
}

/* The jit.attach handler: (what, tr, func, pc, otr, oex). */
static int traces_event(lua_State *L)
{
  int nargs = lua_gettop(L);
  /* Ours only while it is this state's current install: a handler left
  ** behind in somebody's chain by an earlier install does nothing. */
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  if (ctx && (!ctx->traces_key ||
              ctx->traces_gen != (uint32_t)lua_tointeger(L, UP_GEN)))
    ctx = NULL;
  const char *what = lua_tostring(L, 1);
  if (ctx && what) {
    int was = ctx->recording;
    if (!strcmp(what, "start")) {
      ctx->recording = 1;
      /* A hook armed now would fire at the first recorded instruction and
      ** abort the trace; lua_sethook would abort it too. Hold the hook
      ** back by its countdown instead, until recording ends. */
      if (!ctx->hook_held && ctx->vm_g && ljp_vml.hookcount_ok &&
          ljp_armed(ctx)) {
        ljp_vm_hookcount(ctx->vm_g, INT32_MAX);
        ctx->hook_held = 1;
      }
      trace_started(ctx, L);
      ljp_vm_learn_jstate(ctx->vm_g, LJP_JS_START);
    } else if (!strcmp(what, "stop")) {
      ctx->recording = 0;
      uintptr_t addr;
      size_t size;
      ljp_vm_learn_jstate(ctx->vm_g, LJP_JS_STOP);
      trace_learn(ctx, L, UP_MC, lua_tointeger(L, 2), &addr, &size);
      trace_stopped(ctx, lua_tointeger(L, 2), addr, size);
    } else if (!strcmp(what, "abort")) {
      ctx->recording = 0;
      trace_aborted(ctx, L);
      trinfo_clear(&ctx->trpending);
    } else if (!strcmp(what, "flush")) {
      ctx->recording = 0;
      ljp_codemap_trace_flush(&ctx->map);
      trinfo_clear_all(ctx);
    }
    if (was && !ctx->recording) release_hook(ctx);
    if (!ctx->recording) ljp_settle(ctx); /* samples waited for the recorder */
    /* Trace code ranges replaced above: free the old arrays once no
    ** handler can hold them (a long run compiling many traces would
    ** otherwise keep them all). */
    ljp_epoch_collect();
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
  lua_pushinteger(L, (lua_Integer)++ctx->traces_gen);
  lua_pushnil(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->tracemc_ref);
  lua_pushcclosure(L, traces_event, 3);
  handler = lua_gettop(L);
  ljp_cname_add(traces_event, "[ljprof trace events]");
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

static int traces_installed(ljp_ctx *ctx, lua_State *L);

void ljp_traces_attach(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L), mc;
  lua_Integer tr, miss = 0;
  /* Installed since ljprof.watch(): keep it, and what it saw. */
  int keep = traces_installed(ctx, L);
  if (!keep) {
    ctx->traces_key = 0;
    ctx->recording = 0;
    unref(L, &ctx->attach_ref);
    unref(L, &ctx->tracemc_ref);
    push_jitfn(L, "jit", "attach");
    ctx->attach_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    push_jitfn(L, "jit.util", "tracemc");
    ctx->tracemc_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    unref(L, &ctx->funcinfo_ref);
    push_jitfn(L, "jit.util", "funcinfo");
    ctx->funcinfo_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    trinfo_clear(&ctx->trpending);
    ctx->hook_held = 0;
  }
  aborts_reset(ctx);             /* per run */
  if (!keep && !traces_install(ctx, L)) {
    ljp_traces_reset(ctx);
    return;
  }
  /* Traces compiled before the start. Numbers are reused lowest-first, so
  ** live traces are dense; stop after a long run of free numbers. Where a
  ** trace started is kept from an earlier run of this state only if its
  ** machine code is still the same (else the number was reused). */
  lua_rawgeti(L, LUA_REGISTRYINDEX, ctx->tracemc_ref);
  mc = lua_gettop(L);
  for (tr = 1; tr < (lua_Integer)ctx->ntrinfo; tr++) {
    ljp_trinfo *ti = &ctx->trinfo[tr];
    uintptr_t addr = 0;
    size_t size = 0;
    if (!ti->source) continue;
    if (lua_isfunction(L, mc)) trace_learn(ctx, L, mc, tr, &addr, &size);
    if (!addr || addr != ti->mc_addr || size != ti->mc_size) trinfo_clear(ti);
    else ti->have_key = 0;   /* stack ids are per run */
  }
  if (lua_isfunction(L, mc)) {
    for (tr = 1; tr < 65536 && miss < 1024; tr++) {
      uintptr_t addr;
      size_t size;
      trace_learn(ctx, L, mc, tr, &addr, &size);
      miss = addr ? 0 : miss + 1;
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
  release_hook(ctx);
  traces_install(ctx, L);
}

void ljp_traces_detach(ljp_ctx *ctx, lua_State *L)
{
  int top = lua_gettop(L);
  ctx->recording = ctx->recording && ctx->watching;
  if (ctx->watching && traces_installed(ctx, L)) return; /* keeps watching */
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
  unref(L, &ctx->funcinfo_ref);
  ctx->traces_key = 0;
  ctx->recording = 0;
  ctx->hook_held = 0;
  lua_settop(L, top);
}
