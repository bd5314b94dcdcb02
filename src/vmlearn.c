/*
** Learning the LuaJIT side (vm.h): its layouts (vmprobe.c, luastack.c,
** tracemem.c, tracesnap.c), fast-function ids (ffid.c) and opcode names
** (vmnames.c), learnt once per process in a Lua state of ljprof's own
** and proven before use, and what was proven, for run control and the
** run's stats (ljp_vm_caps).
**
** Normal context only (a mutex, Lua states made and closed); the sampler
** side calls these at start (run.c, api.c) and, for the snapshot
** layouts, when the first record in compiled code is completed
** (luaframes.c).
*/
#include <pthread.h>

#include <lua.h>

#include "vm.h"
#include "ffid.h"
#include "irmap.h"
#include "luastack.h"
#include "mcmap.h"
#include "ownstate.h"
#include "tracemem.h"
#include "tracesnap.h"
#include "vmnames.h"
#include "vmprobe.h"

/* LuaJIT's layouts are the same in every Lua state of the process: they
** are learnt in a state of ljprof's own, made for it and closed after, not
** in the program's; the fast-function ids too, in the same state, after
** the probes (so that these see a fresh state, and the ids are read from
** the objects by the byte the VM probe proved). Learning runs Lua (probe chunks, coroutines, a loop
** compiled into a trace, jit.util.funcinfo over the libraries) and
** allocates; in the program's state that moved its objects and bytecode
** and took hot counters and trace numbers, which changes LuaJIT's choice
** of traces for the rest of the run (richards: 75 traces unprofiled,
** 77-84 after `require "ljprof"` and varying from run to run). A few
** tries per process when something could not be learnt. The state's
** collector is stopped while it learns (it is closed right after): each
** probe chunk's parse and run paid for collections, 0.18 M instructions
** a start (callgrind, bench/cost). */
static pthread_mutex_t learn_mu = PTHREAD_MUTEX_INITIALIZER;

/* learn_mu: jit.vmdef's opcode names were tried in a state of ljprof's
** own for ljp_vm_learn_prof_op (at an inline=exact start, or by it). */
static int names_tried;

void ljp_vm_learn_layouts(void) { ljp_vm_learn_start(0, 0); }

/* The record map's layout (irmap), when asked, in the same state as the
** others: a state of its own cost 0.29 M instructions more per process
** (made and closed; callgrind, bench/cost, 2026-11-29). jit.vmdef's
** opcode names (names: an inline=exact start, for PROF's opcode) too. */
void ljp_vm_learn_start(int irmap, int names)
{
  static int tries;  /* learn_mu: states of several threads may start */
  lua_State *S;
  pthread_mutex_lock(&learn_mu);
  if (!(ljp_vml.vmstate_ok && ljp_lsl.ok && ljp_lsl.jit_ok &&
        ljp_ffid_known()) && tries < 3 &&
      (S = ljp_own_newstate(NULL, NULL)) != NULL) {  /* never auto-profiled */
    int ff = !ljp_ffid_known();
    tries++;
    lua_gc(S, LUA_GCSTOP, 0);
    if (ljp_vmprobe(S) && ljp_luastack_probe(S)) ljp_tracemem_probe(S);
    if (irmap && !ljp_irl.tried && ljp_tml.ok) ljp_irmap_probe(S);
    if (ff) ljp_ffid_learn_in(S);
    if (names) {
      ljp_vmnames_learn(S);
      names_tried = 1;
    }
    lua_close(S);
    if (ff) ljp_ffid_own_closed();
  }
  pthread_mutex_unlock(&learn_mu);
}

/* The snapshot layouts (tracesnap.c), learnt when the first record in
** compiled code is completed (at a safe point or at stop: about 1.35 M
** instructions, callgrind, bench/cost's mandelbrot; once per process),
** not at every start: a run that takes no sample in a trace does not pay
** for them. In a state with the libraries the probes use only
** (ownstate.c), its collector stopped (each chunk's parse and run paid
** for collections). */
void ljp_vm_learn_snapshots(void)
{
  lua_State *S;
  pthread_mutex_lock(&learn_mu);
  if (!ljp_tsl.tried && ljp_tml.ok && (S = ljp_own_newstate_jit())) {
    lua_gc(S, LUA_GCSTOP, 0);
    ljp_tracesnap_probe(S);
    ljp_mcmap_learn(S);   /* IR opcodes, calls (vmnames.c, jit.util) */
    ljp_ts_learn_ops(S);  /* lines: comparisons, loops (vmnames.c) */
    lua_close(S);
  }
  pthread_mutex_unlock(&learn_mu);
}

/* The record map's layout (irmap.c), at the start of an inline=recorded
** run (its handler must see the first traces), when the layouts were
** learnt before without it (ljp_vm_learn_start learns both in one state). The snapshot layouts it
** uses to derive and check a map wait, as before, for the first sample in
** compiled code. */
void ljp_vm_learn_irmap(void)
{
  lua_State *S;
  pthread_mutex_lock(&learn_mu);
  if (!ljp_irl.tried && ljp_tml.ok && (S = ljp_own_newstate(NULL, NULL))) {
    ljp_irmap_probe(S);
    lua_close(S);
  }
  pthread_mutex_unlock(&learn_mu);
}

/* PROF's IR opcode (tracesnap.c) from the opcode names learnt in a state
** of ljprof's own: at this start's (ljp_vm_learn_start, names), or before
** (the record map's probe, the snapshot layouts), else in one made here
** once. Only when they cannot be learnt there (the program's package.path
** alone finds jit.vmdef) are they learnt in L: read from the module's text
** found by L's package.searchpath, or the module required in L. */
void ljp_vm_learn_prof_op(lua_State *L)
{
  lua_State *S;
  pthread_mutex_lock(&learn_mu);
  if (ljp_ts_op_prof < 0) {
    if (!ljp_vmnames_known() && !names_tried &&
        (S = ljp_own_newstate(NULL, NULL)) != NULL) {
      lua_gc(S, LUA_GCSTOP, 0);
      ljp_vmnames_learn(S);
      names_tried = 1;
      lua_close(S);
    }
    ljp_vmnames_learn(L);  /* (nothing done when known) */
    ljp_ts_learn_prof_op();
  }
  pthread_mutex_unlock(&learn_mu);
}

void ljp_vm_caps(ljp_vmcaps *c)
{
  c->cfunc = ljp_vml.cfunc_ok;
  c->jstate = ljp_vml.jstate_ok;
  c->host = ljp_vml.cframe_ok;
  c->host_main = ljp_vml.cframe_ok && ljp_vml.mainth_ok;
  c->capture = ljp_lsl.ok;
  c->lines = ljp_lsl.lines_ok;
  c->snap_off = !ljp_tsl.ok && ljp_tsl.tried
                    ? (ljp_tsl.why[0] ? ljp_tsl.why : "off") : NULL;
}
