/*
** The hook owner (see hook.h): arming the safe point, the program's saved
** hook, the call mask while counting, holding back while traces record.
**
** Arming decides from the actual hook state every time and never trusts a
** remembered "armed" flag: LuaJIT restores hook masks after __gc
** finalizers, hooks do not run inside hooks (LuaJIT issue 512), and the
** program may set its own hook at any time. The program's hook keeps
** working: it is saved when we arm, our hook is armed with the program's
** mask plus LUA_MASKCOUNT and LUA_MASKCALL (hook.h: the call bit is how a
** compiled loop calling C through stitched traces reaches a safe point;
** not under a program line hook, ljp_hook_arm), a
** program event that reaches our hook is forwarded (a call event only when
** the program's mask asks for it), and the rest state is put back before
** the hook returns. A
** program count hook keeps its countdown across a sample when the VM
** probe located g->hookcount (else it restarts after each sample).
**
** Signal context: ljp_hook_armed, ljp_hook_arm, ljp_hook_arm_safe and
** ljp_hook_rest only (lua_gethook*, lua_sethook). The rest runs in normal
** context on the profiled thread.
*/
#include "hook.h"
#include "vm.h"

void ljp_hook_init(ljp_hookst *h, lua_State *L, ljp_ring *ring)
{
  h->L = L;
  h->ring = ring;
}

void ljp_hook_bind(ljp_hookst *h, lua_Hook fn) { h->fn = fn; }

void ljp_hook_live(ljp_hookst *h, int live) { h->live = live; }

void ljp_hook_new_run(ljp_hookst *h) { h->user = NULL; }

void ljp_hook_set_global(ljp_hookst *h, uintptr_t g) { h->g = g; }

int ljp_hook_is_ours(const ljp_hookst *h)
{
  return h->fn && lua_gethook(h->L) == h->fn;
}

lua_Hook ljp_hook_program(const ljp_hookst *h)
{
  lua_Hook f = lua_gethook(h->L);
  return h->fn && f == h->fn ? h->user : f;
}

/* -- Signal context -------------------------------------------------------- */

/* While counting calls our hook is always installed, and a program count
** hook may be forwarded through it: armed is the count bit with count 1. */
int ljp_hook_armed(const ljp_hookst *h)
{
  return ljp_hook_is_ours(h) && (lua_gethookmask(h->L) & LUA_MASKCOUNT) &&
         (!h->counting || lua_gethookcount(h->L) == 1);
}

/* Our hook without the count bit (a mask written back by LuaJIT over ours,
** or by the program) is re-armed. The call bit too: in LuaJIT the count
** hook is reached only through the dispatch of an instruction
** (lj_dispatch_update points the instruction entries at lj_vm_inshook, the
** function headers' only at lj_vm_callhook, for a call mask), and a
** stitched trace's end (lj_vm_exit_interp) dispatches the C function's
** header, whose return goes through lj_cont_stitch straight to the next
** trace (its BC_JLOOP code, not the dispatch table). Not under a program
** line hook: after a call hook LuaJIT clears the saved PC (lj_vm_callhook:
** "Invalidate for subsequent line hook"), so the program would get its
** current line a second time (test_hooks: 5 in 120,005 line events).
** Only when asked (call): a tick in the interpreter meets the count hook
** at its next bytecode anyway, and the call bit costs two rewrites of the
** function headers' dispatch entries (lj_dispatch_update, ~800
** instructions a sample: cost_gate's deepi). */
static int call_bit(const ljp_hookst *h, int call)
{
  return h->counting || (call && !(h->user_mask & LUA_MASKLINE));
}

void ljp_hook_arm_for(ljp_hookst *h, int call)
{
  lua_State *L = h->L;
  if (!h->fn) return;
  if (ljp_hook_armed(h) &&
      (!call_bit(h, call) || (lua_gethookmask(L) & LUA_MASKCALL)))
    return;
  if (lua_gethook(L) != h->fn) {
    h->user = lua_gethook(L);
    h->user_mask = h->user ? lua_gethookmask(L) : 0;
    h->user_count = lua_gethookcount(L);
  }
  if (!h->user_left_saved) {  /* the rest state is still installed */
    h->user_left = (h->user_mask & LUA_MASKCOUNT) ?
                   ljp_vm_hookcount_get(h->g) : -1;
    h->user_left_saved = 1;
  }
  lua_sethook(L, h->fn, h->user_mask | LUA_MASKCOUNT |
              (call_bit(h, call) ? LUA_MASKCALL : 0), 1);
}

void ljp_hook_arm(ljp_hookst *h) { ljp_hook_arm_for(h, 1); }

/* LuaJIT's callhook() loads the hook mask, and some instructions later
** stores it back with the "hook active" bit set (a plain load/modify/
** store). A lua_sethook from a signal in between is half undone: our hook
** stays installed but the count bit is lost, while the dispatch table
** stays in instruction-hook mode. The sample then waits for the next
** signal, and a program hook with a return mask but no line or count mask
** misses return events meanwhile. The window lies just before the return
** address of the hook call, which the safe point learns for each kind of
** event (count and call: callhook may be inlined into both callers); the
** next signal arms instead. */
static int outside(uintptr_t ret, uintptr_t pc)
{
  return !ret || pc + 256 <= ret || pc >= ret + 64;
}

int ljp_hook_arm_safe(const ljp_hookst *h, uintptr_t pc)
{
  return outside(atomic_load_explicit(&h->callhook_ret[0],
                                      memory_order_relaxed), pc) &&
         outside(atomic_load_explicit(&h->callhook_ret[1],
                                      memory_order_relaxed), pc);
}

/* The rest state back. lua_sethook restarts the program's count hook
** countdown; the one saved when we armed is put back instead, less the
** instructions run since (ran: 1 at a count event, else 0). */
static void rest(ljp_hookst *h, int ran)
{
  int32_t left = h->user_left;
  if (h->counting)
    lua_sethook(h->L, h->fn, h->user_mask | LUA_MASKCALL, h->user_count);
  else
    lua_sethook(h->L, h->user, h->user_mask, h->user_count);
  if (!h->user_left_saved) return;
  h->user_left_saved = 0;
  if (left <= 0 || !(h->user_mask & LUA_MASKCOUNT) || h->user_count <= 0)
    return;
  left -= ran;
  if (left <= 0) {  /* the program's count event is due now */
    h->user_due = 1;
    left = h->user_count;
  }
  ljp_vm_hookcount(h->g, left);
}

void ljp_hook_rest(ljp_hookst *h) { rest(h, 0); }

/* -- Normal context -------------------------------------------------------- */

void ljp_hook_safepoint(ljp_hookst *h, uintptr_t ret, int ev)
{
  if (ev == LUA_HOOKCOUNT || ev == LUA_HOOKCALL)
    atomic_store_explicit(&h->callhook_ret[ev == LUA_HOOKCALL], ret,
                          memory_order_relaxed);
  rest(h, ev == LUA_HOOKCOUNT);
}

int ljp_hook_take_due(ljp_hookst *h)
{
  int due = h->user_due;
  h->user_due = 0;
  return due;
}

void ljp_hook_disarm(ljp_hookst *h)
{
  ljp_hook_enter(h);
  if (ljp_hook_is_ours(h)) ljp_hook_rest(h);
  ljp_hook_leave(h);
}

void ljp_hook_settle(ljp_hookst *h)
{
  while (h->live && !h->recording && h->ring &&
         ljp_ring_pending(h->ring) && !ljp_hook_armed(h)) {
    ljp_hook_enter(h);
    ljp_hook_arm(h);
    ljp_hook_leave(h);
  }
}

/* A signal may have armed us again since the rest state was put back:
** then the program's hook is the one the handler saved, and the event
** must still reach it. */
int ljp_hook_forward(ljp_hookst *h, lua_State *L, lua_Debug *ar, int ev)
{
  lua_Hook fn;
  int mask;
  ljp_hook_enter(h);
  fn = lua_gethook(L);
  mask = lua_gethookmask(L);
  if (fn == h->fn) {
    fn = h->user;
    mask = h->user_mask;
  }
  ljp_hook_leave(h);
  if (!fn || !(mask & (1 << ev))) return 0;
  fn(L, ar);
  return 1;
}

/* The program's hook is whatever is installed unless it is ours; then ours
** goes back on top. */
static void take_over(ljp_hookst *h)
{
  lua_Hook fn;
  ljp_hook_enter(h);
  fn = lua_gethook(h->L);
  if (fn != h->fn) {
    h->user = fn;
    h->user_mask = fn ? lua_gethookmask(h->L) : 0;
    h->user_count = lua_gethookcount(h->L);
  }
  ljp_hook_rest(h);
  ljp_hook_leave(h);
  ljp_hook_settle(h);  /* a sample armed before is armed again */
}

void ljp_hook_count_calls(ljp_hookst *h, int on)
{
  if (on) {
    h->counting = 1;
    take_over(h);
  } else if (h->counting) {
    ljp_hook_enter(h);
    h->counting = 0;
    ljp_hook_leave(h);
    ljp_hook_disarm(h);  /* the program's own hook back */
  }
}

void ljp_hook_program_set(ljp_hookst *h)
{
  if (h->counting) take_over(h);
}

void ljp_hook_expose_program(ljp_hookst *h)
{
  ljp_hook_enter(h);
  lua_sethook(h->L, h->user, h->user_mask & ~LUA_MASKCALL, h->user_count);
  ljp_hook_leave(h);
}

void ljp_hook_restore(ljp_hookst *h)
{
  ljp_hook_enter(h);
  ljp_hook_rest(h);
  ljp_hook_leave(h);
  ljp_hook_settle(h);
}

/* A hook armed when recording starts would fire at the first recorded
** instruction and abort the trace; lua_sethook would abort it too. It is
** held back by its countdown instead (INT32_MAX), and released (1: the
** next bytecode) when recording ends. */
void ljp_hook_recording(ljp_hookst *h, uintptr_t g, int on)
{
  if (on) {
    h->recording = 1;
    if (!h->held && g && ljp_vm_hookcount_known() && ljp_hook_armed(h)) {
      ljp_vm_hookcount(g, INT32_MAX);
      h->held = 1;
    }
    return;
  }
  h->recording = 0;
  if (h->held) {
    h->held = 0;
    if (ljp_hook_armed(h)) ljp_vm_hookcount(g, 1);
  }
  ljp_hook_settle(h);  /* samples waited for the recorder */
}

void ljp_hook_forget_recorder(ljp_hookst *h)
{
  h->recording = 0;
  h->held = 0;
}

void ljp_hook_clear(lua_State *L) { lua_sethook(L, NULL, 0, 0); }
