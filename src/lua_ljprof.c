/*
** The Lua module: require "ljprof". ENTRY (called by Lua).
**
**   start(mode, cb [, opts])      exactly jit.profile.start (cb required)
**   stop()                        -> true, or false + message if the
**                                    callback failed and stopped profiling
**   dumpstack([thread,] fmt, depth)   exactly jit.profile.dumpstack (but
**                                    "[host]" in the host ticks' call)
**   record([mode | opts])         sample and aggregate, no callback
**   summary()                     -> { {stack=, vmstate=, zone=, count=,
**                                      labels= (when set)}, ...}
**   profile()                     -> the run as structured frames and
**                                    samples (jit/prof/model.lua)
**   stats()                       -> counters of the current/last run
**   functions()                   -> ticks per leaf function and VM state
**   traces()                      -> ticks per compiled trace
**   aborts()                      -> trace aborts and their reasons
**   calls()                       -> exact call counts of a run with
**                                    calls=true: { {func=, name=, what=,
**                                    source=, linedefined=,
**                                    lastlinedefined=, calls=}, ...}
**   watch()                       keep watching trace compilation from
**                                 now on, between runs too
**   on_signal(names, module, func, arg)  on SIGTERM/SIGHUP/SIGINT (if
**                                 not handled already): a helper thread
**                                 calls require(module)[func](arg, name)
**                                 in a Lua state of its own whose ljprof
**                                 reads this run, then the program dies
**                                 of the signal; on_signal(false): the
**                                 run writes itself now, a signal waits
**                                 for on_signal(nil), which undoes
**   write_apart(module, func, arg) -> true, or nil and a line: after
**                                 stop, require(module)[func](arg) in a
**                                 Lua state of ljprof's own whose ljprof
**                                 reads this run (its garbage collector
**                                 works, and the program's heap is not
**                                 walked: writing at lua_close runs in a
**                                 __gc, where LuaJIT collects nothing)
**   running()                     -> boolean
**   clocks()                      -> the clocks' names in the order of
**                                    ljprof_clock: {"cpu", "wall", ...}
**                                    (clocks.c's table)
**
** opts: clock (a name of clocks()), interval (ms) or rate
** (Hz), duration (s), signal, ring, fmt, depth, output, mode, native,
** calls.
** A thin layer over the C API; normal context only.
*/
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>

#include "ljp.h"
#include "clocks.h"
#include "outfile.h"
#include "ownstate.h"
#include "query.h"
#include "spawn.h"
#include "vm.h"
#include "x64dec.h"

/* -- Lua callbacks ----------------------------------------------------------- */

typedef struct luacb {
  lua_State *co;     /* private coroutine the callback runs on */
  int cb_ref, co_ref;
} luacb;

static const char luacb_key = 'l'; /* registry: the current run's luacb */
static const char luacb_prev_key = 'p'; /* the one before: its coroutine
                                           may still be running (start()
                                           from the callback) */

static void lua_trampoline(void *data, lua_State *L, int samples, int vmstate)
{
  luacb *d = data;
  lua_State *co = d->co;
  char vs = (char)vmstate;
  lua_settop(co, 0);
  lua_rawgeti(co, LUA_REGISTRYINDEX, d->cb_ref);
  lua_pushthread(L);
  lua_xmove(L, co, 1);
  lua_pushinteger(co, samples);
  lua_pushlstring(co, &vs, 1);
  if (lua_pcall(co, 3, 0, 0) != 0) {
    const char *msg = lua_tostring(co, -1);
    ljp_q_fail(L, msg ? msg : "(error object is not a string)");
    lua_settop(co, 0);
  }
}

static int luacb_gc(lua_State *L)
{
  luacb *d = lua_touserdata(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, d->cb_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, d->co_ref);
  return 0;
}

/* Anchor a luacb for the function at idx; replaces the previous run's. */
static luacb *luacb_new(lua_State *L, int idx)
{
  luacb *d;
  lua_pushlightuserdata(L, (void *)&luacb_prev_key);
  lua_pushlightuserdata(L, (void *)&luacb_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_pushlightuserdata(L, (void *)&luacb_key);
  d = lua_newuserdata(L, sizeof(luacb));
  d->co = lua_newthread(L);
  d->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, idx);
  d->cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_newtable(L);
  lua_pushcfunction(L, luacb_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  return d;
}

/* -- Options ------------------------------------------------------------------ */

/* The option value on top of the stack, checked: one line naming the
** option, the value and what is accepted. */
static const char *shown(lua_State *L)
{
  return lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER
             ? lua_tostring(L, -1) : luaL_typename(L, -1);
}

static lua_Integer opt_int(lua_State *L, const char *k, lua_Integer lo,
                           lua_Integer hi, const char *accepted)
{
  lua_Number v = lua_tonumber(L, -1);
  if (lua_type(L, -1) != LUA_TNUMBER || !(v >= (lua_Number)lo) ||
      !(v <= (lua_Number)hi) || v != floor(v))
    luaL_error(L, "ljprof: bad %s '%s' (accepted: %s)", k, shown(L),
               accepted);
  return (lua_Integer)v;
}

static const char *opt_str(lua_State *L, const char *k, const char *accepted)
{
  if (lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "ljprof: bad %s '%s' (accepted: %s)", k, shown(L),
               accepted);
  return lua_tostring(L, -1);
}

/* The boolean value of option k at the top of the stack. */
static int opt_bool(lua_State *L, const char *k)
{
  if (!lua_isboolean(L, -1))
    luaL_error(L, "ljprof: bad %s '%s' (accepted: true or false)", k,
               lua_tostring(L, -1) ? lua_tostring(L, -1)
                                   : luaL_typename(L, -1));
  return lua_toboolean(L, -1);
}

static void parse_opts(lua_State *L, int idx, ljprof_options *opt)
{
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k;
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "ljprof: option names must be strings (got a %s key)",
                 luaL_typename(L, -2));
    k = lua_tostring(L, -2);
    if (!strcmp(k, "clock")) {
      const char *v = lua_tostring(L, -1);
      int i = ljp_clock_find(v);  /* clocks.c's table */
      if (i < 0) {
        char acc[128];
        luaL_error(L, "ljprof: bad clock '%s' (accepted: %s)",
                   v ? v : luaL_typename(L, -1),
                   ljp_clock_accepted(acc, sizeof(acc), 0));
      }
      opt->clock = (ljprof_clock)i;
    } else if (!strcmp(k, "interval") || !strcmp(k, "rate")) {
      double v = lua_tonumber(L, -1), us;
      /* The interval must come out from 10 us to 60 s. */
      us = !lua_isnumber(L, -1) || !(v > 0) ? 0
           : k[0] == 'i' ? v * 1000.0 : 1e6 / v;
      if (!(us >= 10.0 && us <= 60e6))
        luaL_error(L, "ljprof: bad %s '%s' (accepted: %s)", k,
                   lua_tostring(L, -1) ? lua_tostring(L, -1)
                                       : luaL_typename(L, -1),
                   k[0] == 'i' ? "0.01 to 60000 milliseconds"
                               : "0.017 to 100000 samples per second");
      opt->interval_us = (uint32_t)floor(us + 0.5);
    } else if (!strcmp(k, "signal")) {
      opt->signo = (int)opt_int(L, k, 1, 64, "a signal number from 1 to 64");
    } else if (!strcmp(k, "ring")) {
      opt->ring_size = (uint32_t)opt_int(L, k, 16, 1 << 24,
                                         "16 to 16777216 records");
    } else if (!strcmp(k, "fmt")) {
      opt->stack_fmt = opt_str(L, k, "a dumpstack format string");
    } else if (!strcmp(k, "depth")) {
      opt->stack_depth = (int)opt_int(L, k, -1000000, 1000000,
                                      "an integer depth, as dumpstack's");
    } else if (!strcmp(k, "output")) {
      opt->output = opt_str(L, k, "a file name");
    } else if (!strcmp(k, "mode")) {
      ljp_parse_mode(opt_str(L, k, "a jit.profile mode string"), opt);
    } else if (!strcmp(k, "duration")) {
      double v = lua_tonumber(L, -1);
      if (!lua_isnumber(L, -1) || !(v > 0) || v > 1e9)
        luaL_error(L, "ljprof: bad duration '%s' (accepted: a positive number "
                   "of seconds)", lua_tostring(L, -1) ? lua_tostring(L, -1)
                                                      : luaL_typename(L, -1));
      opt->duration_us = (uint64_t)(v * 1e6 + 0.5);
    } else if (!strcmp(k, "native")) {
      opt->native = opt_bool(L, k);
    } else if (!strcmp(k, "calls")) {
      opt->calls = opt_bool(L, k);
    } else if (!strcmp(k, "aborts")) {
      opt->aborts = opt_bool(L, k);
    } else if (!strcmp(k, "inline")) {
      const char *v = opt_str(L, k, "recorded, snapshots, exact or off");
      if (!strcmp(v, "snapshots")) opt->inline_frames = LJPROF_INLINE_SNAPSHOTS;
      else if (!strcmp(v, "recorded")) opt->inline_frames = LJPROF_INLINE_RECORDED;
      else if (!strcmp(v, "exact")) opt->inline_frames = LJPROF_INLINE_EXACT;
      else if (!strcmp(v, "off")) opt->inline_frames = LJPROF_INLINE_OFF;
      else
        luaL_error(L, "ljprof: bad inline '%s' (accepted: recorded, "
                   "snapshots, exact, off)", v);
    } else {
      luaL_error(L, "ljprof: unknown option '%s' (accepted: clock, interval, "
                 "rate, duration, signal, ring, fmt, depth, output, mode, "
                 "native, calls, aborts, inline)", k);
    }
    lua_pop(L, 1);
  }
}

static int start_run(lua_State *L, ljprof_options *opt)
{
  char err[256];
  if (ljprof_start_ex(L, opt, err, sizeof(err)) != 0)
    return luaL_error(L, "%s", err);
  return 0;
}

/* -- Module functions ----------------------------------------------------- */

static int l_start(lua_State *L)
{
  ljprof_options opt;
  const char *mode = luaL_optstring(L, 1, "");
  luaL_checktype(L, 2, LUA_TFUNCTION);
  ljprof_options_init(&opt);
  ljp_parse_mode(mode, &opt);
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    parse_opts(L, 3, &opt);
  }
  /* Checked here too (ljprof_start_ex checks again): luacb_new would
  ** replace the running callback's anchor before start refused. */
  if (ljprof_running(L))
    return luaL_error(L, "ljprof: already running for this Lua state (call "
                      "stop first)");
  opt.cb = lua_trampoline;
  opt.cb_data = luacb_new(L, 2);
  return start_run(L, &opt);
}

static int l_record(lua_State *L)
{
  ljprof_options opt;
  ljprof_options_init(&opt);
  if (lua_type(L, 1) == LUA_TTABLE) parse_opts(L, 1, &opt);
  else ljp_parse_mode(luaL_optstring(L, 1, ""), &opt);
  return start_run(L, &opt);
}

static int l_stop(lua_State *L)
{
  ljp_q_run ri;
  ljprof_stop(L);
  if (ljp_q_run_info(L, &ri) == 0 && ri.error) {
    lua_pushboolean(L, 0);
    lua_pushstring(L, ri.error);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* The depth as LuaJIT's lj_lib_checkint converts it: (int32_t) of the
** number, which on x86 is INT32_MIN (the "integer indefinite") for NaN and
** anything out of range; luaL_checkinteger would wrap modulo 2^32 instead
** (2^32+1 -> 1, inf -> 0). Other CPUs saturate. */
static int check_depth(lua_State *L, int arg)
{
  lua_Number n = luaL_checknumber(L, arg);
  if (n > -2147483649.0 && n < 2147483648.0) return (int)n;
#if defined(__x86_64__) || defined(__i386__)
  return INT32_MIN;
#else
  return n != n ? 0 : n > 0 ? INT32_MAX : INT32_MIN;
#endif
}

static int dump_named;  /* (a race only repeats the walk: raw reads) */

static int l_dumpstack(lua_State *L)
{
  ljp_buf *sb = ljp_q_dump_buffer();
  lua_State *L2 = L;
  int arg = 0, depth;
  const char *fmt;
  if (lua_gettop(L) > 0 && lua_type(L, 1) == LUA_TTHREAD) {
    L2 = lua_tothread(L, 1);
    arg = 1;
  }
  fmt = luaL_checkstring(L, arg + 1);
  depth = check_depth(L, arg + 2);
  ljp_ffid_learn_own();  /* once: a dump before any run names builtins */
  if (!dump_named) {     /* ... and the program's C functions (a run's */
    dump_named = 1;      /* start learns them too: not at require) */
    ljp_cname_refresh(L);
  }
  if (!sb || ljp_q_dumpstack(L2, L, sb, fmt, depth) != 0)
    return luaL_error(L, "ljprof: out of memory");
  lua_pushlstring(L, sb->b, sb->n);
  return 1;
}

typedef struct summary_acc {
  lua_State *L;
  int n;
} summary_acc;

static void summary_visit(void *data, const ljprof_entry *e)
{
  summary_acc *a = data;
  lua_State *L = a->L;
  char vs = (char)e->vmstate;
  int i;
  lua_createtable(L, 0, 5);
  lua_pushlstring(L, e->stack, e->len);
  lua_setfield(L, -2, "stack");
  lua_pushlstring(L, &vs, 1);
  lua_setfield(L, -2, "vmstate");
  lua_pushstring(L, e->zone);
  lua_setfield(L, -2, "zone");
  lua_pushnumber(L, (lua_Number)e->count);
  lua_setfield(L, -2, "count");
  if (e->nlabels > 0) {       /* labels = {key = value, ...} when set */
    lua_createtable(L, 0, e->nlabels);
    for (i = 0; i < e->nlabels; i++) {
      lua_pushstring(L, e->labels[2 * i + 1]);
      lua_setfield(L, -2, e->labels[2 * i]);
    }
    lua_setfield(L, -2, "labels");
  }
  lua_rawseti(L, -2, ++a->n);
}

/* table.sort comparator: field k (upvalue 1) largest first, then field t
** (upvalue 2) ascending. */
static int by_field(lua_State *L)
{
  lua_Number a, b;
  const char *k = lua_tostring(L, lua_upvalueindex(1));
  const char *t = lua_tostring(L, lua_upvalueindex(2));
  lua_getfield(L, 1, k);
  lua_getfield(L, 2, k);
  a = lua_tonumber(L, -2);
  b = lua_tonumber(L, -1);
  if (a != b) { lua_pushboolean(L, a > b); return 1; }
  lua_getfield(L, 1, t);
  lua_getfield(L, 2, t);
  lua_pushboolean(L, lua_lessthan(L, -2, -1));
  return 1;
}

/* Sort the array at the top of the stack with by_field(k, t). */
static void sort_by(lua_State *L, const char *k, const char *t)
{
  lua_getglobal(L, "table");
  lua_getfield(L, -1, "sort");
  lua_pushvalue(L, -3);
  lua_pushstring(L, k);
  lua_pushstring(L, t);
  lua_pushcclosure(L, by_field, 2);
  lua_call(L, 2, 0);
  lua_pop(L, 1);
}

static int l_summary(lua_State *L)
{
  summary_acc a;
  a.L = L;
  a.n = 0;
  lua_newtable(L);
  ljp_q_summary(L, summary_visit, &a);
  sort_by(L, "count", "stack");  /* ties by stack: stable output */
  return 1;
}

/* profile() -> {frames = {...}, samples = {...}}: the run as structured
** frames, for jit/prof/model.lua (every field a view needs, where a
** dumpstack key keeps a function's name or its first line, not both).
** frames[i]: {kind = "lua", file = chunk (full path), line =,
** linedefined =, name = (when it has one)}, {kind = "c", name =} (C
** functions and builtins, "[builtin#N]" for fast functions) or {kind =
** "native", name =}. samples[i]: {stack =, vmstate =, zone =, labels =
** (when set), count =}, where the stack (frame indexes, outermost first:
** the innermost |depth| frames of the run's depth) is the sample table
** itself, in its array part (samples[i].stack == samples[i]): a profile
** of 74,000 distinct stacks is one table each, not two. Frames are numbered in
** the order samples use them; equal frames may appear twice (the store
** keeps C functions by entry point). */
typedef struct profile_acc {
  lua_State *L;
  int frames, samples;   /* stack indexes of the two tables */
  int index;             /* store frame id -> frames index */
  int labelsets;         /* label set id -> labels table */
  int nframes, nsamples;
  uint32_t *map, nmap;   /* store frame id -> frames index (0: not yet):
                            no Lua table lookup per frame of every stack */
  ljp_buf sb;
} profile_acc;

static void label_pair(void *d, const char *k, size_t kn, const char *v,
                       size_t vn)
{
  lua_State *L = d;
  lua_pushlstring(L, k, kn);
  lua_pushlstring(L, v, vn);
  lua_rawset(L, -3);
}

static void profile_frame(profile_acc *a, uint32_t id)
{
  lua_State *L = a->L;
  ljp_q_frameinfo fi;
  if (id < a->nmap && a->map[id]) {
    lua_pushinteger(L, (lua_Integer)a->map[id]);
    return;
  }
  if (id >= a->nmap) {
    uint32_t n = a->nmap ? a->nmap : 1024, *m;
    while (n <= id) n *= 2;
    if ((m = realloc(a->map, n * sizeof(*m))) != NULL) {
      memset(m + a->nmap, 0, (n - a->nmap) * sizeof(*m));
      a->map = m;
      a->nmap = n;
    }
  }
  lua_rawgeti(L, a->index, (int)id);
  if (!lua_isnil(L, -1)) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 5);
  if (ljp_q_frame(L, id, &fi, &a->sb) != 0) {
    lua_pushliteral(L, "c");
    lua_setfield(L, -2, "kind");
    lua_pushliteral(L, "?");
    lua_setfield(L, -2, "name");
  } else if (fi.kind == 'L') {
    lua_pushliteral(L, "lua");
    lua_setfield(L, -2, "kind");
    lua_pushlstring(L, a->sb.b, fi.file_len);
    lua_setfield(L, -2, "file");
    lua_pushinteger(L, fi.line);
    lua_setfield(L, -2, "line");
    lua_pushinteger(L, fi.linedefined);
    lua_setfield(L, -2, "linedefined");
    if (fi.has_name) {
      lua_pushlstring(L, a->sb.b + fi.file_len, fi.name_len);
      lua_setfield(L, -2, "name");
    }
  } else {
    lua_pushstring(L, fi.kind == 'N' ? "native" : "c");
    lua_setfield(L, -2, "kind");
    lua_pushlstring(L, a->sb.b, fi.name_len);
    lua_setfield(L, -2, "name");
  }
  lua_rawseti(L, a->frames, ++a->nframes);
  if (id < a->nmap) a->map[id] = (uint32_t)a->nframes;
  lua_pushinteger(L, a->nframes);
  lua_pushvalue(L, -1);
  lua_rawseti(L, a->index, (int)id);
}

static void profile_sample(void *d, const uint32_t *frames, uint32_t n,
                           int vmstate, const char *zone, int labels,
                           uint64_t count)
{
  profile_acc *a = d;
  lua_State *L = a->L;
  char vs = (char)vmstate;
  uint32_t i;
  /* One table per sample, its own stack (see above): 4 hash slots
  ** without labels, where a table per stack and 5 fields took twice the
  ** memory (380 -> 190 bytes per sample; docs/performance.md). */
  lua_createtable(L, (int)n, labels > 0 ? 5 : 4);
  for (i = 0; i < n; i++) {
    profile_frame(a, frames[i]);       /* pushes its index */
    lua_rawseti(L, -2, (int)i + 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "stack");
  lua_pushlstring(L, &vs, 1);
  lua_setfield(L, -2, "vmstate");
  lua_pushstring(L, zone);
  lua_setfield(L, -2, "zone");
  lua_pushnumber(L, (lua_Number)count);
  lua_setfield(L, -2, "count");
  if (labels > 0) {
    lua_rawgeti(L, a->labelsets, labels);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_newtable(L);
      ljp_q_label_pairs(L, labels, label_pair, L);
      lua_pushvalue(L, -1);
      lua_rawseti(L, a->labelsets, labels);
    }
    lua_setfield(L, -2, "labels");
  }
  lua_rawseti(L, a->samples, ++a->nsamples);
}

static int l_profile(lua_State *L)
{
  profile_acc a;
  memset(&a, 0, sizeof(a));
  a.L = L;
  lua_settop(L, 0);
  lua_createtable(L, 0, 2);          /* 1: result */
  lua_newtable(L);                   /* 2: frames */
  lua_newtable(L);                   /* 3: samples */
  lua_newtable(L);                   /* 4: index */
  lua_newtable(L);                   /* 5: label sets */
  a.frames = 2; a.samples = 3; a.index = 4; a.labelsets = 5;
  ljp_q_samples(L, profile_sample, &a);
  ljp_buf_free(&a.sb);
  free(a.map);
  lua_settop(L, 3);
  lua_setfield(L, 1, "samples");
  lua_setfield(L, 1, "frames");
  return 1;
}

/* stats(): one descriptor per struct, {key, offset, kind}, walked in a
** loop: a stat is one line here. The kind comes from the field's type
** (a wrong type does not compile): numbers (uint64_t, uint32_t, int as
** uint64_t), booleans (int), strings (no key when NULL). */
enum { ST_U64, ST_U32, ST_INT, ST_BOOL, ST_STR, ST_STR_SET, ST_U64_SET };
typedef struct stat_field {
  const char *key;
  size_t off;
  int kind;
} stat_field;
#define ST_NUM(T, f) _Generic(((T *)0)->f, uint64_t: ST_U64, \
                              uint32_t: ST_U32, int: ST_INT)
#define NUM(T, key, f) {key, offsetof(T, f), ST_NUM(T, f)}
#define BOOL(T, key, f) {key, offsetof(T, f), _Generic(((T *)0)->f, int: ST_BOOL)}
#define STR(T, key, f) {key, offsetof(T, f), \
                        _Generic(((T *)0)->f, const char *: ST_STR)}
/* Only when set: a number not 0, a string not "" (nor NULL). */
#define NUM_SET(T, key, f) {key, offsetof(T, f), \
                            _Generic(((T *)0)->f, uint64_t: ST_U64_SET)}
#define STR_SET(T, key, f) {key, offsetof(T, f), \
                            _Generic(((T *)0)->f, const char *: ST_STR_SET)}

static const stat_field stats_fields[] = {  /* ljprof_stats (ljprof.h) */
  NUM(ljprof_stats, "signals", signals),
  NUM(ljprof_stats, "ticks", ticks),
  NUM(ljprof_stats, "samples", ticks),
  NUM(ljprof_stats, "completed", completed),
  NUM(ljprof_stats, "dropped", dropped),
  NUM(ljprof_stats, "merged", merged),
  NUM(ljprof_stats, "pending", pending),
  NUM(ljprof_stats, "safepoints", safepoints),
  NUM(ljprof_stats, "batches", batches),
  NUM(ljprof_stats, "stacks", stacks),
  NUM(ljprof_stats, "entries", entries),
  NUM(ljprof_stats, "hook_ns", hook_ns),
  NUM(ljprof_stats, "handler_ns", handler_ns),
  NUM(ljprof_stats, "complete_ns", complete_ns),
  NUM(ljprof_stats, "aggregate_ns", aggregate_ns),
  NUM(ljprof_stats, "aggregated", aggregated),
  NUM(ljprof_stats, "native_unwinds", native_unwinds),
  NUM(ljprof_stats, "native_frames", native_frames),
  NUM(ljprof_stats, "native_truncated", native_truncated),
  NUM(ljprof_stats, "native_skipped", native_skipped),
  NUM(ljprof_stats, "bytes", bytes),
};

/* ljp_q_run (query.h), present once the state was profiled. What each
** means is in query.h; the less obvious ones: trace_events and
** trace_event_ns, the jit.attach events handled and ljprof's time in them
** (not LuaJIT's dispatch); trace_source, where a sample's trace is learnt
** ("memory", "events", "none"); recorder_kept, safe points inside a trace
** recording that gave its abort back; aborts_recorded, aborts() has this
** run's; exact_stacks, Lua frames captured at the signal; host_ticks,
** ticks in the host's own code with no Lua call active, and host_detect,
** whether that can be told (L->cframe learnt, vmprobe.c), host_main, on
** the main thread too (g->mainthref learnt); missed, ticks
** the wall and thread clocks' timer thread woke too late for; inline_*,
** frames a trace had inlined, from its snapshots; names_late,
** names_late_found: trace start functions left to the run's end to be
** named by value, and of them named there; expired, the duration
** option ran out; signal_lost, the program took the signal; jit_state,
** the trace compiler's state learnt; exports, export_ns, lend_waits,
** lend_wait_ns: runs started from LJPROF (the export helper's files and
** time, the program's waits while it borrowed the context); interval, a
** periodic export's interval (only when there is one); thread, the
** profiled thread's name (only when known). */
static const stat_field run_fields[] = {
  STR(ljp_q_run, "clock", clock),
  NUM(ljp_q_run, "interval_us", interval_us),
  NUM(ljp_q_run, "signal", signo),
  BOOL(ljp_q_run, "running", running),
  BOOL(ljp_q_run, "cfunc_names", cfunc_names),
  NUM(ljp_q_run, "aborts_lost", aborts_lost),
  NUM(ljp_q_run, "trace_events", trace_events),
  NUM(ljp_q_run, "trace_event_ns", trace_event_ns),
  STR(ljp_q_run, "trace_source", trace_source),
  NUM(ljp_q_run, "recorder_kept", recorder_kept),
  BOOL(ljp_q_run, "aborts_recorded", aborts_recorded),
  BOOL(ljp_q_run, "exact_stacks", exact),
  BOOL(ljp_q_run, "exact_lines", exact_lines),
  NUM(ljp_q_run, "lua_captures", lua_captures),
  BOOL(ljp_q_run, "host_detect", host_detect),
  BOOL(ljp_q_run, "host_main", host_main),
  NUM(ljp_q_run, "host_ticks", host_ticks),
  NUM(ljp_q_run, "missed", missed),
  NUM(ljp_q_run, "stack_checks", stack_checks),
  NUM(ljp_q_run, "stack_mismatches", stack_mismatches),
  STR(ljp_q_run, "inline_frames", inline_frames),
  NUM(ljp_q_run, "inline_samples", inline_samples),
  NUM(ljp_q_run, "inline_undecoded", inline_undecoded),
  NUM(ljp_q_run, "inline_estimated", inline_estimated),
  NUM(ljp_q_run, "inline_recorded", inline_recorded),
  NUM(ljp_q_run, "names_late", names_late),
  NUM(ljp_q_run, "names_late_found", names_late_found),
  NUM(ljp_q_run, "record_events", record_events),
  NUM(ljp_q_run, "record_traces", record_traces),
  NUM(ljp_q_run, "record_refused", record_refused),
  BOOL(ljp_q_run, "record_budget_spent", record_spent),
  STR(ljp_q_run, "record_off", record_off),
  NUM(ljp_q_run, "snap_checks", snap_checks),
  NUM(ljp_q_run, "snap_mismatches", snap_mismatches),
  BOOL(ljp_q_run, "expired", expired),
  BOOL(ljp_q_run, "signal_lost", signal_lost),
  BOOL(ljp_q_run, "jit_state", jit_state),
  NUM(ljp_q_run, "exports", exports),
  NUM(ljp_q_run, "export_ns", export_ns),
  NUM(ljp_q_run, "lend_waits", lend_waits),
  NUM(ljp_q_run, "lend_wait_ns", lend_wait_ns),
  STR(ljp_q_run, "error", error),
  NUM_SET(ljp_q_run, "interval", interval),
  NUM(ljp_q_run, "thread_id", tid),
  NUM(ljp_q_run, "state_id", state_id),
  STR_SET(ljp_q_run, "thread", thread_name),
};
#undef ST_NUM
#undef NUM
#undef BOOL
#undef STR
#undef NUM_SET
#undef STR_SET

static void setnum(lua_State *L, const char *k, uint64_t v)
{
  lua_pushnumber(L, (lua_Number)v);
  lua_setfield(L, -2, k);
}

/* Each field of fields[0..n) of the struct at base into the table on top. */
static void set_fields(lua_State *L, const void *base, const stat_field *f,
                       size_t n)
{
  for (; n--; f++) {
    const char *p = (const char *)base + f->off, *str;
    uint64_t u64;
    uint32_t u32;
    int i;
    switch (f->kind) {
    case ST_U64: case ST_U64_SET:
      memcpy(&u64, p, sizeof(u64));
      if (f->kind == ST_U64_SET && !u64) continue;
      setnum(L, f->key, u64);
      break;
    case ST_U32:
      memcpy(&u32, p, sizeof(u32));
      setnum(L, f->key, u32);
      break;
    case ST_INT: case ST_BOOL:
      memcpy(&i, p, sizeof(i));
      if (f->kind == ST_INT) { setnum(L, f->key, (uint64_t)i); break; }
      lua_pushboolean(L, i);
      lua_setfield(L, -2, f->key);
      break;
    default:  /* ST_STR, ST_STR_SET */
      memcpy(&str, p, sizeof(str));
      if (!str || (f->kind == ST_STR_SET && !str[0])) continue;
      lua_pushstring(L, str);
      lua_setfield(L, -2, f->key);
      break;
    }
  }
}

static int l_stats(lua_State *L)
{
  ljprof_stats st;
  ljp_q_run ri;
  static const char vmletters[] = "NICGJ";
  int i;
  ljprof_get_stats(L, &st);
  lua_createtable(L, 0, 48);
  set_fields(L, &st, stats_fields,
             sizeof(stats_fields) / sizeof(stats_fields[0]));
  setnum(L, "stale_signals", ljp_q_stale_signals());
  {
    /* the state's searches by value for a function's name (names.c):
    ** asked for, and of them run (the others deferred after many that
    ** found nothing) */
    uint64_t searches, scans;
    ljp_lname_byval_counts(L, &searches, &scans);
    setnum(L, "name_searches", searches);
    setnum(L, "name_scans", scans);
  }
  lua_createtable(L, 0, 5);
  for (i = 0; i < 5; i++) {
    lua_pushnumber(L, (lua_Number)st.vm[i]);
    lua_setfield(L, -2, (char[2]){vmletters[i], 0});
  }
  lua_setfield(L, -2, "vmstate");
  if (ljp_q_run_info(L, &ri) == 0) {
    set_fields(L, &ri, run_fields,
               sizeof(run_fields) / sizeof(run_fields[0]));
    /* Where VM states come from: LuaJIT's own g->vmstate, or the PC. */
    lua_pushstring(L, ri.vmstate_exact ? "vmstate" : "pc");
    lua_setfield(L, -2, "vmstate_source");
    /* The run's time: its start (Unix seconds, to the microsecond) and
    ** duration (to its stop, or now). */
    if (ri.start_unix_ns) {
      lua_pushnumber(L, (lua_Number)(ri.start_unix_ns / 1000u) / 1e6);
      lua_setfield(L, -2, "start_time");
      setnum(L, "duration_ns", ri.duration_ns);
    }
  }
  return 1;
}

/* functions() -> { {func=, total=, N=, I=, C=, G=, J=}, ... }: ticks per
** leaf function (where the time was spent) and VM state. */
static void function_one(void *d, const ljp_str *f, int vmstate,
                         uint64_t ticks)
{
  lua_State *L = d;               /* result, func -> entry */
  char vs[2] = {(char)vmstate, 0};
  lua_pushlstring(L, f->s, f->len);
  lua_rawget(L, -2);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 7);
    lua_pushlstring(L, f->s, f->len);
    lua_setfield(L, -2, "func");
    lua_pushnumber(L, 0);
    lua_setfield(L, -2, "total");
    lua_pushlstring(L, f->s, f->len);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -4, (int)lua_objlen(L, -4) + 1);
  }
  lua_getfield(L, -1, vs);
  lua_pushnumber(L, lua_tonumber(L, -1) + (lua_Number)ticks);
  lua_setfield(L, -3, vs);
  lua_pop(L, 1);
  lua_getfield(L, -1, "total");
  lua_pushnumber(L, lua_tonumber(L, -1) + (lua_Number)ticks);
  lua_setfield(L, -3, "total");
  lua_pop(L, 2);
}

static int l_functions(lua_State *L)
{
  lua_newtable(L);                 /* result */
  lua_newtable(L);                 /* func -> entry */
  ljp_q_functions(L, function_one, L);
  lua_pop(L, 1);
  sort_by(L, "total", "func");
  return 1;
}

/* traces() -> { {trace=, start="chunk:line", count=}, ... }: ticks spent
** in each compiled trace (start "" when it started before profiling). */
static void trace_one(void *d, const ljp_str *start, int32_t trace,
                      uint64_t ticks)
{
  lua_State *L = d;
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, trace);
  lua_setfield(L, -2, "trace");
  lua_pushlstring(L, start->s, start->len);
  lua_setfield(L, -2, "start");
  lua_pushnumber(L, (lua_Number)ticks);
  lua_setfield(L, -2, "count");
  lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
}

static int l_traces(lua_State *L)
{
  lua_newtable(L);
  ljp_q_traces(L, trace_one, L);
  sort_by(L, "count", "trace");
  return 1;
}

/* reason = string.format(jit.vmdef.traceerr[code], info), or the code. */
static void push_reason(lua_State *L, int code, const char *info,
                        int info_is_num)
{
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "jit.vmdef");
  if (lua_pcall(L, 1, 1, 0) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "traceerr");
    if (lua_istable(L, -1)) {
      lua_rawgeti(L, -1, code);
      if (info_is_num && lua_isstring(L, -1) &&
          strstr(lua_tostring(L, -1), "bytecode %d")) {
        /* "NYI: bytecode 51" as "NYI: bytecode FNEW" (jit.vmdef names) */
        const char *tmpl = lua_tostring(L, -1), *at = strstr(tmpl, "%d");
        size_t n, op = (size_t)strtod(info, NULL), k = 6;
        const char *names;
        lua_getfield(L, top + 1, "bcnames");
        names = lua_tolstring(L, -1, &n);
        if (names && op * 6 + 6 <= n) {
          while (k > 0 && names[op * 6 + k - 1] == ' ') k--;
          lua_pushlstring(L, tmpl, (size_t)(at - tmpl));
          lua_pushlstring(L, names + op * 6, k);
          lua_pushstring(L, at + 2);
          lua_concat(L, 3);
          lua_replace(L, top + 1);
          lua_settop(L, top + 1);
          return;
        }
        lua_pop(L, 1);
      }
      if (lua_isstring(L, -1)) {
        lua_getglobal(L, "string");
        lua_getfield(L, -1, "format");
        lua_pushvalue(L, -3);
        if (info_is_num) lua_pushnumber(L, strtod(info, NULL));
        else lua_pushstring(L, info);
        if (lua_pcall(L, 2, 1, 0) == 0 && lua_isstring(L, -1)) {
          lua_replace(L, top + 1);
          lua_settop(L, top + 1);
          return;
        }
      }
    }
  }
  lua_settop(L, top);
  lua_pushfstring(L, "trace error %d (%s)", code, info);
}

/* aborts() -> { {func=, line=, reason=, code=, info=, at=, count=}, ... }:
** trace aborts of this run, by the function and line the trace started
** at (func is "chunk:firstline" like functions()). */
static void abort_one(void *d, const char *func, int line, int code,
                      const char *info, int info_is_num, const char *at,
                      uint64_t count)
{
  lua_State *L = d;
  lua_createtable(L, 0, 7);
  lua_pushstring(L, func);
  lua_setfield(L, -2, "func");
  lua_pushinteger(L, line);
  lua_setfield(L, -2, "line");
  push_reason(L, code, info, info_is_num);
  lua_setfield(L, -2, "reason");
  lua_pushinteger(L, code);
  lua_setfield(L, -2, "code");
  lua_pushstring(L, info);
  lua_setfield(L, -2, "info");
  lua_pushstring(L, at);
  lua_setfield(L, -2, "at");
  lua_pushnumber(L, (lua_Number)count);
  lua_setfield(L, -2, "count");
  lua_rawseti(L, -2, (int)lua_objlen(L, -2) + 1);
}

static int l_aborts(lua_State *L)
{
  lua_newtable(L);
  ljp_q_aborts(L, abort_one, L);
  sort_by(L, "count", "func");
  return 1;
}

/* calls() -> { {func=, name=, what=, source=, linedefined=,
** lastlinedefined=, calls=}, ... }: exact call counts of the current or
** last run (record{calls=true}), most called first. func is
** "chunk:linedefined" for Lua functions (as functions() names them) and
** the C name for C functions and builtins; name is the name at the first
** call site (if any). Empty when the run did not count. */
static int l_calls(lua_State *L)
{
  ljp_q_calls_push(L);
  sort_by(L, "calls", "func");
  return 1;
}

/* watch() -> true: keep watching trace compilation between runs. */
static int l_watch(lua_State *L)
{
  lua_pushboolean(L, ljprof_watch_traces(L) == 0);
  return 1;
}

/* -- Zones (the object is jit/prof/zone.lua; these are its C side) ------- */

static void *zone_handle(lua_State *L)
{
  void *h = ljprof_zone_handle(L);
  if (!h) luaL_error(L, "ljprof: cannot set up zones (out of memory)");
  return h;
}

static int l_zone_handle(lua_State *L)
{
  lua_pushlightuserdata(L, zone_handle(L));
  return 1;
}

static int l_zone_intern(lua_State *L)
{
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  zone_handle(L);
  lua_pushinteger(L, ljp_q_zone_intern(L, name, len));
  return 1;
}

static int l_zone_push_id(lua_State *L)
{
  lua_pushinteger(L, ljprof_zone_push_h(zone_handle(L),
                                        (uint16_t)luaL_checkinteger(L, 1)));
  return 1;
}

static int l_zone_pop_id(lua_State *L)
{
  lua_pushinteger(L, ljprof_zone_pop_h(zone_handle(L)));
  return 1;
}

static int l_zone_name(lua_State *L)
{
  zone_handle(L);
  lua_pushstring(L, ljp_q_zone_name(L, (int)luaL_checkinteger(L, 1)));
  return 1;
}

static int l_zone_current(lua_State *L)
{
  zone_handle(L);
  lua_pushinteger(L, ljp_q_zone_current(L));
  return 1;
}

static int l_zone_flush(lua_State *L)
{
  zone_handle(L);
  ljp_q_zone_flush(L);
  return 0;
}

/* -- Labels (the object is jit/prof/label.lua; these are its C side) ------ */

static const char *label_error(int rc)
{
  switch (rc) {
  case LJPROF_LABEL_EKEY:
    return "a non-empty string key of at most 256 bytes without NUL, not "
           "vmstate, zone, thread, thread_id or state (ljprof sets those)";
  case LJPROF_LABEL_EVALUE:
    return "a string or number value of at most 256 bytes without NUL";
  case LJPROF_LABEL_ETOOMANY: return "at most 64 pairs in a set";
  case LJPROF_LABEL_EFULL:
    return "at most 65535 distinct label sets per state (keep label values "
           "few: an endpoint, not a request id)";
  case LJPROF_LABEL_EDEEP: return "at most 64 label pushes nested";
  case LJPROF_LABEL_ESET: return "a set id from ljprof.label.set";
  default: return "?";
  }
}

/* label_set(t) -> id of the set of t's pairs (keys strings, values strings
** or numbers); a bad pair raises one line naming it. */
static int l_label_set(lua_State *L)
{
  const char *kv[2 * LJP_LABEL_PAIRS];
  size_t len[2 * LJP_LABEL_PAIRS];
  int n = 0, id, top;
  luaL_checktype(L, 1, LUA_TTABLE);
  zone_handle(L);
  lua_settop(L, 1);
  lua_newtable(L);          /* 2: anchors the value strings made here */
  top = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    int vt = lua_type(L, -1);
    if (lua_type(L, -2) != LUA_TSTRING)
      return luaL_error(L, "ljprof.label: bad key of type %s (accepted: %s)",
                        luaL_typename(L, -2), label_error(LJPROF_LABEL_EKEY));
    if (n >= LJP_LABEL_PAIRS)
      return luaL_error(L, "ljprof.label: too many pairs (accepted: %s)",
                        label_error(LJPROF_LABEL_ETOOMANY));
    if (vt != LUA_TSTRING && vt != LUA_TNUMBER)
      return luaL_error(L, "ljprof.label: bad value for key '%s' (a %s; "
                        "accepted: %s)", lua_tostring(L, -2),
                        luaL_typename(L, -1),
                        label_error(LJPROF_LABEL_EVALUE));
    kv[2 * n] = lua_tolstring(L, -2, &len[2 * n]);
    lua_pushvalue(L, -1);
    kv[2 * n + 1] = lua_tolstring(L, -1, &len[2 * n + 1]); /* a copy: a
                                             number key must stay a number */
    lua_rawseti(L, top, n + 1);
    n++;
    lua_pop(L, 1);
  }
  id = ljp_q_label_set(L, kv, len, n);
  if (id < 0) {
    int i;
    const char *what = "";
    for (i = 0; i < n && id == LJPROF_LABEL_EKEY; i++)
      if (!len[2 * i] || len[2 * i] > 256 || memchr(kv[2 * i], 0, len[2 * i]) ||
          ljp_label_reserved(kv[2 * i], len[2 * i]))
        what = kv[2 * i];
    for (i = 0; i < n && id == LJPROF_LABEL_EVALUE; i++)
      if (len[2 * i + 1] > 256 || memchr(kv[2 * i + 1], 0, len[2 * i + 1]))
        what = kv[2 * i];
    if (id == LJPROF_LABEL_EKEY)
      return luaL_error(L, "ljprof.label: bad key '%s' (accepted: %s)", what,
                        label_error(id));
    if (id == LJPROF_LABEL_EVALUE)
      return luaL_error(L, "ljprof.label: bad value for key '%s' (accepted: "
                        "%s)", what, label_error(id));
    return luaL_error(L, "ljprof.label: cannot make the set (accepted: %s)",
                      label_error(id));
  }
  lua_pushinteger(L, id);
  return 1;
}

static int l_label_push_id(lua_State *L)
{
  lua_pushinteger(L, ljprof_label_push_h(zone_handle(L),
                                         (int)luaL_checkinteger(L, 1)));
  return 1;
}

static int l_label_pop_id(lua_State *L)
{
  lua_pushinteger(L, ljprof_label_pop_h(zone_handle(L)));
  return 1;
}

static int l_label_current(lua_State *L)
{
  lua_pushinteger(L, ljprof_label_current_h(zone_handle(L)));
  return 1;
}

/* label_pairs(id) -> {key = value, ...} of set id ({} for 0). */
static int l_label_pairs(lua_State *L)
{
  int id = (int)luaL_checkinteger(L, 1);
  zone_handle(L);
  lua_newtable(L);
  ljp_q_label_pairs(L, id, label_pair, L);
  return 1;
}

static int l_label_flush(lua_State *L)
{
  zone_handle(L);
  ljp_q_label_flush(L);
  return 0;
}

/* The message of a label error code (jit/prof/label.lua). */
static int l_label_error(lua_State *L)
{
  lua_pushstring(L, label_error((int)luaL_checkinteger(L, 1)));
  return 1;
}

/* ljprof.zone, ljprof.label, ljprof.wrap, ljprof.wrapped: loaded on first
** use from jit/prof/zone.lua, jit/prof/label.lua and jit/prof/wrap.lua. */
static int module_index(lua_State *L)
{
  const char *k = lua_tostring(L, 2);
  const char *mod = NULL;
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  if (!strcmp(k, "zone")) mod = "jit.prof.zone";
  else if (!strcmp(k, "label")) mod = "jit.prof.label";
  else if (!strcmp(k, "wrap") || !strcmp(k, "wrapped")) mod = "jit.prof.wrap";
  if (!mod) return 0;
  lua_getglobal(L, "require");
  lua_pushstring(L, mod);
  lua_call(L, 1, 1);
  if (mod[9] == 'w') lua_getfield(L, -1, k);  /* a function of the module */
  lua_pushvalue(L, -1);
  lua_setfield(L, 1, k);
  return 1;
}

/* on_signal({"TERM", ...}, module, func, arg) -> names trapped;
** on_signal(nil) undoes. */
static int l_on_signal(lua_State *L)
{
  size_t arglen;
  const char *module, *func, *arg;
  if (lua_isnoneornil(L, 1)) return ljp_q_exit_signals(L, 0, 0, 0, 0, 0);
  if (lua_isboolean(L, 1) && !lua_toboolean(L, 1))
    return ljp_q_exit_signals(L, -1, 0, 0, 0, 0);
  luaL_checktype(L, 1, LUA_TTABLE);
  module = luaL_checkstring(L, 2);
  func = luaL_checkstring(L, 3);
  arg = luaL_optlstring(L, 4, "", &arglen);
  return ljp_q_exit_signals(L, 1, module, func, arg, arglen);
}

/* write_apart(module, func, arg) -> true, or nil and one line: the
** writer run in a Lua state of ljprof's own (query.h). */
static int l_write_apart(lua_State *L)
{
  size_t arglen;
  const char *module = luaL_checkstring(L, 1);
  const char *func = luaL_checkstring(L, 2);
  const char *arg = luaL_optlstring(L, 3, "", &arglen);
  return ljp_q_write_apart(L, module, func, arg, arglen);
}

/* ljprof.code_name(address) -> a name stable across runs for code at
** address (an unnamed C function: "@0x..." in dumps), or nil. */
static int l_code_name(lua_State *L)
{
  char buf[384];
  lua_Number a = luaL_checknumber(L, 1);
  if (a > 0 && a < 18446744073709551616.0 &&
      ljp_q_code_name((uintptr_t)a, buf, sizeof(buf))) {
    lua_pushstring(L, buf);
    return 1;
  }
  lua_pushnil(L);
  return 1;
}

static int l_running(lua_State *L)
{
  lua_pushboolean(L, ljprof_running(L));
  return 1;
}

/* ljprof.regular_file(path): true when path is a regular file, which
** the writers may read without blocking (a chunk's source, for its
** functions' names: a FIFO or a terminal as a chunk would hang there). */
static int l_regular_file(lua_State *L)
{
  struct stat st;
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 &&
                         S_ISREG(st.st_mode));
  return 1;
}

/* ljprof.write_file(path, data): the output routine (outfile.c) for the
** Lua writers; data a string, or a list of strings written one after
** another (a large profile, never joined). true, or nil and one line. */
static int l_write_file(lua_State *L)
{
  size_t len;
  const char *path = luaL_checkstring(L, 1);
  char err[512];
  int rc;
  if (lua_istable(L, 2)) {  /* parts, written one after another */
    size_t n = lua_objlen(L, 2), i;
    ljp_outpart *v = malloc((n ? n : 1) * sizeof(*v));
    if (!v) return luaL_error(L, "ljprof: write_file: out of memory");
    for (i = 0; i < n; i++) {
      lua_rawgeti(L, 2, (int)i + 1);
      if (lua_type(L, -1) != LUA_TSTRING) {  /* (not a number: converted
                                              ** on the stack, not kept) */
        free(v);
        return luaL_error(L, "ljprof: write_file: part %d is a %s (accepted: "
                          "strings)", (int)i + 1, luaL_typename(L, -1));
      }
      v[i].data = lua_tolstring(L, -1, &v[i].len);  /* the table keeps it */
      lua_pop(L, 1);
    }
    rc = ljp_outfile_write_parts(path, v, n, err, sizeof(err));
    free(v);
  } else {
    const char *data = luaL_checklstring(L, 2, &len);
    rc = ljp_outfile_write(path, data, len, err, sizeof(err));
  }
  if (rc != 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* ljprof.output_private(on): every file written from now on in this
** process 0600 (true) or 0644 (false), whatever the umask; returns the
** setting before. No argument: the setting. */
static int l_output_private(lua_State *L)
{
  int was = ljp_outfile_is_private();
  if (!lua_isnoneornil(L, 1)) ljp_outfile_private(lua_toboolean(L, 1));
  lua_pushboolean(L, was);
  return 1;
}

/* ljprof.check_output(path): could it be written? Leaves nothing. */
static int l_check_output(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  char err[512];
  if (ljp_outfile_check(path, err, sizeof(err)) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* ljprof.remove_output(path): remove path and what writers of it that
** were killed left (outfile.c). true when path was removed. */
static int l_remove_output(lua_State *L)
{
  lua_pushboolean(L, ljp_outfile_remove(luaL_checkstring(L, 1)) == 0);
  return 1;
}

/* -- Started from LJPROF (jit/prof/auto.lua; auto.c) ----------------------- */

/* auto_attach(every_s, keep, maxbytes) -> the state's index (%s), or nil
** and one line (no context for the state): before the start. */
static int l_auto_attach(lua_State *L)
{
  double every = luaL_optnumber(L, 1, 0);
  lua_Number keep = luaL_optnumber(L, 2, 0), maxb = luaL_optnumber(L, 3, 0);
  char err[384];
  int idx = ljp_q_auto_attach(L, every, keep > 0 ? (uint32_t)keep : 0,
                              maxb > 0 ? (uint64_t)maxb : 0, err, sizeof(err));
  if (idx < 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushinteger(L, idx);
  return 1;
}

/* auto_start(spec, control, signo, paused) -> true, or nil and one line
** (the run goes on, without export or control): after the start. */
static int l_auto_start(lua_State *L)
{
  size_t len;
  const char *spec = luaL_checklstring(L, 1, &len);
  int control = (int)luaL_optinteger(L, 2, 0);
  int signo = (int)luaL_optinteger(L, 3, 0);
  int paused = lua_toboolean(L, 4);
  char err[384];
  if (ljp_q_auto_start(L, spec, len, control, signo, paused, err,
                       sizeof(err)) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_auto_stop(lua_State *L)
{
  ljp_q_auto_stop(L);
  return 0;
}

/* output_name(template) -> the file name: %p %s %t %n %% filled for an
** auto-started run's interval; the template itself otherwise. */
static int l_output_name(lua_State *L)
{
  const char *t = luaL_checkstring(L, 1);
  char out[4096];
  size_t n = ljp_q_output_name(L, t, out, sizeof(out));
  if (n) lua_pushlstring(L, out, n);
  else lua_pushvalue(L, 1);
  return 1;
}

/* output_written(path): an output was written (rotation). */
static int l_output_written(lua_State *L)
{
  ljp_q_output_written(L, luaL_checkstring(L, 1));
  return 0;
}

/* auto_notice(line): on stderr once per process. */
static int l_auto_notice(lua_State *L)
{
  ljp_q_notice(luaL_checkstring(L, 1));
  return 0;
}

/* -- Test hooks: the machine code map (mcmap.c) ------------------------------ */

/* The object of trace number tr of L's state, with the layouts learnt. */
static uintptr_t trace_obj(lua_State *L, int tr)
{
  ljp_vm_learn_layouts();
  ljp_vm_learn_snapshots();
  return ljp_vm_trace(ljp_vm_global(L), tr);
}

/* _mcmap(tr) -> {bytes=, exact_bytes=, spans=, untrusted=, runs=,
** anchors=}, or nil and why: the map of trace tr (built if needed). */
static int l_mcmap(lua_State *L)
{
  ljp_mcmap_stats st;
  uintptr_t T = trace_obj(L, (int)luaL_checkinteger(L, 1));
  if (!ljp_mcmap_stats_of(T, &st)) {
    lua_pushnil(L);
    lua_pushstring(L, st.why ? st.why : "unknown");
    return 2;
  }
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, st.bytes); lua_setfield(L, -2, "bytes");
  lua_pushinteger(L, st.exact_bytes); lua_setfield(L, -2, "exact_bytes");
  lua_pushinteger(L, st.spans); lua_setfield(L, -2, "spans");
  lua_pushinteger(L, st.untrusted); lua_setfield(L, -2, "untrusted");
  lua_pushinteger(L, st.runs); lua_setfield(L, -2, "runs");
  lua_pushinteger(L, st.anchors); lua_setfield(L, -2, "anchors");
  return 1;
}

/* _mcmap_refs(tr, ofs) -> ref_lo, ref_hi, exact (biased refs), or nil. */
static int l_mcmap_refs(lua_State *L)
{
  uint32_t lo, hi;
  int exact;
  uintptr_t T = trace_obj(L, (int)luaL_checkinteger(L, 1));
  lua_Integer ofs = luaL_checkinteger(L, 2);
  if (!T || ofs < 0 || !ljp_mcmap_refs(T, (uint32_t)ofs, &lo, &hi, &exact))
    return 0;
  lua_pushinteger(L, (lua_Integer)lo);
  lua_pushinteger(L, (lua_Integer)hi);
  lua_pushboolean(L, exact);
  return 3;
}

/* _mcmap_clear(): frees every cached map. */
static int l_mcmap_clear(lua_State *L)
{
  (void)L;
  ljp_mcmap_clear();
  return 0;
}

/* _x64dec(bytes, addr) -> { {ofs, len, cls, fop, target or false}, ... }
** (x64dec.h's classes), up to the first byte not decoded. */
static int l_x64dec(lua_State *L)
{
  size_t n, ofs = 0;
  const uint8_t *p = (const uint8_t *)luaL_checklstring(L, 1, &n);
  uint64_t addr = (uint64_t)luaL_optnumber(L, 2, 0);
  int k = 0;
  lua_newtable(L);
  while (ofs < n) {
    ljp_x64ins x;
    int len = ljp_x64_decode(p + ofs, n - ofs, addr + ofs, &x);
    if (!len) break;
    lua_createtable(L, 5, 0);
    lua_pushinteger(L, (lua_Integer)ofs); lua_rawseti(L, -2, 1);
    lua_pushinteger(L, len); lua_rawseti(L, -2, 2);
    lua_pushinteger(L, x.cls); lua_rawseti(L, -2, 3);
    lua_pushinteger(L, x.fop); lua_rawseti(L, -2, 4);
    if (x.has_target) lua_pushnumber(L, (lua_Number)x.target);
    else lua_pushboolean(L, 0);
    lua_rawseti(L, -2, 5);
    lua_rawseti(L, -2, ++k);
    ofs += (size_t)len;
  }
  return 1;
}

/* _name_by_value(f) -> the name names.c's search by value finds for f's
** prototype from here (the caller's live levels, the globals), false when
** the search was deferred (names.c's gap), nil when none is found. For
** tests. */
static int l_name_by_value(lua_State *L)
{
  char buf[128];
  int r;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  ljp_vm_learn_layouts();            /* ljp_fn_bc's layout, once */
  r = ljp_lname_by_value_at(L, 1, buf, sizeof(buf));
  if (r > 0) {
    lua_pushstring(L, buf);
  } else if (r < 0) {
    lua_pushboolean(L, 0);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

/* clocks() -> {"cpu", "wall", "itimer", "thread"}: clocks.c's table. */
static int l_clocks(lua_State *L)
{
  int i, n = ljp_clock_count();
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushstring(L, ljp_clock((ljprof_clock)i)->name);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static const luaL_Reg ljprof_funcs[] = {
  {"clocks", l_clocks},
  {"_mcmap", l_mcmap},
  {"_mcmap_refs", l_mcmap_refs},
  {"_mcmap_clear", l_mcmap_clear},
  {"_x64dec", l_x64dec},
  {"_name_by_value", l_name_by_value},
  {"auto_attach", l_auto_attach},
  {"auto_start", l_auto_start},
  {"auto_stop", l_auto_stop},
  {"output_name", l_output_name},
  {"output_written", l_output_written},
  {"auto_notice", l_auto_notice},
  {"write_file", l_write_file},
  {"regular_file", l_regular_file},
  {"check_output", l_check_output},
  {"output_private", l_output_private},
  {"remove_output", l_remove_output},
  {"start", l_start},
  {"stop", l_stop},
  {"dumpstack", l_dumpstack},
  {"record", l_record},
  {"summary", l_summary},
  {"stats", l_stats},
  {"functions", l_functions},
  {"traces", l_traces},
  {"aborts", l_aborts},
  {"calls", l_calls},
  {"watch", l_watch},
  {"on_signal", l_on_signal},
  {"write_apart", l_write_apart},
  {"code_name", l_code_name},
  {"zone_handle", l_zone_handle},
  {"zone_intern", l_zone_intern},
  {"zone_push_id", l_zone_push_id},
  {"zone_pop_id", l_zone_pop_id},
  {"zone_name", l_zone_name},
  {"zone_current", l_zone_current},
  {"zone_flush", l_zone_flush},
  {"label_set", l_label_set},
  {"label_push_id", l_label_push_id},
  {"label_pop_id", l_label_pop_id},
  {"label_current", l_label_current},
  {"label_pairs", l_label_pairs},
  {"label_flush", l_label_flush},
  {"label_error", l_label_error},
  {"profile", l_profile},
  {"running", l_running},
  {NULL, NULL}
};

/* The writers' states load `ljprof` from this library from the start,
** also in a C host that never requires it (the C API's output option,
** writer.c). */
__attribute__((constructor)) static void ljp_give_opener(void)
{
  ljp_own_set_opener(luaopen_ljprof);
}

int luaopen_ljprof(lua_State *L)
{
  ljp_own_set_opener(luaopen_ljprof);  /* for the writers' states */
  /* (fast-function ids and the program's C functions' names: learnt by a
  ** run's start, or the first dump's, ffid.h; not here, where the walk of
  ** package.loaded was repeated by the start: 0.12 M instructions) */
  lua_newtable(L);
  luaL_register(L, NULL, ljprof_funcs);
  luaL_register(L, NULL, ljp_spawn_funcs);  /* the command's (spawn.c) */
  lua_pushstring(L, LJPROF_VERSION);
  lua_setfield(L, -2, "version");
  lua_newtable(L);                 /* metatable: ljprof.zone on demand */
  lua_pushcfunction(L, module_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  return 1;
}
