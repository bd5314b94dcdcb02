/*
** The frames a trace had inlined where a sample landed (tracesnap.c):
** LuaJIT's snapshots, read from the trace object, turned into the Lua
** frames that the trace keeps only in registers while it runs.
**
** A trace's snapshot k describes the interpreter's frames at one point of
** the trace (the state restored if the trace exits there), and its machine
** code is [mcode + mcofs[k], mcode + mcofs[k+1]) (the last one runs to the
** end). A sample's PC in trace code thus names the snapshot whose frames
** were live when the code it ran began. The layouts (GCtrace's snapshot
** array, snapshot map, IR and their counts; the SnapShot record; the IR
** opcodes of function and number constants) are learnt once per process
** in a Lua state of ljprof's own and proven against jit.util.tracesnap,
** traceir, tracek and traceinfo; unproven, ljp_tsl.ok stays 0 and samples
** in traces keep the frame the trace runs in, as before.
**
** Normal context only, on the profiled thread while the trace is alive
** (read from the trace array at this safe point), or in the probe: the
** reads are plain loads of memory the trace owns, each bounded by counts
** read from the same trace and checked before use. One exception, in
** signal context: vm.h's ljp_vm_trace_span (the span of a merged tick's
** snapshot in the trace it runs in: at most 16 plain reads of the running
** trace's own block).
*/
#ifndef LJP_TRACESNAP_H
#define LJP_TRACESNAP_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

typedef struct ljp_tslayout {
  volatile int ok;        /* every offset below proven */
  volatile int tried;     /* the probe ran (it runs once per process) */
  ptrdiff_t t_nsnap;      /* GCtrace: uint16 number of snapshots */
  ptrdiff_t t_snap;       /* GCtrace: the SnapShot array */
  ptrdiff_t t_snapmap;    /* GCtrace: the snapshot map (uint32 entries) */
  ptrdiff_t t_nsnapmap;   /* GCtrace: uint32 entries in the map */
  ptrdiff_t t_ir;         /* GCtrace: IR (8-byte instructions, biased) */
  ptrdiff_t t_nk;         /* GCtrace: uint32 lowest constant (biased) */
  ptrdiff_t t_nins;       /* GCtrace: uint32 next instruction (biased);
                             -1 when not found (only mcmap.c reads it) */
  uint8_t op_kgc;         /* IR opcode of a GC object constant */
  uint8_t op_knum;        /* IR opcode of a number constant */
  uint8_t t_func;         /* IR type of a function */
  ptrdiff_t pt_sizebc;    /* GCproto: uint32 number of instructions */
  uint8_t op_ret[4];      /* bytecode opcodes RET0, RET1, RET, RETM */
  int traces, snaps;      /* what the proof was made with */
  char why[96];           /* why it is off */
} ljp_tslayout;

extern ljp_tslayout ljp_tsl;

/* Normal context, in a state of ljprof's own with the trace layouts of
** tracemem.h proven: learn and prove the snapshot layouts, once per
** process (vmlearn.c, when the first record in compiled code is
** completed: a run that takes none pays nothing). Returns ljp_tsl.ok. */
int ljp_tracesnap_probe(lua_State *S);

#define LJP_TS_MAX 16   /* inlined frames decoded per snapshot */

/* One inlined frame: its function object (kept alive by the trace as a
** constant), the bytecode PC it is at (the instruction after its call
** of the next inner frame, or after the one it resumes at for the
** innermost frame: a frame link's meaning, so that lines are read the
** same way) and its base as a slot relative to the trace's base frame
** (the frame at jit_base is 0). */
typedef struct ljp_tsframe {
  uintptr_t fn;
  uintptr_t pc;
  int32_t slot;
} ljp_tsframe;

/* Does bytecode PC pc (frame-link meaning: after an instruction) lie in
** the prototype whose first instruction is bc (alive)? */
int ljp_ts_pc_in(uintptr_t bc, uintptr_t pc);

/* The snapshot of trace T (alive) whose machine code holds mpc; -1 when
** mpc is not in T or the layout is unknown. */
int ljp_ts_snapno(uintptr_t T, uintptr_t mpc);

/* The frames above the trace's base frame that snapshot sn of trace T
** describes, innermost first, into out[max]; *basepc: the base frame's
** PC (frame-link meaning: the line read is that of the instruction
** before). Returns their count (0: the base frame runs), or -1 when the
** snapshot cannot be decoded whole (a continuation frame, a function
** that is not a constant, an entry out of range): then nothing of it is
** used. */
int ljp_ts_frames(uintptr_t T, int sn, ljp_tsframe *out, int max,
                  uintptr_t *basepc);

/* The frames for a sample at mpc in trace T: those of the snapshot whose
** code holds it, which were live where that code began. When the next
** snapshot (for the last one, the first) shows the same frames, the code
** between them ran in those frames. When they differ (code between two
** snapshots may call and return without a snapshot of its own), the code
** ran from the one set of frames to the other: LJP_TS_OWN keeps the
** snapshot's and sets *estimated; LJP_TS_CERTAIN keeps only the frames
** both show (outermost first, at the same slots); LJP_TS_SPLIT gives the
** first half of the code the snapshot's frames, the second half the next
** one's (*estimated set). LJP_TS_EXACT: the snapshot's, never compared.
** Same results as ljp_ts_frames. */
#define LJP_TS_OWN 0      /* its snapshot's frames (the default), flagged
                             estimated when the next one differs */
#define LJP_TS_EXACT 1    /* its snapshot's frames, exact in LuaJIT's
                             profiling mode (a snapshot at each function
                             change) */
#define LJP_TS_SPLIT 2
#define LJP_TS_CERTAIN 3
int ljp_ts_sample_frames(uintptr_t T, uintptr_t mpc, int mode, ljp_tsframe *out,
                   int max, uintptr_t *basepc, int *estimated,
                   const uint16_t *prof, int nprof, int *psn);
/* (*psn: the snapshot whose PC the innermost frame got, for
** ljp_ts_code_pc; -1 when that PC is a frame link.) */

/* Lines. A snapshot's PC is where the interpreter resumes when the trace
** exits through it, which is not always the bytecode its code was
** recorded from: a comparison's guard holds the target of the branch
** the trace did NOT take (lj_record.c, rec_comp_fixup: an exit resumes
** there, and a side trace records it), a for loop's check the loop's
** other way (rec_for: the exit while the trace goes round), and in
** LuaJIT's profiling mode a snapshot at a function's entry its header
** (the function's first line). ljp_ts_code_pc: for snapshot sn of trace
** T (alive) whose innermost frame's prototype starts at bc and whose PC
** is pc (frame-link meaning), the PC (same meaning) of the code that
** follows it: a header's, the function's first instruction; a loop
** check entering or going round, the loop's body; leaving, its exit; a
** comparison (its snapshot's first guard a comparison of the same kind,
** and pc the target of a comparison's jump or its fall-through), the
** other target, the branch taken (several comparisons sharing the
** target: the one line their taken branches share, else the one line
** they lie on, else pc). Anything else, snapshot 0 (a side trace's starts
** where its parent's exit resumes) and unlearnt opcodes: pc unchanged.
** Reads the trace's IR from the snapshot's reference to the next one's
** (at most 64) and the prototype's bytecode (the caller caches it per
** trace and snapshot). Normal context. ljp_ts_learn_ops: the opcodes, by
** their names in jit.vmdef (vmnames.h, learnt in S: a state of ljprof's
** own, when not yet), once per process; 0 when not learnt. */
uintptr_t ljp_ts_code_pc(uintptr_t T, int sn, uintptr_t bc, uintptr_t pc);
int ljp_ts_learn_ops(lua_State *S);

/* LuaJIT's profiling mode (inline=exact, jitmode.c) checks at each change
** of function (IR PROF: test byte [DISPATCH + d32], HOOK_PROFILE; jnz
** exit) and takes a snapshot after each check; but where a loop's body is
** copied, a snapshot with no guard between it and the next one is merged
** into the next (lj_opt_loop.c, loop_subst_snap): the code after such a
** check lies in the range of the snapshot before it, that of the function
** left. ljp_ts_op_prof: PROF's IR opcode (jit.vmdef's irnames, vmnames.h;
** set by ljp_ts_learn_prof_op, which vmlearn.c's ljp_vm_learn_prof_op
** calls when exact mode starts, the names learnt; -1: unknown).
** ljp_ts_profsites: the machine code offsets just after each check of
** trace T (alive), rising, into out[max]; their count, or -1 unless the
** checks found in the code are exactly as many as the PROF instructions of
** its IR, all with the same displacement. Normal context.
** ljp_ts_sample_frames in LJP_TS_EXACT mode, given them: a sample after a
** check in its snapshot's range, with no other check before the next
** snapshot, gets the next snapshot's frames (the function entered or
** returned to). */
extern int ljp_ts_op_prof;
void ljp_ts_learn_prof_op(void);
int ljp_ts_profsites(uintptr_t T, uint16_t *out, int max);

#endif
