/*
** Safe point entry points (ENTRY): where LuaJIT calls the profiler in normal
** context on the profiled thread. Only these and the other entry points
** (signal.c, api.c, lua_ljprof.c) look up a context.
**
**   ljp_hook            the Lua hook: a sample's safe point (armed by the
**                       signal handler through hook.c: the next bytecode
**                       dispatched or the next function entered, whichever
**                       comes first), and, while calls are counted, every
**                       call event
**   ljp_trace_event     the jit.attach "trace" handler (traces.c installs
**                       it and keeps what it learns)
**   ljp_exit_event      the jit.attach "texit" handler, LJPROF_STACKS=check
**                       only (traces.c installs it)
**   ljp_record_event    the jit.attach "record" handler, inline=recorded
**                       only (irmap.c installs it and keeps what it reads)
**   ljp_sethook_wrap,   debug.sethook/gethook while calls are counted
**   ljp_gethook_wrap    (calls.c installs them)
**
** ljp_hook is one ordered sequence: the rest hook state back, the pending
** records completed with this stack (complete.c), aggregation past the
** high-water mark (store), the jit.profile callback (host ticks in a
** call of their own, then the Lua ticks), a stop the callback
** asked for, an exit signal handed over, and the program's own event
** forwarded. The hook and the trace handler are regions of the exit gate
** (exit_signals.h): once an exit signal's helper owns the context, the
** profiled thread parks at their entry.
*/
#include <string.h>

#include "ljp.h"
#include "calls.h"
#include "exit_signals.h"

static int clamp_ticks(uint64_t n)
{
  return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* The jit.profile callback. Host ticks (no Lua call was active at the
** tick) come first, in a call of their own with vmstate 'C', during which
** dumpstack of L prints the host marker (cb_host_L, api.c): the live
** stack here is the Lua code that ran later, not where the ticks were.
** Then the Lua ticks, as jit.profile delivers them, unless the first call
** stopped the run. */
static void deliver(ljp_ctx *ctx, lua_State *L)
{
  int samples, vm;
  if (!ctx->opt.cb || ctx->state != LJP_RUNNING) return;
  if (ctx->cb_host) {
    samples = clamp_ticks(ctx->cb_host);
    ctx->cb_host = 0;
    ctx->cb_host_L = L;
    ctx->opt.cb(ctx->opt.cb_data, L, samples, 'C');
    ctx->cb_host_L = NULL;
    if (ctx->state != LJP_RUNNING || ctx->stop_requested) return;
  }
  if (!ctx->cb_ticks) return;
  samples = clamp_ticks(ctx->cb_ticks);
  vm = ctx->cb_vmstate;
  ctx->cb_ticks = 0;
  ctx->opt.cb(ctx->opt.cb_data, L, samples, vm);
}

/* LuaJIT aborts a trace being recorded on every hook call: it clears
** the "active" bit of the recorder's state right before it calls the
** hook (lj_trace_abort), and the recorder acts on that at the next
** instruction. A state with the bit cleared at our hook's entry was
** recording when the call came: this call asked for the abort. */
static int interrupted_recording(int32_t js)
{
  return js > 0 && js < LJP_JS_ACTIVE;
}

void ljp_hook(lua_State *L, lua_Debug *ar)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  ljp_hookst *h;
  uint64_t t0;
  int ev, user_count_ev = 0, rec;
  int32_t js;
  if (!ctx) {  /* cannot happen: stop restores the hook before freeing */
    ljp_hook_clear(L);
    return;
  }
  h = &ctx->hook;
  ev = ar->event == LUA_HOOKTAILRET ? LUA_HOOKRET : ar->event;
  js = ljp_vm_jstate(ctx->vm_g);
  rec = interrupted_recording(js);
  ljp_gate_enter(&ctx->exit);  /* parks here once the exit helper owns it */
  /* Counting calls (calls.c): our hook stays installed between samples.
  ** Count the call; unless a sample or an exit signal waits, hand the
  ** event to the program's hook (a count event too: it is the program's
  ** when we are not armed) and return. A pending sample completes here
  ** even if its arming was lost. */
  if (h->counting) {
    int armed = ljp_hook_armed(h);
    if (ev == LUA_HOOKCALL && ljp_calls_count(ctx, L, ar)) {
      ljp_gate_leave(&ctx->exit);
      return;
    }
    if (!armed && !ljp_ring_pending(&ctx->ring) && !ctx->exit.signal) {
      ljp_gate_leave(&ctx->exit);
      ljp_hook_forward(h, L, ar, ev);
      return;
    }
    user_count_ev = !armed && ev == LUA_HOOKCOUNT;
  } else if (h->held && ev == LUA_HOOKCALL &&
             !(h->user_mask & LUA_MASKCALL)) {
    /* Our count hook is held back while the recorder runs (hook.c,
    ** ljp_hook_recording), and so is the safe point: our call bit is not
    ** (no lua_sethook during a recording). The abort this call asked
    ** for is taken back as in step 8; the next call or bytecode after the
    ** recording is the safe point. */
    if (rec && ljp_vm_jstate(ctx->vm_g) == js) {
      ljp_vm_jstate_set(ctx->vm_g, js | LJP_JS_ACTIVE);
      ctx->recorder_kept++;
    }
    ljp_gate_leave(&ctx->exit);
    return;
  }
  t0 = ljp_now_ns();
  /* 1. The rest state back; remember where LuaJIT called us from. A call
  ** event (the arming's call bit: how a compiled loop calling C through
  ** stitched traces reaches a safe point, hook.c) entering a C function:
  ** that function has not run yet, the records' stacks start below it. */
  ljp_hook_enter(h);
  ljp_hook_safepoint(h, (uintptr_t)__builtin_return_address(0), ev);
  ctx->in_safepoint = 1;
  ctx->safepoints++;
  ctx->sp_callee = ev == LUA_HOOKCALL && lua_getinfo(L, "S", ar) &&
                   ar->what && ar->what[0] == 'C';
  if (!ljp_vm_jstate_known() && !h->recording)
    ljp_vm_learn_jstate(ctx->vm_g, LJP_JS_IDLE);
  /* 2. Complete every pending record with this stack (first, in
  ** LJPROF_STACKS=check runs, the trace exit just taken against its
  ** snapshot). */
  if (ctx->snapchk.pending) ljp_snapcheck_run(ctx, L);
  ljp_complete(ctx, L);
  ctx->sp_callee = 0;
  ljp_hook_leave(h);
  ctx->complete_ns += ljp_now_ns() - t0;
  /* 3. The sampling signal still ours (every 100 ms)? Aggregate past the
  ** high-water mark; our trace handler still in? */
  ljp_run_check_signal(ctx, L, 0);
  if (ljp_ring_completed(&ctx->ring) >= ctx->ring.cap / 2) {
    ljp_aggregate(ctx);
    ljp_traces_check(ctx, L);
    if (ctx->irmap) ljp_irmap_check(ctx, L, 1);  /* replaced? */
  } else if (ctx->irmap) {
    ljp_irmap_check(ctx, L, 0);                  /* budget spent? */
  }
  /* 4. The jit.profile callback: not inside a recording (its Lua code
  ** would run in the recorder's place); its ticks wait for the next
  ** safe point. */
  if (!rec) deliver(ctx, L);
  ctx->in_safepoint = 0;
  ctx->hook_ns += ljp_now_ns() - t0;
  /* 5. A stop asked by the callback, else samples that came meanwhile
  ** (not while the recorder is busy: the hook would abort its trace; the
  ** next signal that finds it idle arms). */
  if (ctx->stop_requested) ljp_run_stop(ctx, L);
  else if (ljp_vm_jit_idle(ctx->vm_g)) ljp_hook_settle(h);
  ljp_gate_leave(&ctx->exit);
  /* 6. An exit signal: the samples are complete; the exit helper writes
  ** the profile and the program dies of the signal (exit_signals.c). */
  if (ctx->exit.signal) ljp_exit_handover(ctx);  /* does not return */
  /* 7. A program event that arrived while we were armed, or the
  ** program's count event that came due during the sample: that hook
  ** call would have aborted a recording without ljprof too. A call
  ** event the program's mask does not ask for was ours alone. */
  if (ev != LUA_HOOKCOUNT || user_count_ev || ljp_hook_take_due(h)) {
    if (ljp_hook_forward(h, L, ar, ev) || ev != LUA_HOOKCALL)
      return;
  }
  /* 8. Our own safe point came inside a trace recording (armed in a
  ** trace whose exit then started a side trace, before any bytecode
  ** ran, or a function header it recorded): the abort its call asked
  ** for is taken back, if the state is
  ** still exactly as the hook call left it, i.e. nothing since (no Lua
  ** code: no callback, no finalizer) has made the recorder act on it.
  ** The recorder then goes on as if no hook had been called; ljprof
  ** never aborts a trace. */
  if (rec && ljp_vm_jstate(ctx->vm_g) == js) {
    ljp_vm_jstate_set(ctx->vm_g, js | LJP_JS_ACTIVE);
    ctx->recorder_kept++;
  }
}

/* -- debug.sethook / debug.gethook while counting ---------------------------- */

/* debug.sethook: the original sets the program's hook; ours then goes
** back on top with it as the program's hook. The original's own call is
** neither counted nor forwarded (calls_skip): the program sees one call. */
static int ljp_sethook_wrap(lua_State *L)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  if (ctx && ctx->hook.counting && ljp_hook_is_ours(&ctx->hook))
    ctx->calls_skip = 1;
  lua_call(L, n, 0);
  if (ctx) {
    ctx->calls_skip = 0;
    ljp_hook_program_set(&ctx->hook);
  }
  return 0;
}

/* debug.gethook: the original answers for the program's hook, installed
** for the call without its call bit (so the call itself is no event). */
static int ljp_gethook_wrap(lua_State *L)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  int n = lua_gettop(L), ours, status;
  ours = ctx && ctx->hook.counting && ljp_hook_is_ours(&ctx->hook);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  if (ours) ljp_hook_expose_program(&ctx->hook);
  status = lua_pcall(L, n, LUA_MULTRET, 0);
  if (ours && ctx->hook.counting)  /* ours back, the program's as saved */
    ljp_hook_restore(&ctx->hook);
  if (status != 0) return lua_error(L);
  if (ours && lua_gettop(L) >= 3) {  /* the mask and count as set */
    char m[4];
    int i = 0, mask = ctx->hook.user_mask;
    if (mask & LUA_MASKCALL) m[i++] = 'c';
    if (mask & LUA_MASKRET) m[i++] = 'r';
    if (mask & LUA_MASKLINE) m[i++] = 'l';
    lua_pushlstring(L, m, (size_t)i);
    lua_replace(L, 2);
    lua_pushinteger(L, ctx->hook.user_count);
    lua_replace(L, 3);
  }
  return lua_gettop(L);
}

/* -- Trace events ---------------------------------------------------------- */

/* The jit.attach "trace" handler: (what, tr, func, pc, otr, oex), a closure
** made by traces.c. The handler it replaced is called after ours. */
/* One event in 64 is timed (two clock reads would cost about as much as
** the handler itself): stats() reports the time scaled up. */
#define EVENT_TIMED 63

static int ljp_trace_event(lua_State *L)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  int nargs, timed = ctx && !(ctx->tr.events & EVENT_TIMED);
  uint64_t t0 = timed ? ljp_now_ns() : 0;
  if (ctx) ljp_gate_enter(&ctx->exit);
  nargs = ljp_traces_event(ctx, L);
  if (ctx) {
    ljp_traces_counted(&ctx->tr, timed ?
                       (ljp_now_ns() - t0) * (EVENT_TIMED + 1) : 0);
    ljp_gate_leave(&ctx->exit);
  }
  return ljp_traces_chain(L, nargs);
}

/* The jit.attach "texit" handler (tr, ex, ...), LJPROF_STACKS=check only:
** the interpreter resumes in the frames snapshot ex restored; the safe
** point armed here compares them with the decoded snapshot. */
static int ljp_exit_event(lua_State *L)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  if (ctx && ctx->state == LJP_RUNNING) {
    ljp_gate_enter(&ctx->exit);
    if (ljp_snapcheck_note(ctx, (int32_t)lua_tointeger(L, 1),
                           (int32_t)lua_tointeger(L, 2)))
      ljp_hook_arm(&ctx->hook);
    ljp_gate_leave(&ctx->exit);
  }
  return 0;
}

/* The jit.attach "record" handler (tr, func, pc, depth), inline=recorded:
** a closure made by irmap.c, which chains the handler it replaced. */
static int ljp_record_event(lua_State *L)
{
  ljp_ctx *ctx = ljp_slot_find(lua_topointer(L, LUA_REGISTRYINDEX));
  return ljp_traces_chain(L, ljp_irmap_event(ctx, L));
}

const ljp_entries ljp_safepoint_entries = {
  ljp_hook, ljp_trace_event, ljp_sethook_wrap, ljp_gethook_wrap,
  ljp_exit_event, ljp_record_event,
};
