/*
** Inlined frames from LuaJIT's trace snapshots (tracesnap.h).
**
** Decoding (GC64, two slots per frame): a snapshot's map holds its
** entries, (slot << 24) | flags | IR reference, by rising slot, then one
** 64-bit word (pc << 8) | (base slot - 2): the bytecode the snapshot
** resumes at and the base of its innermost frame. Slot 0 is the trace's
** base frame's function, slot 2 its first local. A frame based at slot b
** has its function at b - 2 (an IR constant, the function object) and
** its link at b - 1 (a number constant holding the link LuaJIT wrote: a
** return PC for a frame called from Lua, whose call instruction's A
** operand gives the caller's base; a delta for a vararg frame, under
** which the same function's pseudo-frame lies). The frames are followed
** from the innermost down to slot 2, the base frame that the signal's
** capture already holds. Anything else (continuation and pcall frames, a
** function that is not a constant, an entry missing or out of range)
** leaves the snapshot undecoded: an honest shorter stack, never a guess.
**
** Learning (ljp_tracesnap_probe, once per process, in ljprof's own Lua
** state): a loop calls a function that calls another, each storing into
** a table (stores need snapshots inside the inlined frames), and a
** vararg function; jit.util, called from C, then tells each trace's
** snapshot count, instruction and constant counts (traceinfo), each
** snapshot's IR reference, slot count and entries (tracesnap), each
** instruction's opcode and type (traceir) and the constants the snapshots
** reference (tracek). The fields are the ones offset in the trace object
** where every trace and every snapshot agrees, found once each (the
** instruction count too, for mcmap.c only: not found, mcmap stays off);
** the snapshots' machine code offsets must start at 0 and rise within the
** code. The
** decoder is then replayed on every probe snapshot: the functions it
** finds must be the probe's own.
**
** inline=exact (LuaJIT's profiling mode): ljp_ts_profsites finds a
** trace's function-change checks in its machine code (x64: test byte
** [r14 + d32], 0x80; jnz), once per trace, at a safe point, reading only
** the live trace's code and IR; the offsets count only when they are as
** many as the IR's PROF instructions (opcode by name, vmnames.c), all with
** one displacement. A bad read finds a count that differs: not used.
**
** Lines (ljp_ts_code_pc, luaframes.c caches it per trace and snapshot):
** the bytecode a snapshot's code was recorded from, where its PC is
** another (a comparison's: the branch not taken; a for loop's check: the
** loop's other way; a function's entry: its header). Normal context, the
** trace alive: at most 64 IR instructions from the snapshot's reference
** and the prototype's bytecode, bounded by its count; bytecode and IR
** opcodes by name (vmnames.c; ljp_ts_learn_ops, with the layouts).
** A bad read gives a wrong line, never a read outside those bounds.
**
** Signal context, one function (vm.h: ljp_vm_trace_span): for a tick
** merged on a full ring, the code span of the snapshot holding its PC in
** the trace it runs in, a binary search of at most 16 plain reads of
** that trace's own block (alive: it runs), bounded by its snapshot count,
** with the array checked to lie in the block; no thread-local, no call.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <lauxlib.h>

#include "luastack.h"
#include "tracemem.h"
#include "tracesnap.h"
#include "vmnames.h"
#include "vmprobe.h"

ljp_tslayout ljp_tsl;
/* The probe's replay: the readers work on the layout being proven, on the
** learning thread only, while ljp_tsl.ok stays 0 for every other one. */
static __thread int proving;

#define REF_BIAS 0x8000u
#define SNAP_FRAME 0x010000u
#define SNAPSZ 12           /* sizeof(SnapShot): mapofs, ref, mcofs, nslots,
                               topslot, nent, count */
#define TWIN 160            /* bytes of a trace object examined */
#define TAIL 24             /* a linking trace's last bytes: add BASE, imm32;
                               mov [jit_base], BASE; jmp (7 + 7 + 5) */

/* -- Readers (normal context, the trace alive) ------------------------------ */

static inline uint32_t ld32(uintptr_t p) { uint32_t v; memcpy(&v, (const void *)p, 4); return v; }
static inline uint64_t ld64(uintptr_t p) { uint64_t v; memcpy(&v, (const void *)p, 8); return v; }
static inline uint16_t ld16(uintptr_t p) { uint16_t v; memcpy(&v, (const void *)p, 2); return v; }

int ljp_ts_snapno(uintptr_t T, uintptr_t mpc)
{
  uintptr_t mc, snap;
  uint32_t sz, ofs;
  int lo = 0, hi;
  if (!(ljp_tsl.ok || proving) || !T) return -1;
  mc = ld64(T + (uintptr_t)ljp_tml.t_mcode);
  sz = ld32(T + (uintptr_t)ljp_tml.t_szmcode);
  if (mpc < mc || mpc - mc >= sz) return -1;
  ofs = (uint32_t)(mpc - mc);
  hi = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  if (hi <= 0 || !snap) return -1;
  /* The rightmost snapshot whose code starts at or before ofs. */
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (ofs < ld16(snap + (uintptr_t)mid * SNAPSZ + 6)) hi = mid;
    else lo = mid + 1;
  }
  return lo - 1;
}

/* -- Signal context: the span of a PC's snapshot (vm.h) --------------------- */

/* A trace's snapshots lie in its own block, after GCtrace and its IR
** (lj_trace.c: trace_save): at most 65536 IR instructions of 8 bytes. */
#define SNAP_IN_TRACE (1u << 21)

int ljp_vm_trace_span(uintptr_t T, uintptr_t pc, uintptr_t code[2],
                      uintptr_t span[2])
{
  uintptr_t mc = *(volatile uintptr_t *)(T + (uintptr_t)ljp_tml.t_mcode);
  uint32_t sz = *(volatile uint32_t *)(T + (uintptr_t)ljp_tml.t_szmcode);
  uintptr_t snap;
  uint32_t ofs, lo, hi;
  int a = 0, b, nsnap;
  code[0] = mc;
  code[1] = mc + sz;
  span[0] = span[1] = 0;
  if (pc - mc >= sz) return -1;
  span[0] = pc;
  span[1] = pc + 1;
  /* (not `proving`: a thread-local of a loaded library may allocate) */
  if (!ljp_tsl.ok) return 0;
  nsnap = *(volatile uint16_t *)(T + (uintptr_t)ljp_tsl.t_nsnap);
  snap = *(volatile uintptr_t *)(T + (uintptr_t)ljp_tsl.t_snap);
  if (nsnap <= 0 || snap <= T || snap - T >= SNAP_IN_TRACE) return 0;
  ofs = (uint32_t)(pc - mc);
  /* The rightmost snapshot whose code starts at or before ofs (as
  ** ljp_ts_snapno): at most 16 steps. */
  b = nsnap;
  while (a < b) {
    int mid = (a + b) >> 1;
    if (ofs < *(volatile uint16_t *)(snap + (uintptr_t)mid * SNAPSZ + 6))
      b = mid;
    else
      a = mid + 1;
  }
  lo = a ? *(volatile uint16_t *)(snap + (uintptr_t)(a - 1) * SNAPSZ + 6) : 0;
  hi = a < nsnap ? *(volatile uint16_t *)(snap + (uintptr_t)a * SNAPSZ + 6)
                 : sz;
  /* The last snapshot's last TAIL bytes are not decoded
  ** (ljp_ts_sample_frames): a span of their own. */
  if (a == nsnap && sz > TAIL) {
    if (ofs >= sz - TAIL) { if (lo < sz - TAIL) lo = sz - TAIL; }
    else if (hi > sz - TAIL) hi = sz - TAIL;
  }
  if (lo > ofs || ofs >= hi || hi > sz) return 0;  /* read as it changed */
  span[0] = mc + lo;
  span[1] = mc + hi;
  return 1;
}

/* The entry for slot s among map[0..nent) (rising slots), or 0. */
static uint32_t entry_at(uintptr_t map, uint32_t nent, uint32_t s)
{
  uint32_t lo = 0, hi = nent;
  while (lo < hi) {
    uint32_t mid = (lo + hi) >> 1, e = ld32(map + 4u * mid);
    if ((e >> 24) < s) lo = mid + 1;
    else if ((e >> 24) > s) hi = mid;
    else return e;
  }
  return 0;
}

/* The 64-bit value of constant ref, if its opcode (and type) is as asked. */
static int kvalue(uintptr_t ir, uint32_t nk, uint32_t ref, int op, int type,
                  uint64_t *v)
{
  uint16_t ot;
  if (ref < nk || ref + 1 >= REF_BIAS) return 0;
  ot = ld16(ir + 8u * ref + 4);
  if ((ot >> 8) != op || (type >= 0 && (ot & 0x1f) != type)) return 0;
  *v = ld64(ir + 8u * (ref + 1));
  return 1;
}

int ljp_ts_pc_in(uintptr_t bc, uintptr_t pc)
{
  uint32_t n;
  if (!(ljp_tsl.ok || proving) || !bc || pc <= bc || (pc & 3)) return 0;
  n = ld32(bc - (uintptr_t)ljp_tml.pt_size + (uintptr_t)ljp_tsl.pt_sizebc);
  return pc - bc <= 4u * (uintptr_t)n;
}

int ljp_ts_frames(uintptr_t T, int sn, ljp_tsframe *out, int max,
                  uintptr_t *basepc)
{
  uintptr_t snap, S, map, ir, pc;
  uint32_t mapofs, nent, nk, b, skip = 0;
  uint64_t pcbase;
  int n = 0;
  if (!(ljp_tsl.ok || proving) || sn < 0 ||
      sn >= ld16(T + (uintptr_t)ljp_tsl.t_nsnap))
    return -1;
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  S = snap + (uintptr_t)sn * SNAPSZ;
  mapofs = ld32(S);
  nent = *(const uint8_t *)(S + 10);
  if ((uint64_t)mapofs + nent + 2 > ld32(T + (uintptr_t)ljp_tsl.t_nsnapmap))
    return -1;
  map = ld64(T + (uintptr_t)ljp_tsl.t_snapmap) + 4u * mapofs;
  ir = ld64(T + (uintptr_t)ljp_tsl.t_ir);
  nk = ld32(T + (uintptr_t)ljp_tsl.t_nk);
  pcbase = ld64(map + 4u * nent);
  b = (uint32_t)(pcbase & 0xff) + 2;
  pc = (uintptr_t)(pcbase >> 8);
  if (pc < 4096 || (pc & 3)) return -1;
  pc += 4;                        /* frame-link meaning: the line of pc */
  while (b > 2) {
    uint32_t fe = entry_at(map, nent, b - 2), le = entry_at(map, nent, b - 1);
    uint64_t fn, link;
    uint32_t nb;
    if (!fe || !le || !(le & SNAP_FRAME) ||
        !kvalue(ir, nk, fe & 0xffff, ljp_tsl.op_kgc, ljp_tsl.t_func, &fn) ||
        !kvalue(ir, nk, le & 0xffff, ljp_tsl.op_knum, -1, &link) ||
        fn < 4096 || fn >= ((uint64_t)1 << 47))
      return -1;
    /* Its PC lies in its own bytecode (+4: the frame-link meaning). */
    if (!ljp_ts_pc_in(ljp_fn_bc((uintptr_t)fn), pc)) return -1;
    if (!skip) {
      if (n == max) return -1;
      out[n].fn = (uintptr_t)fn;
      out[n].pc = pc;
      out[n].slot = (int32_t)b - 2;
      n++;
    }
    skip = 0;
    if ((link & 3) == 0) {        /* called from Lua: the return PC */
      uint32_t ins;
      if (link < 4096 || link >= ((uint64_t)1 << 47)) return -1;
      ins = ld32((uintptr_t)link - 4);
      nb = b - 2 - ((ins >> 8) & 0xff);
      pc = (uintptr_t)link;
    } else if ((link & 7) == 3) { /* vararg: its pseudo-frame below */
      uint64_t d = link & ~(uint64_t)7;
      if (!d || (d & 7) || d / 8 >= b) return -1;
      nb = b - (uint32_t)(d / 8);
      skip = 1;
    } else {
      return -1;                  /* continuation, pcall, C: not decoded */
    }
    if (nb >= b || nb < 2) return -1;
    b = nb;
  }
  if (skip) return -1;            /* a vararg frame's pseudo-frame missing */
  *basepc = pc;
  return n;
}

/* -- The bytecode a snapshot's code comes from (lines) ----------------------- */

/* Opcode kinds, learnt by name (vmnames.h; ljp_ts_learn_ops). */
#define BCK_CMP 1        /* ISLT ISGE ISLE ISGT */
#define BCK_EQ 2         /* ISEQV ISNEV ISEQS ISNES ISEQN ISNEN ISEQP ISNEP */
#define BCK_JMP 3
#define BCK_FORI 4       /* FORI JFORI: D jumps to the loop's exit */
#define BCK_FORL 5       /* FORL IFORL JFORL */
#define BCK_FUNC 6       /* a prototype's header: FUNCF FUNCV IFUNCF ... */
#define IRK_CMP 1        /* LT GE LE GT ULT UGE ULE UGT */
#define IRK_EQ 2         /* EQ NE */
#define IRT_GUARD 0x80   /* the IR type byte's guard flag */
static uint8_t bckind[256], irkind[256];
static int ops_ok;       /* (set once, after the tables: release) */

/* Each name of set found (bytecode: bc, else IR) given kind in out[];
** how many were found. */
static int kind_of(int bc, const char *const *set, uint8_t *out,
                   uint8_t kind)
{
  int n = 0;
  for (; *set; set++) {
    int op = bc ? ljp_vmnames_bc(*set) : ljp_vmnames_ir(*set);
    if (op >= 0) {
      out[op] = kind;
      n++;
    }
  }
  return n;
}

int ljp_ts_learn_ops(lua_State *S)
{
  static const char *const cmp[] = {"ISLT", "ISGE", "ISLE", "ISGT", NULL};
  static const char *const eq[] = {"ISEQV", "ISNEV", "ISEQS", "ISNES", "ISEQN",
                                   "ISNEN", "ISEQP", "ISNEP", NULL};
  static const char *const jmp[] = {"JMP", NULL};
  static const char *const fori[] = {"FORI", "JFORI", NULL};
  static const char *const forl[] = {"FORL", "IFORL", "JFORL", NULL};
  static const char *const func[] = {"FUNCF", "IFUNCF", "JFUNCF", "FUNCV",
                                     "IFUNCV", "JFUNCV", NULL};
  static const char *const ircmp[] = {"LT", "GE", "LE", "GT", "ULT", "UGE",
                                      "ULE", "UGT", NULL};
  static const char *const ireq[] = {"EQ", "NE", NULL};
  int ok;
  if (__atomic_load_n(&ops_ok, __ATOMIC_ACQUIRE)) return 1;
  if (!ljp_vmnames_learn(S)) return 0;
  memset(bckind, 0, sizeof(bckind));
  memset(irkind, 0, sizeof(irkind));
  ok = kind_of(1, cmp, bckind, BCK_CMP) == 4 &&
       kind_of(1, eq, bckind, BCK_EQ) == 8 &&
       kind_of(1, jmp, bckind, BCK_JMP) == 1 &&
       kind_of(1, fori, bckind, BCK_FORI) == 2 &&
       kind_of(1, forl, bckind, BCK_FORL) == 3 &&
       kind_of(1, func, bckind, BCK_FUNC) == 6 &&
       kind_of(0, ircmp, irkind, IRK_CMP) == 8 &&
       kind_of(0, ireq, irkind, IRK_EQ) == 2;
  if (ok) __atomic_store_n(&ops_ok, 1, __ATOMIC_RELEASE);
  return ok;
}

/* The kind of the first guard of snapshot sn's instructions (IRK_*), 0
** when it is no comparison or there is none before the next snapshot. */
static int first_guard(uintptr_t T, int sn)
{
  uintptr_t snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  uintptr_t ir = ld64(T + (uintptr_t)ljp_tsl.t_ir);
  int nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  uint32_t ref = ld16(snap + (uintptr_t)sn * SNAPSZ + 4), end;
  if (sn + 1 < nsnap) end = ld16(snap + (uintptr_t)(sn + 1) * SNAPSZ + 4);
  else if (ljp_tsl.t_nins >= 0) end = ld32(T + (uintptr_t)ljp_tsl.t_nins);
  else return 0;
  if (ref <= REF_BIAS || end < ref) return 0;
  if (end > ref + 64) end = ref + 64;    /* (bounded) */
  for (; ref < end; ref++) {
    uint16_t ot = ld16(ir + 8u * ref + 4);
    if (ot & IRT_GUARD) return irkind[ot >> 8];
  }
  return 0;
}

static inline int bcop(uintptr_t p) { return ld32(p) & 0xff; }
/* A jump's target: D (biased by 0x8000) instructions after the next one. */
static inline uintptr_t bcjump(uintptr_t p)
{
  return p + 4 + 4 * (uintptr_t)(intptr_t)((int32_t)(ld32(p) >> 16) - 0x8000);
}

uintptr_t ljp_ts_code_pc(uintptr_t T, int sn, uintptr_t bc, uintptr_t pc)
{
  uintptr_t npc = pc - 4, end, p, got = 0, at = 0;
  uint32_t nbc;
  int g, n = 0, lines = 1, ats = 1;
  if (!__atomic_load_n(&ops_ok, __ATOMIC_ACQUIRE) || !ljp_tsl.ok || !T ||
      sn <= 0 || sn >= ld16(T + (uintptr_t)ljp_tsl.t_nsnap) ||
      !ljp_ts_pc_in(bc, pc))
    return pc;
  nbc = ld32(bc - (uintptr_t)ljp_tml.pt_size + (uintptr_t)ljp_tsl.pt_sizebc);
  end = bc + 4u * (uintptr_t)nbc;
  /* A function's entry (LuaJIT's profiling mode): its body follows. */
  if (npc == bc) return bckind[bcop(bc)] == BCK_FUNC && nbc > 1 ? pc + 4 : pc;
  if (!(g = first_guard(T, sn))) return pc;
  /* A for loop's check holds the loop's other way: entering or going
  ** round, the exit (after the loop's FORL), whose code is the body's,
  ** after its FORI (that jumps to the exit); leaving, the body (after
  ** the FORI), whose code is the exit's. */
  if (g == IRK_CMP && bckind[bcop(npc - 4)] == BCK_FORL) {
    for (p = bc + 4; p + 4 < npc; p += 4)
      if (bckind[bcop(p)] == BCK_FORI && bcjump(p) == npc) return p + 8;
    return pc;
  }
  if (g == IRK_CMP && bckind[bcop(npc - 4)] == BCK_FORI) {
    p = bcjump(npc - 4);
    return p > bc && p < end ? p + 4 : pc;
  }
  /* A comparison, then its jump: npc is the target of the branch not
  ** taken, the fall-through or the jump's. Every such comparison of the
  ** prototype is a candidate (several may share a target: `a and b`); the
  ** other target of each is the taken branch. */
  for (p = bc + 4; p + 4 < end; p += 4) {
    int k = bckind[bcop(p)];
    uintptr_t t;
    if (!((k == BCK_CMP && g == IRK_CMP) || (k == BCK_EQ && g == IRK_EQ)) ||
        bckind[bcop(p + 4)] != BCK_JMP)
      continue;
    if (p + 8 == npc) t = bcjump(p + 4);
    else if (bcjump(p + 4) == npc) t = p + 8;
    else continue;
    if (t < bc + 4 || t >= end) continue;
    if (n++ == 0) {
      got = t;
      at = p;
    } else {
      lines &= ljp_luastack_line_pc(bc, t + 4) ==
               ljp_luastack_line_pc(bc, got + 4);
      ats &= ljp_luastack_line_pc(bc, p + 4) ==
             ljp_luastack_line_pc(bc, at + 4);
    }
  }
  if (!n) return pc;
  if (lines) return got + 4;           /* the taken branch */
  if (ats) return at + 4;              /* unsure which: the comparison */
  return pc;
}

/* -- Function-change checks (inline=exact) --------------------------------- */

int ljp_ts_op_prof = -1;

/* PROF's IR opcode, by its public name in jit.vmdef (vmnames.c), once
** per process. */
void ljp_ts_learn_prof_op(void)
{
  if (ljp_ts_op_prof < 0) ljp_ts_op_prof = ljp_vmnames_ir("PROF");
}

/* x64: test byte [r14 + d32], 0x80 (HOOK_PROFILE); jnz rel32 */
#define PROFSZ 14

int ljp_ts_profsites(uintptr_t T, uint16_t *out, int max)
{
  uintptr_t mc, ir, snap;
  uint32_t sz, i, ref, last, nir = 0;
  int32_t d = 0;
  int n = 0, nsnap;
  const unsigned char *p;
  if (!ljp_tsl.ok || ljp_ts_op_prof < 0 || !T) return -1;
  nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  ir = ld64(T + (uintptr_t)ljp_tsl.t_ir);
  mc = ld64(T + (uintptr_t)ljp_tml.t_mcode);
  sz = ld32(T + (uintptr_t)ljp_tml.t_szmcode);
  if (nsnap <= 0 || !snap || !ir || !mc || sz < PROFSZ || sz >= 0x10000)
    return -1;
  /* Every PROF is followed by a snapshot: those below the last one's. */
  last = ld16(snap + (uintptr_t)(nsnap - 1) * SNAPSZ + 4);
  if (last > REF_BIAS + 0x10000u) return -1;
  for (ref = REF_BIAS + 1; ref < last; ref++)
    if ((ld16(ir + 8u * ref + 4) >> 8) == (uint32_t)ljp_ts_op_prof) nir++;
  if (!nir) return 0;
  p = (const unsigned char *)mc;
  for (i = 0; i + PROFSZ <= sz; i++) {
    int32_t di;
    if (p[i] != 0x41 || p[i + 1] != 0xf6 || p[i + 2] != 0x86 ||
        p[i + 7] != 0x80 || p[i + 8] != 0x0f || p[i + 9] != 0x85)
      continue;
    memcpy(&di, p + i + 3, 4);
    if (n && di != d) return -1;
    d = di;
    if (n == max) return -1;
    out[n++] = (uint16_t)(i + PROFSZ);
    i += PROFSZ - 1;
  }
  return (uint32_t)n == nir ? n : -1;
}

static int is_ret(uint32_t op)
{
  int i;
  for (i = 0; i < 4; i++)
    if (op == ljp_tsl.op_ret[i]) return 1;
  return 0;
}

int ljp_ts_sample_frames(uintptr_t T, uintptr_t mpc, int mode, ljp_tsframe *out,
                   int max, uintptr_t *basepc, int *estimated,
                   const uint16_t *prof, int nprof, int *psn)
{
  ljp_tsframe nx[LJP_TS_MAX];
  uintptr_t npc, mc, snap;
  uint32_t lo, hi;
  int sn = ljp_ts_snapno(T, mpc), nsnap, na, nb, k, second;
  *estimated = 0;
  *psn = sn;
  if (sn < 0) return -1;
  /* A trace that links to another with a higher base ends with BASE and
  ** jit_base moved to the last snapshot's innermost frame, then the jump:
  ** a sample there reads the new base, while the last snapshot's frames
  ** are numbered from the old one (up-recursion showed frames that never
  ** existed). The last TAIL bytes are not decoded. */
  if (sn == ld16(T + (uintptr_t)ljp_tsl.t_nsnap) - 1 &&
      mpc - ld64(T + (uintptr_t)ljp_tml.t_mcode) + TAIL >=
          ld32(T + (uintptr_t)ljp_tml.t_szmcode))
    return -1;
  na = ljp_ts_frames(T, sn, out, max, basepc);
  if (na < 0) return na;
  if (mode == LJP_TS_EXACT) {
    /* The function-change checks in this snapshot's code: after the PC
    ** (before), before it (after). */
    int i, after = 0, before = 0;
    nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
    if (nprof >= 0 && sn + 1 < nsnap) {
      uint32_t ofs;
      snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
      mc = ld64(T + (uintptr_t)ljp_tml.t_mcode);
      ofs = (uint32_t)(mpc - mc);
      lo = ld16(snap + (uintptr_t)sn * SNAPSZ + 6);
      hi = ld16(snap + (uintptr_t)(sn + 1) * SNAPSZ + 6);
      for (i = 0; i < nprof; i++) {
        if (prof[i] < lo + PROFSZ || prof[i] > hi) continue;
        if (prof[i] <= ofs) after = 1;
        else before = 1;
      }
      /* A check between this snapshot's code and the PC whose own
      ** snapshot was merged into the next one, and no other check before
      ** that: the next one's frames (tracesnap.h), which are live after
      ** the code (no return to step over: the next one may lie at one). */
      if (after && !before) {
        nb = ljp_ts_frames(T, sn + 1, nx, LJP_TS_MAX, &npc);
        if (nb >= 0 && nb <= max) {
          memcpy(out, nx, (size_t)nb * sizeof(out[0]));
          *basepc = npc;
          *psn = sn + 1;
          return nb;
        }
      }
    }
    /* LuaJIT's profiling mode takes a snapshot at each return, before
    ** it: the code that follows runs in the caller. (Without the mode, a
    ** snapshot at a return is a guard's, and code of the callee may still
    ** follow it: measured worse there.) */
    if (na > 0 && is_ret(ld32(out[0].pc - 4) & 0xff)) {
      memmove(out, out + 1, (size_t)(na - 1) * sizeof(out[0]));
      na--;
      *psn = -1;                  /* (the caller's PC: its frame link) */
    }
    return na;
  }
  nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  nb = ljp_ts_frames(T, sn + 1 < nsnap ? sn + 1 : 0, nx, LJP_TS_MAX, &npc);
  if (nb < 0) {                   /* the next one unknown: only the base */
    *basepc = 0;
    return 0;
  }
  for (k = 0; k < na && k < nb && out[na - 1 - k].fn == nx[nb - 1 - k].fn &&
              out[na - 1 - k].slot == nx[nb - 1 - k].slot; k++) {}
  if (k == na && k == nb) return na;   /* both agree: certain */
  if (mode == LJP_TS_OWN) {
    *estimated = 1;
    return na;
  }
  if (mode == LJP_TS_CERTAIN) {
    memmove(out, out + (na - k), (size_t)k * sizeof(out[0]));
    return k;
  }
  /* They differ: the code between ran from this snapshot's frames to
  ** the next one's. Its first half is given this snapshot's frames, its
  ** second half the next one's: either stack existed there. */
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  mc = ld64(T + (uintptr_t)ljp_tml.t_mcode);
  lo = ld16(snap + (uintptr_t)sn * SNAPSZ + 6);
  hi = sn + 1 < nsnap ? ld16(snap + (uintptr_t)(sn + 1) * SNAPSZ + 6)
                      : ld32(T + (uintptr_t)ljp_tml.t_szmcode);
  second = mpc - mc >= lo + (hi - lo) / 2;
  *estimated = na != k || nb != k;
  if (second) {
    if (nb > max) return -1;
    memcpy(out, nx, (size_t)nb * sizeof(out[0]));
    *basepc = npc;
    *psn = sn + 1 < nsnap ? sn + 1 : 0;
    return nb;
  }
  return na;
}

/* -- Learning ------------------------------------------------------------- */

#define NTR 24      /* probe traces examined */
#define NSN 64      /* snapshots per probe trace examined */
#define NENT 64     /* entries per snapshot compared */
#define NIR 512     /* instructions per probe trace compared */
#define NKS 64      /* constants per probe trace compared */

typedef struct tsrec {
  int32_t tr;
  uintptr_t T;
  uint32_t nins, nk, nsnap, size;
  int nsn;
  struct {
    uint32_t ref, nslots, nent;
    uint32_t e[NENT];
  } sn[NSN];
  int nir;                        /* instructions 1..nir compared */
  uint16_t ot[NIR + 1];
  int nks;                        /* constants the snapshots reference */
  struct {
    uint32_t ref;
    int kind;                     /* 1 function, 2 number */
    uint64_t v;                   /* the function's address, the bits */
  } ks[NKS];
  unsigned char w[TWIN];
} tsrec;

static int fail(const char *why)
{
  snprintf(ljp_tsl.why, sizeof(ljp_tsl.why), "%s", why);
  return 0;
}

static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Loops whose inlined callees store into tables (so that snapshots are
** taken inside them), a vararg callee and a side trace; it returns
** jit.util, the probe's functions, their bytecode counts and four
** functions that return (rets). What jit.util tells of each trace is
** asked from C (tsread): in Lua, the tables it filled, their parse and
** C's reading of them cost 0.6 M instructions more a process
** (callgrind). */
static const char probe_chunk[] =
  "local jit = require('jit')\n"
  "if not (jit.status and jit.status()) then return nil end\n"
  "local ok, util = pcall(require, 'jit.util')\n"
  "if not ok or not util.tracesnap or not util.traceinfo then return nil end\n"
  "local function leaf(t, i) t[i] = i + 1; t.last = i; return i end\n"
  "local function mid(t, i) local v = leaf(t, i); t.mid = v; return v + 1 end\n"
  "local function va(t, ...) local a = ...; t.va = a; return a end\n"
  "local function run(n)\n"
  "  local t, s = {}, 0\n"
  "  for i = 1, n do\n"
  "    s = s + mid(t, i)\n"
  "    if i > 200 then s = s + va(t, i, 2) end\n"
  "  end\n"
  "  return s\n"
  "end\n"
  "local function run2(n)\n"
  "  local t, s = {}, 0\n"
  "  for i = 1, n do s = s + leaf(t, i % 13) + (i > 150 and mid(t, i) or 0) end\n"
  "  return s\n"
  "end\n"
  "local function run3(n)\n"
  "  local t, s = {x = 1}, 0\n"
  "  for i = 1, n do t.x = t.x + i; s = s + va(t, i) end\n"
  "  return s\n"
  "end\n"
  /* run2's loop and its side traces are made by i = 161 (hotloop 56,
  ** hotexit 10 from i = 151); 300 turns made more side traces of side
  ** traces of the same code: 11-15 traces in all, 7-9 now, and 0.4 M
  ** instructions more (callgrind) */
  "run(300) run2(170) run3(300)\n"
  "-- No trace is made, or freed with a prototype the GC takes, while they\n"
  "-- are read (the collector is left stopped: the state is closed after).\n"
  "jit.off()\n"
  "collectgarbage('stop')\n"
  "local fns = {leaf, mid, va, run, run2, run3}\n"
  "local rets = {function() end, function(x) return x end,\n"
  "              function(a, b) return a, b end, function(...) return ... end}\n"
  "local nbc = {}\n"
  "for i, f in ipairs(fns) do nbc[i] = util.funcinfo(f).bytecodes end\n"
  "return util, fns, nbc, rets\n";

#define ONE_OFFSET(var, step, cond) \
  LJP_ONE_OFFSET(var, step, TWIN, tsrec, cond)

/* Does the snapshot array at p hold what tracesnap said of r? */
static int snaps_match(const tsrec *r, uintptr_t p)
{
  unsigned char buf[NSN * SNAPSZ];
  int i, prev = -1;
  if (!p || (p & 3) || p >= ((uint64_t)1 << 47) ||
      ljp_peek(buf, p, (size_t)r->nsn * SNAPSZ))
    return 0;
  for (i = 0; i < r->nsn; i++) {
    const unsigned char *s = buf + i * SNAPSZ;
    int mc = rd16(s + 6);
    if (rd16(s + 4) != r->sn[i].ref || s[8] != r->sn[i].nslots ||
        s[10] != r->sn[i].nent)
      return 0;
    /* Machine code offsets: 0 for the first, rising, inside the code. */
    if ((i == 0 && mc != 0) || mc < prev || (uint32_t)mc >= r->size) return 0;
    prev = mc;
  }
  return 1;
}

/* Does the map at p hold each snapshot's entries at its offset (and the
** snapshot array at sp the offsets)? */
static int map_match(const tsrec *r, uintptr_t sp, uintptr_t p)
{
  unsigned char buf[NSN * SNAPSZ];
  int i;
  uint32_t k;
  if (!p || (p & 3) || p >= ((uint64_t)1 << 47) ||
      ljp_peek(buf, sp, (size_t)r->nsn * SNAPSZ))
    return 0;
  for (i = 0; i < r->nsn; i++) {
    uint32_t mapofs = rd32(buf + i * SNAPSZ), e[NENT];
    uint32_t n = r->sn[i].nent < NENT ? r->sn[i].nent : NENT;
    if (n && ljp_peek(e, p + 4u * mapofs, 4u * n)) return 0;
    for (k = 0; k < n; k++)
      if (e[k] != r->sn[i].e[k]) return 0;
  }
  return 1;
}

/* jit.util's function at stack index f called with (tr[, a]), nres
** results pushed; nonzero when it raised (nothing pushed). */
static int ucall(lua_State *S, int f, int tr, int a, int narg, int nres)
{
  lua_pushvalue(S, f);
  lua_pushinteger(S, tr);
  if (narg > 1) lua_pushinteger(S, a);
  if (lua_pcall(S, narg, nres, 0) == 0) return 0;
  lua_pop(S, 1);
  return 1;
}

/* What jit.util tells of trace r->tr (r->nsnap, nins, nk set), with its
** traceinfo, tracesnap, traceir and tracek at u..u+3: each snapshot's
** reference, slot count and entries (the first NSN; *whole when each was
** read), the opcode and type of instructions 1..NIR, and the first NKS
** constants the snapshots reference (all snapshots' entries in order, each
** once) with their values. Nonzero when jit.util raised. */
static int tsread(lua_State *S, int u, tsrec *r, int *whole, int *nsnaps)
{
  static uint8_t seen[REF_BIAS / 8];    /* (the probe is serialised) */
  int top = lua_gettop(S), sn, nsn;
  uint32_t k, len;
  r->nsn = r->nsnap < NSN ? (int)r->nsnap : NSN;
  nsn = r->nsn;
  *whole = 1;
  memset(seen, 0, sizeof(seen));
  /* Past the first NSN snapshots, only while constants are wanted. */
  for (sn = 0; (uint32_t)sn < r->nsnap && (sn < nsn || r->nks < NKS); sn++) {
    if (ucall(S, u + 1, r->tr, sn, 2, 1)) return 1;
    if (!lua_istable(S, -1)) {
      lua_settop(S, top);
      if (sn < nsn) *whole = 0;
      break;
    }
    len = (uint32_t)lua_objlen(S, -1);         /* entries, then SNAP(255) */
    if (sn < nsn) {
      lua_rawgeti(S, -1, 0);
      r->sn[sn].ref = (uint32_t)lua_tointeger(S, -1) + REF_BIAS;
      lua_rawgeti(S, -2, 1);
      r->sn[sn].nslots = (uint32_t)lua_tointeger(S, -1);
      lua_pop(S, 2);
      r->sn[sn].nent = len >= 2 ? len - 2 : 0;
      (*nsnaps)++;
    }
    for (k = 2; k < len && (k - 2 < NENT || r->nks < NKS); k++) {
      uint32_t e, ref;
      lua_rawgeti(S, -1, (int)k);
      e = (uint32_t)lua_tointeger(S, -1);
      lua_pop(S, 1);
      if (sn < nsn && k - 2 < NENT) r->sn[sn].e[k - 2] = e;
      ref = e & 0xffff;
      if (ref >= REF_BIAS || r->nks >= NKS ||
          (seen[ref >> 3] & (1u << (ref & 7))))
        continue;
      seen[ref >> 3] |= (uint8_t)(1u << (ref & 7));
      if (ucall(S, u + 3, r->tr, (int)ref - (int)REF_BIAS, 2, 2)) return 1;
      r->ks[r->nks].ref = ref;
      r->ks[r->nks].kind = 0;
      if (lua_isfunction(S, -2)) {
        r->ks[r->nks].kind = 1;
        r->ks[r->nks].v = (uint64_t)(uintptr_t)lua_topointer(S, -2);
      } else if (lua_type(S, -2) == LUA_TNUMBER) {
        double d = lua_tonumber(S, -2);
        r->ks[r->nks].kind = 2;
        memcpy(&r->ks[r->nks].v, &d, 8);
      }
      r->nks++;
      lua_pop(S, 2);
    }
    lua_settop(S, top);
  }
  for (r->nir = 0; r->nir < NIR && (uint32_t)r->nir < r->nins; r->nir++) {
    if (ucall(S, u + 2, r->tr, r->nir + 1, 2, 2)) return 1;
    r->ot[r->nir + 1] = (uint16_t)lua_tointeger(S, -1);
    lua_settop(S, top);
  }
  return 0;
}

int ljp_tracesnap_probe(lua_State *S)
{
  static tsrec rec[NTR];
  uintptr_t g;
  int top = lua_gettop(S), nrec = 0, i, j, res, fns, ok = 0, nsnaps = 0;
  ptrdiff_t o, sp_off = -1, map_off = -1, ir_off = -1;
  int kgc = -1, knum = -1, tfunc = -1;
  if (ljp_tsl.tried) return ljp_tsl.ok;
  ljp_tsl.tried = 1;
  if (!ljp_tml.ok) return fail("trace layout unknown");
  if (!(g = ljp_vm_global(S))) return fail("global state unknown");
  if (luaL_loadbuffer(S, probe_chunk, sizeof(probe_chunk) - 1,
                      "=ljprof-snapshot-probe") != 0 ||
      lua_pcall(S, 0, 4, 0) != 0 || !lua_istable(S, -4)) {
    lua_settop(S, top);
    return fail("no JIT, or no jit.util.tracesnap");
  }
  res = lua_gettop(S) - 3;
  fns = res + 1;
  /* A prototype's bytecode count: the one uint32 of its header that holds
  ** each probe function's. */
  {
    ptrdiff_t c, found = -1;
    int nc = 0, m;
    for (c = 0; c + 4 <= ljp_tml.pt_size; c += 4) {
      for (m = 1; m <= 4; m++) {
        uint32_t v;
        lua_rawgeti(S, fns, m);
        lua_rawgeti(S, fns + 1, m);
        if (ljp_peek(&v, ljp_fn_bc((uintptr_t)lua_topointer(S, -2)) -
                             (uintptr_t)ljp_tml.pt_size + (uintptr_t)c, 4) ||
            v != (uint32_t)lua_tointeger(S, -1)) {
          lua_pop(S, 2);
          break;
        }
        lua_pop(S, 2);
      }
      if (m > 4) { nc++; found = c; }
    }
    if (nc != 1) {
      lua_settop(S, top);
      return fail("no single bytecode count in a prototype");
    }
    ljp_tsl.pt_sizebc = found;
    /* The return opcodes: the last instruction of each of four functions
    ** (return nothing, one value, two, and the varargs). */
    for (m = 1; m <= 4; m++) {
      uintptr_t bc;
      uint32_t nbc, ins;
      lua_rawgeti(S, fns + 2, m);
      bc = ljp_fn_bc((uintptr_t)lua_topointer(S, -1));
      lua_pop(S, 1);
      if (!bc || ljp_peek(&nbc, bc - (uintptr_t)ljp_tml.pt_size +
                                    (uintptr_t)found, 4) ||
          nbc < 2 || nbc > 64 || ljp_peek(&ins, bc + 4u * (nbc - 1), 4)) {
        lua_settop(S, top);
        return fail("no return instruction read");
      }
      ljp_tsl.op_ret[m - 1] = (uint8_t)(ins & 0xff);
    }
    for (m = 0; m < 4; m++) {
      int k2;
      for (k2 = m + 1; k2 < 4; k2++)
        if (ljp_tsl.op_ret[m] == ljp_tsl.op_ret[k2]) {
          lua_settop(S, top);
          return fail("return opcodes not distinct");
        }
    }
  }
  /* The traces (at most NTR with snapshots, the first after trace 1 that
  ** follows 64 missing ones ends the search), each read from jit.util:
  ** no Lua runs between (no trace is made) and the collector is stopped
  ** (none is freed). */
  {
    int u = lua_gettop(S) + 1, tr, miss = 0, rows = 0;
    static const char *const fn[] = {"traceinfo", "tracesnap", "traceir",
                                     "tracek"};
    for (i = 0; i < 4; i++) {
      lua_getfield(S, res, fn[i]);
      if (!lua_isfunction(S, -1)) {
        lua_settop(S, top);
        return fail("no JIT, or no jit.util.tracesnap");
      }
    }
    for (tr = 1; tr <= 4096 && rows < NTR; tr++) {
      tsrec *r = &rec[nrec];
      int row = lua_gettop(S) + 1, err, whole;
      if (ucall(S, u, tr, 0, 1, 1)) goto uerr;
      if (!lua_istable(S, row)) {
        lua_settop(S, row - 1);
        if (++miss > 64) break;
        continue;
      }
      miss = 0;
      lua_getfield(S, row, "nexit");
      r->nsnap = (uint32_t)lua_tointeger(S, -1);
      lua_settop(S, row);
      if (r->nsnap == 0) { lua_settop(S, row - 1); continue; }
      rows++;
      r->tr = tr;
      lua_getfield(S, row, "nins");  r->nins = (uint32_t)lua_tointeger(S, -1);
      lua_getfield(S, row, "nk");    r->nk = (uint32_t)lua_tointeger(S, -1);
      lua_settop(S, row);
      r->nir = r->nks = 0;
      r->size = 0;
      err = tsread(S, u, r, &whole, &nsnaps);
      lua_settop(S, row - 1);
      if (err) goto uerr;
      r->T = ljp_vm_trace(g, r->tr);
      {
        ljp_tmtrace t;
        if (r->T && ljp_tm_read(g, r->tr, &t)) r->size = t.size;
      }
      if (whole && r->T && r->size && !ljp_peek(r->w, r->T, TWIN))
        nrec++;
    }
    lua_settop(S, u - 1);
  }
  if (0) {
  uerr:
    lua_settop(S, top);
    return fail("jit.util raised reading a probe trace");
  }
  if (nrec < 3) { lua_settop(S, top); return fail("too few probe traces"); }
  /* Counts: snapshots, instructions, constants. */
  ONE_OFFSET(ljp_tsl.t_nsnap, 2, rd16(r->w + o) == r->nsnap);
  ONE_OFFSET(ljp_tsl.t_nk, 4, rd32(r->w + o) == REF_BIAS - r->nk);
  /* The instruction count (traceinfo's nins is T->nins - REF_BIAS - 1):
  ** optional, for mcmap.c only (-1 when not found once). */
  ONE_OFFSET(ljp_tsl.t_nins, 4, rd32(r->w + o) == REF_BIAS + 1 + r->nins);
  if (ljp_tsl.t_nsnap < 0 || ljp_tsl.t_nk < 0) {
    lua_settop(S, top);
    return fail("snapshot or constant count not found once");
  }
  /* The snapshot array, then the map, the map's size and the IR. */
  for (o = 0; o + 8 <= TWIN; o += 8) {
    for (i = 0; i < nrec && snaps_match(&rec[i], rd64(rec[i].w + o)); i++) {}
    if (i == nrec) {
      if (sp_off >= 0) { sp_off = -2; break; }
      sp_off = o;
    }
  }
  if (sp_off < 0) { lua_settop(S, top); return fail("no single snapshot array"); }
  for (o = 0; o + 8 <= TWIN; o += 8) {
    if (o == sp_off) continue;
    for (i = 0; i < nrec && map_match(&rec[i], rd64(rec[i].w + sp_off),
                                      rd64(rec[i].w + o)); i++) {}
    if (i == nrec) {
      if (map_off >= 0) { map_off = -2; break; }
      map_off = o;
    }
  }
  if (map_off < 0) { lua_settop(S, top); return fail("no single snapshot map"); }
  /* The map's size: at least the last snapshot's end, the one such field. */
  ONE_OFFSET(ljp_tsl.t_nsnapmap, 4, o != ljp_tsl.t_nk && ({
    uint32_t last = 0;
    int ok_ = r->nsn == (int)r->nsnap &&
              !ljp_peek(&last, rd64(r->w + sp_off) +
                        (uintptr_t)(r->nsn - 1) * SNAPSZ, 4);
    ok_ && rd32(r->w + o) == last + r->sn[r->nsn - 1].nent + 2; }));
  if (ljp_tsl.t_nsnapmap < 0) {
    lua_settop(S, top);
    return fail("snapshot map size not found once");
  }
  for (o = 0; o + 8 <= TWIN && ir_off != -2; o += 8) {
    if (o == sp_off || o == map_off) continue;
    for (i = 0; i < nrec; i++) {
      static unsigned char irs[8 * NIR];     /* (the probe is serialised) */
      uintptr_t ir = rd64(rec[i].w + o);
      int ref;
      /* a biased pointer: 8-aligned, its instructions in user space */
      if (!ir || (ir & 7) || rec[i].nir < 1 ||
          ir + 8u * (REF_BIAS + 1) >= ((uint64_t)1 << 47) ||
          ljp_peek(irs, ir + 8u * (REF_BIAS + 1), 8u * (uint32_t)rec[i].nir))
        break;
      for (ref = 1; ref <= rec[i].nir && rd16(irs + 8 * (ref - 1) + 4) ==
                                             rec[i].ot[ref]; ref++) {}
      if (ref <= rec[i].nir) break;
    }
    if (i == nrec) ir_off = ir_off >= 0 ? -2 : o;
  }
  if (ir_off < 0) { lua_settop(S, top); return fail("no single IR array"); }
  /* The opcodes of function and number constants, from the constants the
  ** snapshots reference (a number matches only when its bits do: frame
  ** links are stored as numbers). */
  for (i = 0; i < nrec; i++) {
    uintptr_t ir = rd64(rec[i].w + ir_off);
    int k;
    for (k = 0; k < rec[i].nks; k++) {
      uint32_t ref = rec[i].ks[k].ref;
      uint16_t ot;
      uint64_t v;
      if (ljp_peek(&ot, ir + 8u * ref + 4, 2) ||
          ljp_peek(&v, ir + 8u * (ref + 1), 8)) {
        lua_settop(S, top);
        return fail("a constant unreadable");
      }
      if (rec[i].ks[k].kind == 1) {
        if (rec[i].ks[k].v != v ||
            (kgc >= 0 && (kgc != (ot >> 8) || tfunc != (ot & 0x1f)))) {
          lua_settop(S, top);
          return fail("function constants disagree");
        }
        kgc = ot >> 8;
        tfunc = ot & 0x1f;
      } else if (rec[i].ks[k].kind == 2 && rec[i].ks[k].v == v) {
        if (knum >= 0 && knum != (ot >> 8)) {
          lua_settop(S, top);
          return fail("number constants disagree");
        }
        knum = ot >> 8;
      }
    }
  }
  if (kgc < 0 || knum < 0 || kgc == knum) {
    lua_settop(S, top);
    return fail("constant opcodes not learnt");
  }
  ljp_tsl.t_snap = sp_off;
  ljp_tsl.t_snapmap = map_off;
  ljp_tsl.t_ir = ir_off;
  ljp_tsl.op_kgc = (uint8_t)kgc;
  ljp_tsl.op_knum = (uint8_t)knum;
  ljp_tsl.t_func = (uint8_t)tfunc;
  /* Replay: every snapshot decodes whole or not at all, the functions it
  ** names are the probe's, and at least one shows an inlined frame. */
  proving = 1;
  {
    int inl = 0;
    for (i = 0; i < nrec && ok >= 0; i++) {
      for (j = 0; j < rec[i].nsn; j++) {
        ljp_tsframe f[LJP_TS_MAX];
        uintptr_t bpc;
        int n = ljp_ts_frames(rec[i].T, j, f, LJP_TS_MAX, &bpc), k, m;
        uintptr_t mc = ld64(rec[i].T + (uintptr_t)ljp_tml.t_mcode);
        uint16_t mo = ld16(ld64(rec[i].T + (uintptr_t)ljp_tsl.t_snap) +
                           (uintptr_t)j * SNAPSZ + 6);
        int sn = ljp_ts_snapno(rec[i].T, mc + mo);
        /* The snapshot found for its own first byte is it or a later one
        ** with no code of its own before it. */
        if (sn < j) { ok = -1; break; }
        for (k = 0; k < n; k++) {
          for (m = 1; m <= 6; m++) {
            lua_rawgeti(S, fns, m);
            if ((uintptr_t)lua_topointer(S, -1) == f[k].fn) {
              lua_pop(S, 1);
              break;
            }
            lua_pop(S, 1);
          }
          if (m > 6) { ok = -1; break; }
        }
        if (n > 0) inl++;
      }
    }
    proving = 0;
    if (ok < 0 || !inl) {
      lua_settop(S, top);
      return fail(ok < 0 ? "a snapshot decoded to another function"
                         : "no snapshot showed an inlined frame");
    }
  }
  ljp_tsl.traces = nrec;
  ljp_tsl.snaps = nsnaps;
  lua_settop(S, top);
  __atomic_store_n(&ljp_tsl.ok, 1, __ATOMIC_RELEASE);  /* the offsets first */
  return 1;
}
