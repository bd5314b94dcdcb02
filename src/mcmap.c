/*
** Trace machine code mapped back to IR instructions (vm.h's ljp_mcmap_*;
** mcmap.h).
**
** LuaJIT's assembler (lj_asm.c) emits a trace's code backwards, one IR
** instruction at a time from the last to the first, so in the final code
** each instruction's code follows the previous one's; the spills, reloads
** and moves an instruction needs are emitted with it, fused loads and dead
** instructions have no code, the loop's PHI moves and branch and the link
** to the next trace come last (the tail), the stack and GC checks and a
** side trace's entry first (the head). Snapshot k's code,
** [mcofs[k], mcofs[k+1]), is exactly the code of its IR instructions
** [snap[k].ref, snap[k+1].ref) (asm_snap_prev records mcofs when the
** backwards walk crosses snap[k].ref): hard boundaries. (Offsets past
** the code's end, of snapshots whose code the tail fixup removed, are
** clamped to it.)
**
** Inside each snapshot's span, the decoded instructions (x64dec.c) are
** aligned to the span's IR instructions by a dynamic program over the
** anchors only (calls with the lea/mov of their target, jcc to outside
** the trace = guards, two in a row to one exit being one guard's, scalar
** float ops, integer arithmetic and compares): each anchor is given one
** IR instruction, in IR order, scored by how well the IR opcode explains
** it. A call only by an opcode that can call, and when its target is
** known (call rel32, mov imm64, lea [r14 + d] with DISPATCH found per
** trace: the value that lands the most such calls on functions with
** calls left to give, resolve_calls) only by the CALL* of that
** function's id (jit.util.ircalladdr) or the helper opcode(s) that call
** it; the GC check (lj_gc_step_jit) by
** the head or LOOP when the section after them allocates. A guard only by
** an instruction with the guard flag, and only when it exits through the
** span's own snapshot (read from the exit stub it jumps to); another
** exit is the head's (a side trace's stack check exits through its
** parent's exit) or the tail's. A float op of the same kind scores, one
** of another kind costs; integer ops score a little where compatible; a
** second guard, call or float op of one kind on one instruction costs
** (spread over the compatible ones). A call opcode takes at most one
** call, and every call opcode of the span must get one: else the span's
** anchors are not trusted and its bytes get the span's whole ref range.
** Instructions between two matched anchors get the range of refs between
** them (exact when both are of the same IR instruction). An instruction
** with no code of its own has no position: sunk allocations and stores
** (r RID_SINK/RID_SUNK; no GC step either) and CALLN/CALLL the
** assembler's DCE dropped (no register, no spill slot).
**
** IR opcodes and call functions are known by name (vmnames.c: jit.vmdef's
** irnames and ircall) and the calls' addresses from jit.util (never
** numbered here); the guard flag is IRT_GUARD (0x80) of
** the IR type byte. A trace's map is built once (normal context, the
** trace alive: plain reads of its code, snapshots, IR and the exit stubs
** its guards jump to, each bounded by counts read from the same trace),
** cached by (T, mcode, szmcode, nsnap, nins) in 128 slots, freed with the
** cache (ljp_mcmap_clear: the caller's, at a flush). Work is bounded: at
** most 64 KB of code, 2^18 DP cells per span (8 bytes each: a back
** pointer per state and the row's running best; scores in two rows)
** and 2^22 per trace (spans beyond are not aligned: their range only).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "mcmap.h"
#include "tracemem.h"
#include "tracesnap.h"
#include "vm.h"
#include "vmnames.h"
#include "x64dec.h"

#define REF_BIAS 0x8000u
#define SNAPSZ 12
#define IRT_GUARD 0x80
#define SPAN_CELLS (1u << 18)
#define TRACE_CELLS (1u << 22)
#define NEG (-1000000000)

/* Anchor kinds (bits), and what each IR opcode can emit. */
enum {
  AK_CALL = 1 << 0, AK_GUARD = 1 << 1, AK_FADD = 1 << 2, AK_FSUB = 1 << 3,
  AK_FMUL = 1 << 4, AK_FDIV = 1 << 5, AK_FSQRT = 1 << 6, AK_FMINMAX = 1 << 7,
  AK_FCVT = 1 << 8, AK_FCMP = 1 << 9, AK_FROUND = 1 << 10,
  AK_IARITH = 1 << 11, AK_ICMP = 1 << 12
};
#define AK_FLOAT (AK_FADD | AK_FSUB | AK_FMUL | AK_FDIV | AK_FSQRT | \
                  AK_FMINMAX | AK_FCVT | AK_FCMP | AK_FROUND)
#define OPF_MUSTCALL (1u << 31) /* in op_mask: a call opcode (one call) */
#define OPF_PSEUDO (1u << 30)   /* head or tail */
#define OPF_ALLOC (1u << 29)    /* counts a GC step (as->gcsteps++) */
#define OPF_LOOP (1u << 28)     /* LOOP */
#define OPF_GCSTEP (1u << 27)   /* GCSTEP */
#define OPF_PURE (1u << 26)     /* a call without side effects: dropped by
                                   the assembler's DCE when unused */

static const struct { const char *name; uint32_t mask; } opnames[] = {
  {"LT", AK_FCMP | AK_ICMP}, {"GE", AK_FCMP | AK_ICMP},
  {"LE", AK_FCMP | AK_ICMP}, {"GT", AK_FCMP | AK_ICMP},
  {"ULT", AK_FCMP | AK_ICMP}, {"UGE", AK_FCMP | AK_ICMP},
  {"ULE", AK_FCMP | AK_ICMP}, {"UGT", AK_FCMP | AK_ICMP},
  {"EQ", AK_FCMP | AK_ICMP}, {"NE", AK_FCMP | AK_ICMP},
  {"ABC", AK_ICMP}, {"RETF", AK_ICMP | AK_IARITH},
  {"GCSTEP", AK_CALL | AK_ICMP | AK_GUARD | AK_IARITH | OPF_GCSTEP},
  {"LOOP", OPF_LOOP}, {"HIOP", AK_IARITH | AK_ICMP},
  {"PROF", AK_ICMP},
  {"BNOT", AK_IARITH}, {"BSWAP", AK_IARITH}, {"BAND", AK_IARITH},
  {"BOR", AK_IARITH}, {"BXOR", AK_IARITH}, {"BSHL", AK_IARITH},
  {"BSHR", AK_IARITH}, {"BSAR", AK_IARITH}, {"BROL", AK_IARITH},
  {"BROR", AK_IARITH},
  {"ADD", AK_FADD | AK_IARITH}, {"SUB", AK_FSUB | AK_IARITH},
  {"MUL", AK_FMUL | AK_IARITH}, {"DIV", AK_FDIV | AK_IARITH | AK_CALL},
  {"MOD", AK_CALL | AK_IARITH | AK_FDIV | AK_FMUL | AK_FSUB | AK_FROUND},
  {"POW", AK_CALL | AK_FMUL | AK_FDIV}, {"NEG", AK_IARITH},
  {"ABS", 0}, {"ATAN2", AK_CALL}, {"LDEXP", AK_CALL | AK_FCVT},
  {"MIN", AK_FMINMAX | AK_IARITH | AK_ICMP},
  {"MAX", AK_FMINMAX | AK_IARITH | AK_ICMP},
  {"FPMATH", AK_CALL | AK_FSQRT | AK_FROUND | AK_FADD | AK_FSUB | AK_FMUL |
             AK_FCMP},
  {"ADDOV", AK_IARITH}, {"SUBOV", AK_IARITH}, {"MULOV", AK_IARITH},
  {"AREF", AK_IARITH}, {"HREFK", AK_ICMP | AK_IARITH},
  {"HREF", AK_ICMP | AK_IARITH | AK_CALL}, {"NEWREF", AK_CALL},
  {"UREFO", AK_ICMP | AK_IARITH}, {"UREFC", AK_ICMP | AK_IARITH},
  {"FREF", AK_IARITH}, {"TMPREF", AK_CALL}, {"STRREF", AK_IARITH},
  {"ALOAD", AK_ICMP | AK_IARITH | AK_FCMP}, {"HLOAD", AK_ICMP | AK_IARITH},
  {"ULOAD", AK_ICMP | AK_IARITH}, {"FLOAD", AK_ICMP | AK_IARITH},
  {"XLOAD", AK_ICMP | AK_IARITH | AK_FCVT},
  {"SLOAD", AK_ICMP | AK_IARITH | AK_FCVT | AK_FCMP},
  {"VLOAD", AK_ICMP | AK_IARITH}, {"ALEN", AK_CALL | AK_ICMP},
  {"XSTORE", AK_FCVT}, {"TBAR", AK_ICMP | AK_IARITH},
  {"OBAR", AK_CALL | AK_ICMP},
  {"SNEW", AK_CALL | OPF_ALLOC}, {"XSNEW", AK_CALL},
  {"TNEW", AK_CALL | OPF_ALLOC}, {"TDUP", AK_CALL | OPF_ALLOC},
  {"CNEW", AK_CALL | OPF_ALLOC}, {"CNEWI", AK_CALL | OPF_ALLOC},
  {"BUFHDR", AK_IARITH}, {"BUFPUT", AK_CALL},
  {"BUFSTR", AK_CALL | OPF_ALLOC},
  {"TOBIT", AK_FADD}, {"TOSTR", AK_CALL | OPF_ALLOC},
  {"STRTO", AK_CALL | AK_FCVT | AK_FCMP},
  {"CONV", AK_FCVT | AK_FCMP | AK_IARITH | AK_CALL | AK_FADD | AK_FSUB},
  {"CALLN", AK_CALL | OPF_MUSTCALL | OPF_PURE},
  {"CALLA", AK_CALL | OPF_MUSTCALL | OPF_ALLOC},
  {"CALLL", AK_CALL | OPF_MUSTCALL | OPF_PURE}, {"CALLS", AK_CALL | OPF_MUSTCALL},
  {"CALLXS", AK_CALL | OPF_MUSTCALL},
  {NULL, 0}
};

static uint32_t op_mask[256];
static volatile int learnt;       /* 1 known, -1 failed */

/* The functions IR calls (lj_ir_callinfo, by id: jit.util.ircalladdr and
** jit.vmdef.ircall), and which helper opcode calls each (by name: the
** IRCALL a helper's assembly uses, lj_asm.c/lj_asm_x86.h); a call whose
** target is one of them can only be that CALL* instruction's (op2, the
** id) or that helper's. */
#define NCALL 512
#define HELPER_GC 0xff          /* the GC check (head, LOOP, GCSTEP) */
static uint64_t call_addr[NCALL];
static uint16_t call_helper[NCALL];   /* opcode + 1, HELPER_GC + 1, or 0 */
static uint16_t call_helper2[NCALL];  /* a second opcode + 1, or 0 */
static uint16_t call_sorted[NCALL];   /* ids by address */
static int ncall;

static const struct { const char *call, *op; } helpers[] = {
  {"lj_buf_tostr", "BUFSTR"}, {"lj_buf_putstr", "BUFPUT"},
  {"lj_buf_putchar", "BUFPUT"}, {"lj_strfmt_putint", "BUFPUT"},
  {"lj_strfmt_putnum", "BUFPUT"}, {"lj_strfmt_int", "TOSTR"},
  {"lj_strfmt_num", "TOSTR"}, {"lj_strfmt_char", "TOSTR"},
  {"lj_strfmt_obj", "TOSTR"}, {"lj_str_new", "SNEW"},
  {"lj_tab_new1", "TNEW"}, {"lj_tab_new_ah", "TNEW"}, {"lj_tab_dup", "TDUP"},
  {"lj_tab_newkey", "NEWREF"}, {"lj_tab_len", "ALEN"},
  {"lj_tab_len_hint", "ALEN"}, {"lj_buf_putmem", "BUFPUT"},
  {"log", "FPMATH"}, {"lj_vm_log2", "FPMATH"},
  {"lj_strscan_num", "STRTO"}, {"lj_gc_barrieruv", "OBAR"},
  {"lj_mem_newgco", "CNEW"}, {"lj_mem_newgco", "CNEWI"},
  {"lj_cdata_newv", "CNEW"}, {"lj_str_new", "XSNEW"},
  {"lj_vm_modi", "MOD"}, {"pow", "POW"}, {"lj_vm_floor", "FPMATH"},
  {"lj_vm_ceil", "FPMATH"}, {"lj_vm_trunc", "FPMATH"},
  {"lj_carith_divi64", "DIV"}, {"lj_carith_divu64", "DIV"},
  {"lj_carith_modi64", "MOD"}, {"lj_carith_modu64", "MOD"},
  {"lj_carith_powi64", "POW"}, {"lj_carith_powu64", "POW"}, {NULL, NULL}
};

/* FNV-1a: the helpers' names are told from the calls' by it first. */
static uint32_t name_hash(const char *s)
{
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

int ljp_mcmap_learn(lua_State *S)
{
  int top = lua_gettop(S), i, n = 0, calls = 0, nc, nh;
  uint32_t mask[256], hh[sizeof(helpers) / sizeof(helpers[0])];
  if (learnt) return learnt > 0;
  memset(mask, 0, sizeof(mask));
  if (!ljp_vmnames_learn(S)) {
    learnt = -1;
    return 0;
  }
  for (i = 0; opnames[i].name; i++) {
    int op = ljp_vmnames_ir(opnames[i].name);
    if (op < 0) continue;
    mask[op] = opnames[i].mask;
    n++;
    if (mask[op] & OPF_MUSTCALL) calls++;
  }
  /* The call table (optional: without it calls match by opcode only):
  ** the IR call functions' addresses from jit.util.ircalladdr, called from
  ** here (a chunk's parse and run cost 0.1 M instructions, callgrind). */
  ljp_vmnames_learn_calls(S);
  ljp_push_jitfn(S, "jit.util", "ircalladdr");
  for (nh = 0; helpers[nh].call; nh++) hh[nh] = name_hash(helpers[nh].call);
  for (nc = 0; nc < NCALL && lua_isfunction(S, top + 1); nc++) {
    const char *cn = ljp_vmnames_call(nc);
    uint32_t hc;
    int h;
    lua_pushvalue(S, top + 1);
    lua_pushinteger(S, nc);
    if (lua_pcall(S, 1, 1, 0) != 0 || !lua_isnumber(S, -1) || !cn) {
      lua_pop(S, 1);
      break;
    }
    call_addr[nc] = (uint64_t)lua_tonumber(S, -1);
    call_helper[nc] = call_helper2[nc] = 0;
    if (!strcmp(cn, "lj_gc_step_jit")) call_helper[nc] = HELPER_GC + 1;
    hc = name_hash(cn);
    for (h = 0; h < nh; h++)
      if (hh[h] == hc && !strcmp(cn, helpers[h].call)) {
        int op = ljp_vmnames_ir(helpers[h].op);
        if (op < 0) continue;
        if (!call_helper[nc]) call_helper[nc] = (uint16_t)(op + 1);
        else call_helper2[nc] = (uint16_t)(op + 1);
      }
    lua_pop(S, 1);
  }
  lua_settop(S, top);
  /* The core opcodes every LuaJIT 2.1 has must all be found. */
  if (n < 60 || calls < 4) { learnt = -1; return 0; }
  /* ids by address (insertion sort: ~100 entries, once) */
  for (i = 0; i < nc; i++) {
    int j = i;
    while (j > 0 && call_addr[call_sorted[j - 1]] > call_addr[i]) {
      call_sorted[j] = call_sorted[j - 1];
      j--;
    }
    call_sorted[j] = (uint16_t)i;
  }
  ncall = nc;
  memcpy(op_mask, mask, sizeof(mask));
  __atomic_store_n(&learnt, 1, __ATOMIC_RELEASE);
  return 1;
}

/* The id of the IR call function at address a, or -1. */
static int call_id(uint64_t a)
{
  int lo = 0, hi = ncall;
  while (lo < hi) {
    int mid = (lo + hi) >> 1;
    if (call_addr[call_sorted[mid]] < a) lo = mid + 1;
    else hi = mid;
  }
  return lo < ncall && call_addr[call_sorted[lo]] == a ? call_sorted[lo] : -1;
}

/* -- The cache ------------------------------------------------------------ */

typedef ljp_mcrun mcrun;   /* (vm.h) */

typedef struct mcmap {
  uintptr_t T, mcode;
  uint32_t sz, nins;
  uint16_t nsnap;
  int ok;
  const char *why;    /* why not ok */
  int nrun;
  mcrun *run;
  ljp_mcmap_stats st;
} mcmap;

void ljp_mcmap_build(mcmap *mm, uintptr_t T);

#define NCACHE 128
static mcmap cache[NCACHE];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static inline uint32_t ld32(uintptr_t p) { uint32_t v; memcpy(&v, (const void *)p, 4); return v; }
static inline uint64_t ld64(uintptr_t p) { uint64_t v; memcpy(&v, (const void *)p, 8); return v; }
static inline uint16_t ld16(uintptr_t p) { uint16_t v; memcpy(&v, (const void *)p, 2); return v; }

/* -- Building a trace's map ----------------------------------------------- */

typedef struct dins {   /* a decoded instruction */
  uint16_t ofs, end;
  uint16_t ak;          /* anchor kind, 0: none */
  uint8_t join;         /* a call through the register the instruction
                           before loaded (lea/mov imm64): one anchor */
  int32_t anchor;       /* index among the span's anchors, -1 */
  uint64_t target;      /* a branch's target; a call's (0: unknown) */
  int32_t disp;         /* a call through lea r, [r14 + disp]: disp */
  uint8_t viadisp;      /* ... that form (DISPATCH found per trace) */
  int16_t callid;       /* the IR call function called, -1 unknown */
  int32_t exitno;       /* a guard's exit (its stub), -1 unknown */
} dins;

typedef struct anchor {
  uint16_t ak;
  int16_t callid;       /* a call's function id, -1 unknown */
  int32_t exitno;       /* a guard's exit number, -1 unknown */
  int first, last;      /* instructions */
} anchor;

typedef struct builder {
  dins *ins;
  int nins;
  anchor *an;
  int32_t *G;           /* the DP's scores: two rows of gk positions */
  uint32_t gk;
  int32_t *PM;          /* the DP's tables, for gcap cells (grown) */
  uint8_t *BP;
  uint32_t gcap;
  int *pos_of;          /* anchor -> position */
  uint32_t cells;       /* DP cells used (the trace's budget) */
  mcrun *run;
  int nrun;
  uintptr_t ir;
  uint32_t nins_ir;
  uint32_t *pm;         /* the span's positions' masks (pos_mask) */
  int gc_head;          /* the head holds a GC check */
  uint32_t gc_loop;     /* LOOP's ref when it holds one, else 0 */
  ljp_mcmap_stats st;
} builder;

static uint16_t fop_kind(int fop)
{
  switch (fop) {
  case LJP_XF_ADD: return AK_FADD;
  case LJP_XF_SUB: return AK_FSUB;
  case LJP_XF_MUL: return AK_FMUL;
  case LJP_XF_DIV: return AK_FDIV;
  case LJP_XF_SQRT: return AK_FSQRT;
  case LJP_XF_MIN: case LJP_XF_MAX: return AK_FMINMAX;
  case LJP_XF_CVT: return AK_FCVT;
  case LJP_XF_CMP: return AK_FCMP;
  case LJP_XF_ROUND: return AK_FROUND;
  default: return 0;
  }
}

/* What an instruction anchors (0: a move or other filler). */
static uint16_t anchor_kind(const ljp_x64ins *x, uintptr_t mc, uint32_t sz,
                            uint32_t ofs)
{
  switch (x->cls) {
  case LJP_X64_CALL: return AK_CALL;
  case LJP_X64_JCC:
    /* To outside the trace: an exit stub or a side trace (a guard). A
    ** branch inside (the loop's inverted guard, a helper loop): none. */
    if (x->has_target && (x->target < mc || x->target >= mc + sz))
      return AK_GUARD;
    return 0;
  case LJP_X64_FLT: return fop_kind(x->fop);
  case LJP_X64_INT:
    if (x->map == 0 && x->op == 0x8d) return 0;    /* lea: addresses */
    return AK_IARITH;
  case LJP_X64_CMP: return AK_ICMP;
  default:
    (void)ofs;
    return 0;
  }
}

/* The mask of position p of a span (a ref, or the head/tail pseudo).
** The head, and LOOP, hold a GC check (a call and a guard) when the
** section after them allocates (asm_gc_check: at the head for the part
** before LOOP, at LOOP for the loop's body, none above a GCSTEP). */
/* Has ref no code of its own? Sunk (lj_opt_sink.c: its r RID_SINK or
** RID_SUNK, 0xfe and 0xfd): a sunk allocation or store has no code (no
** call, no GC step). Or a CALLN/CALLL whose result nothing used (no
** register, r & RID_NONE 0x80, and no spill slot: lj_asm.c's DCE, "if
** (!ra_used(ir) && !ir_sideeff(ir))", dropped it; a CALLL's guard is a
** weak one: a trace stitched at string.format keeps the format calls
** in its IR, not in its code). */
static int sunk(uintptr_t ir, uint32_t ref)
{
  uint8_t r = *(const uint8_t *)(ir + 8u * ref + 6);
  uint8_t sp = *(const uint8_t *)(ir + 8u * ref + 7);
  uint8_t o = *(const uint8_t *)(ir + 8u * ref + 5);
  return r == 0xfe || r == 0xfd ||
         ((r & 0x80) && sp == 0 && (op_mask[o] & OPF_PURE));
}

static uint32_t pos_mask(const builder *b, uint32_t ref, int pseudo)
{
  uint8_t t, o;
  uint32_t m;
  if (pseudo)
    return OPF_PSEUDO | AK_CALL | AK_GUARD | AK_IARITH | AK_ICMP |
           (ref == REF_BIAS && b->gc_head ? OPF_MUSTCALL : 0);
  if (sunk(b->ir, ref)) return 0;
  t = *(const uint8_t *)(b->ir + 8u * ref + 4);
  o = *(const uint8_t *)(b->ir + 8u * ref + 5);
  m = op_mask[o] | ((t & IRT_GUARD) ? AK_GUARD : 0);
  if ((m & OPF_LOOP) && ref == b->gc_loop)
    m |= OPF_MUSTCALL | AK_CALL | AK_GUARD | AK_ICMP | AK_IARITH;
  return m;
}

static int32_t weight(uint16_t ak, uint32_t m)
{
  int weak = (m & OPF_PSEUDO) && !(m & OPF_MUSTCALL);
  if (ak == AK_CALL)
    return (m & AK_CALL) ? 100 + ((m & OPF_MUSTCALL) ? 60 : 0) - weak * 40
                         : NEG;
  if (ak == AK_GUARD) return (m & AK_GUARD) ? 100 - weak * 40 : NEG;
  if (ak & AK_FLOAT) return (m & ak) && !(m & OPF_PSEUDO) ? 20 : -8;
  return (m & ak) ? 4 : 0;
}

/* Is anchor a matched at a position of mask m (an exact instruction)? */
static int matched(uint16_t ak, uint32_t m)
{
  return (m & ak) != 0 && !(m & OPF_PSEUDO && (ak & AK_FLOAT));
}

static void put_run(builder *b, uint32_t ofs, uint32_t lo, uint32_t hi,
                    uint32_t len)
{
  uint32_t ex = lo == hi;
  if (ex) b->st.exact_bytes += len;
  if (b->nrun && b->run[b->nrun - 1].lo == lo && b->run[b->nrun - 1].hi == hi)
    return;
  b->run[b->nrun].ofs = ofs;
  b->run[b->nrun].lo = lo;
  b->run[b->nrun].hi = hi;
  b->run[b->nrun].exact = ex;
  b->nrun++;
}

static int call_fits(const builder *b, int id, uint32_t ref, uint32_t m);

/* Align the span of instructions [i0, i1) to refs [rlo, rhi] (rlo the
** head pseudo when head, rhi the tail pseudo when tail) and emit its
** runs. */
static void align_span(builder *b, int i0, int i1, uint32_t rlo, uint32_t rhi,
                       int head, int tail, int sn)
{
  int na = 0, i, j, k = (int)(rhi - rlo + 1), trusted = 1;
  /* Anchors: a call's target load (lea/mov imm64 into its register just
  ** before it) joins it. */
  for (i = i0; i < i1; i++) b->ins[i].anchor = -1;
  for (i = i0; i < i1; i++) {
    if (!b->ins[i].ak) continue;
    /* Two guard branches in a row to the same exit are one guard's (a
    ** float compare's jne and jp: asm_guardcc). */
    if (b->ins[i].ak == AK_GUARD && na && b->an[na - 1].ak == AK_GUARD &&
        b->an[na - 1].last == i - 1 && b->ins[i - 1].target == b->ins[i].target) {
      b->an[na - 1].last = i;
      b->ins[i].anchor = na - 1;
      continue;
    }
    b->an[na].ak = b->ins[i].ak;
    b->an[na].callid = b->ins[i].callid;
    b->an[na].exitno = b->ins[i].exitno;
    b->an[na].first = b->an[na].last = i;
    if (b->ins[i].join && i > i0 && !b->ins[i - 1].ak) {
      b->an[na].first = i - 1;
      b->ins[i - 1].anchor = na;
    }
    b->ins[i].anchor = na;
    na++;
  }
  b->st.anchors += (uint32_t)na;
  if (na && ((uint64_t)na * (uint64_t)k > SPAN_CELLS ||
             b->cells + (uint64_t)na * (uint64_t)k > TRACE_CELLS))
    trusted = 0;
  if (na && trusted && (uint32_t)(na * k) > b->gcap) {
    uint32_t cap = (uint32_t)(na * k) < 4096 ? 4096 : (uint32_t)(na * k);
    free(b->PM);
    free(b->BP);
    b->PM = malloc(sizeof(int32_t) * cap);
    b->BP = malloc(4u * cap);
    b->gcap = b->PM && b->BP ? cap : 0;
    if (!b->gcap) trusted = 0;
  }
  if (na && trusted && (uint32_t)k > b->gk) {
    free(b->G);
    b->G = malloc(sizeof(int32_t) * 8u * (uint32_t)k);
    b->gk = b->G ? (uint32_t)k : 0;
    if (!b->gk) trusted = 0;
  }
  for (j = 0; j < k; j++)
    b->pm[j] = pos_mask(b, rlo + (uint32_t)j, (head && j == 0) || (tail && j == k - 1));
  if (na && trusted) {
    /* Row i of G (G + (i & 1) * 4k), [j * 4 + st]: the best score of
    ** anchors 0..i with anchor i at position j, st the guard (1) and call
    ** (2) already given to j; PM[i * k + j]: where the best of row i over
    ** positions 0..j is, as j * 4 + st; BP[(i * k + j) * 4 + st]: where
    ** that score came from, the state of anchor i - 1 at the same
    ** position (0-3) or 4: PM[(i - 1) * k + j - 1]. Two rows of scores
    ** and 8 bytes per cell (20 with the whole table of scores). */
    int32_t *PM = b->PM, best;
    uint8_t *BP = b->BP;
    int bj, bs;
    b->cells += (uint32_t)(na * k);
    for (i = 0; i < na; i++) {
      uint16_t ak = b->an[i].ak;
      int addst = ak == AK_GUARD ? 1 : ak == AK_CALL ? 2 : 0;
      int32_t run_best = NEG - 1;
      int32_t *row = b->G + (i & 1) * 4 * k, *prow = b->G + ((i + 1) & 1) * 4 * k;
      int run_arg = 0;
      for (j = 0; j < k; j++) {
        uint32_t m = b->pm[j];
        int32_t w = weight(ak, m), *g = &row[j * 4];
        uint8_t *bp = &BP[((uint32_t)i * (uint32_t)k + (uint32_t)j) * 4];
        if (ak == AK_CALL && b->an[i].callid >= 0 && w > NEG &&
            !call_fits(b, b->an[i].callid, rlo + (uint32_t)j, m))
          w = NEG;
        /* an IR guard exits through its span's snapshot: another exit
        ** is the head's (a side trace's stack check: the parent's exit)
        ** or the tail's */
        if (ak == AK_GUARD && b->an[i].exitno >= 0 && b->an[i].exitno != sn &&
            !(m & OPF_PSEUDO))
          w = NEG;
        int st;
        for (st = 0; st < 4; st++) { g[st] = NEG; bp[st] = 4; }
        if (w > NEG) {
          if (i == 0) {
            g[addst] = w;
          } else {
            /* from an earlier position */
            if (j > 0) {
              int pm = PM[(i - 1) * k + j - 1];
              int32_t from = prow[(pm >> 2) * 4 + (pm & 3)];
              if (from > NEG) g[addst] = from + w;
            }
            /* at the same position */
            for (st = 0; st < 4; st++) {
              int32_t same = prow[j * 4 + st], c = -2;
              if (same <= NEG) continue;
              if (ak == AK_CALL && (st & 2) && (m & OPF_MUSTCALL)) continue;
              if (ak == AK_GUARD && (st & 1)) c = -40;
              else if ((ak & AK_FLOAT) && b->an[i - 1].ak == ak) c = -10;
              /* (a tie goes to the same position, the lowest st) */
              if (same + c + w > g[st | addst] ||
                  (same + c + w == g[st | addst] && bp[st | addst] == 4)) {
                g[st | addst] = same + c + w;
                bp[st | addst] = (uint8_t)st;
              }
            }
          }
        }
        for (st = 0; st < 4; st++)
          if (g[st] > run_best) { run_best = g[st]; run_arg = j * 4 + st; }
        PM[i * k + j] = run_arg;
      }
    }
    bj = PM[(na - 1) * k + k - 1];
    bs = bj & 3;
    bj >>= 2;
    best = b->G[((na - 1) & 1) * 4 * k + bj * 4 + bs];
    if (best <= NEG / 2) {
      trusted = 0;
    } else {
      /* Back: each anchor's position into pos_of. */
      for (i = na - 1; i >= 0; i--) {
        uint8_t from;
        b->pos_of[i] = bj;
        if (!i) break;
        from = BP[((uint32_t)i * (uint32_t)k + (uint32_t)bj) * 4 + (uint32_t)bs];
        if (from < 4) {
          bs = from;
        } else {
          int pm;
          if (bj == 0) { trusted = 0; break; }   /* (cannot happen) */
          pm = PM[(i - 1) * k + bj - 1];
          bj = pm >> 2;
          bs = pm & 3;
        }
      }
      /* Every call instruction of the span got exactly one call. */
      for (j = 0; j < k && trusted; j++) {
        int pseudo = (head && j == 0) || (tail && j == k - 1), nc = 0;
        if (pseudo || !(b->pm[j] & OPF_MUSTCALL)) continue;
        for (i = 0; i < na; i++)
          if (b->pos_of[i] == j && b->an[i].ak == AK_CALL) nc++;
        if (nc != 1) trusted = 0;
      }
    }
  }
  if (!trusted) b->st.untrusted++;
  /* Runs. */
  {
    int prev = -1;            /* last matched anchor */
    int next = 0;             /* scan for the next matched anchor */
    for (i = i0; i < i1; i++) {
      uint32_t lo, hi;
      int a = b->ins[i].anchor;
      if (!trusted || !na) {
        lo = rlo;
        hi = rhi;
      } else {
        int pj = a >= 0 ? b->pos_of[a] : -1;
        uint32_t m = pj >= 0 ? b->pm[pj] : 0;
        if (a >= 0 && matched(b->an[a].ak, m)) {
          lo = hi = rlo + (uint32_t)pj;
          prev = a;
        } else {
          int n2;
          if (next <= a) next = a + 1;
          if (next < (prev + 1)) next = prev + 1;
          for (n2 = next; n2 < na; n2++) {
            uint32_t m2 = b->pm[b->pos_of[n2]];
            if (b->an[n2].first > i && matched(b->an[n2].ak, m2)) break;
          }
          next = n2;
          lo = prev >= 0 ? rlo + (uint32_t)b->pos_of[prev] : rlo;
          hi = n2 < na ? rlo + (uint32_t)b->pos_of[n2] : rhi;
        }
      }
      put_run(b, b->ins[i].ofs, lo, hi, (uint32_t)(b->ins[i].end - b->ins[i].ofs));
    }
  }
}

/* The exit number of the exit stub at t (lj_asm_x86.h, asm_exitstub_gen:
** stub i of a group is push (group * 32 + i) & 0xff, then a short jmp to
** the group's tail, push (group * 32) >> 8; the last stub falls into it),
** or -1 when t is not a stub (a patched exit: a side trace). t lies in
** LuaJIT's machine code area (a guard's target); 6 bytes are read. */
static int32_t stub_exitno(uint64_t t)
{
  const uint8_t *p = (const uint8_t *)(uintptr_t)t;
  if (!t || p[0] != 0x6a) return -1;
  if (p[2] == 0xeb) {
    const uint8_t *q = p + 4 + (int8_t)p[3];
    if (q[0] != 0x6a) return -1;
    return (int32_t)p[1] | ((int32_t)q[1] << 8);
  }
  if (p[2] == 0x6a) return (int32_t)p[1] | ((int32_t)p[3] << 8);
  return -1;
}

/* Each call's function id: from its target (call rel32, mov imm64), or
** for lea r, [r14 + d] (r14 = DISPATCH) from the DISPATCH that best
** explains such calls: each function the trace can call (a CALL*'s id, a
** helper opcode's function, the GC check) has as many calls to give as
** the trace has instructions that call it, less the calls already known
** by their target; a DISPATCH (one such function's address - d) scores
** the lea calls it lands on a function with a call left to give (at most
** 8 distinct d). Counting landings alone made every candidate score the
** same when all lea calls share one d (four calls of sin beside a
** CALLL of lj_strfmt_putquoted: DISPATCH taken from putquoted, every sin
** call then named putquoted and the spans not aligned). A tie between
** two DISPATCH values leaves the lea calls unknown (any call opcode). */
static void resolve_calls(builder *b)
{
  int i, nv = 0, best = 0, tie = 0;
  int32_t disps[8];
  uint16_t nd[8];                 /* lea calls per distinct d */
  int16_t cap[NCALL];             /* calls each function can still take */
  uint16_t nop[256];              /* instructions per opcode */
  int ngc = 0;
  uint64_t disp_base = 0;
  uint32_t ref;
  int id;
  for (i = 0; i < b->nins; i++) {
    int d;
    if (b->ins[i].ak != AK_CALL || b->ins[i].target || !b->ins[i].viadisp)
      continue;
    for (d = 0; d < nv && disps[d] != b->ins[i].disp; d++) {}
    if (d == nv) {
      if (nv == 8) continue;
      disps[nv] = b->ins[i].disp;
      nd[nv++] = 0;
    }
    nd[d]++;
  }
  for (i = 0; i < b->nins; i++)
    if (b->ins[i].ak == AK_CALL && b->ins[i].target)
      b->ins[i].callid = (int16_t)call_id(b->ins[i].target);
  if (!nv) return;
  memset(cap, 0, sizeof(cap));
  memset(nop, 0, sizeof(nop));
  for (ref = REF_BIAS + 1; ref < b->nins_ir; ref++) {
    uint8_t o = *(const uint8_t *)(b->ir + 8u * ref + 5);
    uint16_t op2 = *(const uint16_t *)(b->ir + 8u * ref + 2);
    if (sunk(b->ir, ref)) continue;
    if ((op_mask[o] & OPF_MUSTCALL) && op2 < ncall && cap[op2] < 0x4000) cap[op2]++;
    if (op_mask[o] & OPF_GCSTEP) ngc++;
    if (nop[o] < 0x4000) nop[o]++;
  }
  ngc += b->gc_head + (b->gc_loop != 0);
  for (id = 0; id < ncall; id++) {
    int c = call_helper[id] == HELPER_GC + 1 ? ngc
          : call_helper[id] ? nop[call_helper[id] - 1] : 0;
    if (call_helper2[id]) c += nop[call_helper2[id] - 1];
    cap[id] = (int16_t)(cap[id] + (c < 0x4000 ? c : 0x4000));
  }
  for (i = 0; i < b->nins; i++)
    if (b->ins[i].callid >= 0 && cap[b->ins[i].callid] > 0) cap[b->ins[i].callid]--;
  for (id = 0; id < ncall; id++) {
    int d;
    if (cap[id] <= 0 || !call_addr[id]) continue;
    for (d = 0; d < nv; d++) {
      uint64_t base = call_addr[id] - (uint64_t)(int64_t)disps[d];
      int score = 0, v, n = 0, u;
      int16_t wid[8], wtaken[8];   /* functions landed on, calls taken */
      for (v = 0; v < nv; v++) {
        int w = call_id(base + (uint64_t)(int64_t)disps[v]), take;
        if (w < 0) continue;
        for (u = 0; u < n && wid[u] != w; u++) {}
        if (u == n) { wid[n] = (int16_t)w; wtaken[n++] = 0; }
        take = cap[w] - wtaken[u];
        if (take > nd[v]) take = nd[v];
        if (take > 0) { score += take; wtaken[u] = (int16_t)(wtaken[u] + take); }
      }
      if (score > best) { best = score; disp_base = base; tie = 0; }
      else if (score == best && base != disp_base) tie = 1;
    }
  }
  if (!best || tie) return;
  for (i = 0; i < b->nins; i++)
    if (b->ins[i].ak == AK_CALL && b->ins[i].viadisp && !b->ins[i].target)
      b->ins[i].callid = (int16_t)call_id(disp_base + (uint64_t)(int64_t)b->ins[i].disp);
}

/* May a call of function id (>= 0) be position ref's (mask m)? */
static int call_fits(const builder *b, int id, uint32_t ref, uint32_t m)
{
  uint16_t h = call_helper[id];
  if (m & OPF_PSEUDO) return (m & OPF_MUSTCALL) && h == HELPER_GC + 1;
  if ((m & OPF_LOOP) || (m & OPF_GCSTEP)) return h == HELPER_GC + 1;
  if (m & OPF_MUSTCALL) {
    uint8_t o = *(const uint8_t *)(b->ir + 8u * ref + 5);
    uint16_t op2 = *(const uint16_t *)(b->ir + 8u * ref + 2);
    if (!(op_mask[o] & OPF_MUSTCALL)) return h == HELPER_GC + 1;
    return op2 == id || (op2 >= ncall);   /* (CALLXS: a pointer) */
  }
  {
    uint8_t o = *(const uint8_t *)(b->ir + 8u * ref + 5);
    return (h && h - 1 == o) || (call_helper2[id] && call_helper2[id] - 1 == o);
  }
}

/* (not static: the cost gate counts it per trace, bench/cost/gate.lua) */
__attribute__((noinline)) void ljp_mcmap_build(mcmap *mm, uintptr_t T)
{
  builder b;
  uintptr_t mc, snap;
  uint32_t sz, nins, ofs = 0;
  int nsnap, s, ok = 0, i;
  memset(&b, 0, sizeof(b));
  mm->ok = 0;
  mc = mm->mcode;
  sz = mm->sz;
  nins = mm->nins;
  nsnap = mm->nsnap;
  snap = ld64(T + (uintptr_t)ljp_tsl.t_snap);
  b.ir = ld64(T + (uintptr_t)ljp_tsl.t_ir);
  b.nins_ir = nins;
  mm->why = "trace counts out of range";
  if (!mc || !sz || sz >= 0x10000 || nsnap <= 0 || !snap || !b.ir ||
      nins <= REF_BIAS + 1 || nins - REF_BIAS > 0x10000)
    return;
  /* Where the GC checks are (lj_asm.c: gcsteps counted backwards from
  ** the end, checked at LOOP and at the head, none above a GCSTEP). */
  {
    uint32_t ref;
    int gc = 0;
    for (ref = nins - 1; ref > REF_BIAS; ref--) {
      uint32_t m = op_mask[*(const uint8_t *)(b.ir + 8u * ref + 5)];
      if ((m & OPF_ALLOC) && !sunk(b.ir, ref)) { if (gc >= 0) gc++; }
      else if (m & OPF_GCSTEP) gc = -1;
      else if (m & OPF_LOOP) {
        if (gc > 0) b.gc_loop = ref;
        if (gc >= 0) gc = 0;
      }
    }
    b.gc_head = gc > 0;
  }
  b.ins = malloc(sizeof(dins) * (sz + 1));
  b.an = malloc(sizeof(anchor) * (sz + 1));
  b.pos_of = malloc(sizeof(int) * (sz + 1));
  b.run = malloc(sizeof(mcrun) * (sz + 1));

  b.pm = malloc(sizeof(uint32_t) * (nins - REF_BIAS + 2));
  mm->why = "out of memory";
  if (!b.ins || !b.an || !b.pos_of || !b.run || !b.pm)
    goto out;
  mm->why = "code not decodable";
  /* Decode all; every snapshot's mcofs must be a boundary. */
  while (ofs < sz) {
    ljp_x64ins x;
    int len = ljp_x64_decode((const uint8_t *)(mc + ofs), sz - ofs, mc + ofs, &x);
    if (!len) goto out;
    b.ins[b.nins].ofs = (uint16_t)ofs;
    b.ins[b.nins].end = (uint16_t)(ofs + (uint32_t)len);
    b.ins[b.nins].ak = anchor_kind(&x, mc, sz, ofs);
    b.ins[b.nins].join = 0;
    b.ins[b.nins].target = x.has_target ? x.target : 0;
    b.ins[b.nins].viadisp = 0;
    b.ins[b.nins].disp = 0;
    b.ins[b.nins].callid = -1;
    b.ins[b.nins].exitno = b.ins[b.nins].ak == AK_GUARD ? stub_exitno(x.target) : -1;
    /* a call through a register (emit_call: lea or mov imm64 of the
    ** target, call reg): the load joins the call when it loads that
    ** register */
    if (x.cls == LJP_X64_CALL && !x.has_target && x.modrm_reg != 0xff &&
        b.nins > 0) {
      ljp_x64ins y;
      const dins *p = &b.ins[b.nins - 1];
      if (ljp_x64_decode((const uint8_t *)(mc + p->ofs), sz - p->ofs,
                         mc + p->ofs, &y) &&
          ((y.map == 0 && y.op == 0x8d && y.modrm_reg == x.opreg) ||
           (y.imm64 && y.opreg == x.opreg))) {
        const uint8_t *q = (const uint8_t *)(mc + p->ofs);
        b.ins[b.nins].join = 1;
        if (y.imm64) {
          b.ins[b.nins].target = y.imm;
        } else if (y.len == 7 && (q[0] & 0xf9) == 0x49 && q[2] == (0x86 | ((x.opreg & 7) << 3))) {
          /* lea r, [r14 + d32]: REX.W+B, 8D, ModRM mod 2 rm 6 (r14) */
          memcpy(&b.ins[b.nins].disp, q + 3, 4);
          b.ins[b.nins].viadisp = 1;
        }
      }
    }
    b.nins++;
    ofs += (uint32_t)len;
  }
  b.st.bytes = sz;
  resolve_calls(&b);
  for (s = 0, i = 0; s < nsnap; s++) {
    uint32_t c0 = ld16(snap + (uintptr_t)s * SNAPSZ + 6);
    uint32_t c1 = s + 1 < nsnap ? ld16(snap + (uintptr_t)(s + 1) * SNAPSZ + 6) : sz;
    /* asm_snap_fixup_mcofs counts from the code's end before the tail
    ** fixup, which can shorten the tail (asm_tail_fixup): offsets past
    ** the end are those of snapshots with no code left. */
    if (c0 > sz) c0 = sz;
    if (c1 > sz) c1 = sz;
    uint32_t r0 = s ? ld16(snap + (uintptr_t)s * SNAPSZ + 4) : REF_BIAS;
    uint32_t r1 = s + 1 < nsnap ? ld16(snap + (uintptr_t)(s + 1) * SNAPSZ + 4) - 1u
                                : nins;
    int i1;
    mm->why = "snapshot offsets or refs out of order";
    if (c1 < c0 || c1 > sz || (s == 0 && c0 != 0)) goto out;
    if (r0 < REF_BIAS || r0 > nins || r1 + 1 < r0 || r1 > nins) goto out;
    mm->why = "a snapshot boundary inside an instruction";
    while (i < b.nins && b.ins[i].ofs < c0) i++;
    if (i < b.nins ? b.ins[i].ofs != c0 : c0 != sz) goto out;
    for (i1 = i; i1 < b.nins && b.ins[i1].ofs < c1; i1++) {}
    if (i1 < b.nins ? b.ins[i1].ofs != c1 : c1 != sz) goto out;
    if (c1 == c0) continue;
    b.st.spans++;
    if (r1 + 1 == r0) r1 = r0;   /* no instruction: a head/tail only */
    align_span(&b, i, i1, r0, r1, s == 0, s == nsnap - 1, s);
    i = i1;
  }
  b.st.runs = (uint32_t)b.nrun;
  mm->run = malloc(sizeof(mcrun) * (size_t)(b.nrun ? b.nrun : 1));
  if (!mm->run) goto out;
  memcpy(mm->run, b.run, sizeof(mcrun) * (size_t)b.nrun);
  mm->nrun = b.nrun;
  mm->st = b.st;
  ok = 1;
out:
  free(b.ins);
  free(b.an);
  free(b.pos_of);
  free(b.run);
  free(b.G);
  free(b.PM);
  free(b.BP);
  free(b.pm);
  mm->ok = ok;
  if (ok) mm->why = NULL;
}

/* The map of T (built if needed), under cache_mu; NULL when unknown. */
static mcmap *get(uintptr_t T)
{
  mcmap *mm;
  uintptr_t mc;
  uint32_t sz, nins;
  uint16_t nsnap;
  if (!T || !ljp_tsl.ok || !ljp_tml.ok || ljp_tsl.t_nins < 0 || learnt <= 0)
    return NULL;
  mc = ld64(T + (uintptr_t)ljp_tml.t_mcode);
  sz = ld32(T + (uintptr_t)ljp_tml.t_szmcode);
  nsnap = ld16(T + (uintptr_t)ljp_tsl.t_nsnap);
  nins = ld32(T + (uintptr_t)ljp_tsl.t_nins);
  mm = &cache[(T >> 6) % NCACHE];
  if (mm->T != T || mm->mcode != mc || mm->sz != sz || mm->nsnap != nsnap ||
      mm->nins != nins) {
    free(mm->run);
    memset(mm, 0, sizeof(*mm));
    mm->T = T;
    mm->mcode = mc;
    mm->sz = sz;
    mm->nsnap = nsnap;
    mm->nins = nins;
    ljp_mcmap_build(mm, T);
  }
  return mm->ok ? mm : NULL;
}

int ljp_mcmap_find(const ljp_mcrun *run, int nrun, uint32_t sz, uint32_t ofs,
                   uint32_t *ref_lo, uint32_t *ref_hi, int *exact)
{
  int lo = 0, hi = nrun;
  if (!run || ofs >= sz || nrun <= 0) return 0;
  while (lo < hi) {             /* the last run starting at or before ofs */
    int mid = (lo + hi) >> 1;
    if (run[mid].ofs <= ofs) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return 0;
  *ref_lo = run[lo - 1].lo;
  *ref_hi = run[lo - 1].hi;
  *exact = (int)run[lo - 1].exact;
  return 1;
}

int ljp_mcmap_refs(uintptr_t T, uint32_t ofs, uint32_t *ref_lo,
                   uint32_t *ref_hi, int *exact)
{
  mcmap *mm;
  int res = 0;
  pthread_mutex_lock(&cache_mu);
  mm = get(T);
  if (mm) res = ljp_mcmap_find(mm->run, mm->nrun, mm->sz, ofs, ref_lo, ref_hi,
                               exact);
  pthread_mutex_unlock(&cache_mu);
  return res;
}

int ljp_mcmap_copy(uintptr_t T, ljp_mcrun **runs)
{
  mcmap *mm;
  int n = 0;
  *runs = NULL;
  pthread_mutex_lock(&cache_mu);
  mm = get(T);
  if (mm && mm->nrun > 0 &&
      (*runs = malloc(sizeof(mcrun) * (size_t)mm->nrun)) != NULL) {
    memcpy(*runs, mm->run, sizeof(mcrun) * (size_t)mm->nrun);
    n = mm->nrun;
  }
  pthread_mutex_unlock(&cache_mu);
  return n;
}

int ljp_mcmap_stats_of(uintptr_t T, ljp_mcmap_stats *st)
{
  mcmap *mm;
  int res = 0;
  pthread_mutex_lock(&cache_mu);
  mm = get(T);
  st->why = NULL;
  if (mm) {
    *st = mm->st;
    st->why = NULL;
    res = 1;
  } else {
    mcmap *c = &cache[(T >> 6) % NCACHE];
    st->why = !T ? "no trace" : learnt <= 0 ? "IR opcodes not learnt"
            : !ljp_tsl.ok || !ljp_tml.ok ? "trace layouts not proven"
            : ljp_tsl.t_nins < 0 ? "instruction count not found"
            : c->T == T && c->why ? c->why : "unknown";
  }
  pthread_mutex_unlock(&cache_mu);
  return res;
}

void ljp_mcmap_clear(void)
{
  int i;
  pthread_mutex_lock(&cache_mu);
  for (i = 0; i < NCACHE; i++) {
    free(cache[i].run);
    memset(&cache[i], 0, sizeof(cache[i]));
  }
  pthread_mutex_unlock(&cache_mu);
}
