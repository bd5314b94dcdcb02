/*
** ljprof's x86-64 DWARF call-frame unwinder (see cfi.h), replacing
** libunwind in the signal handler.
**
** Runs in signal context: no libc call (copies are __builtin_memcpy of a
** constant size, inlined), no allocation, no lock, no recursion, bounded
** work (CFI_MAX_OPS instructions per frame, CFI_STATES remembered rows).
** All unwind data is read through a cursor bounded by the mapped segment
** that holds it (and by the entry's own length); all stack data through
** the caller's stack bounds. Anything this file does not know ends the
** step as LJP_CFI_FAIL.
**
** The lookup: the .eh_frame_hdr table (version 1, a table of datarel
** sdata4 pairs, anything else refused at registration) is binary-searched
** for the last entry starting at or before the address; its FDE and CIE
** are parsed (augmentations z, R, P, L, S; pointer encodings absptr,
** udata/sdata 2/4/8, uleb/sleb, pc-relative; an indirect personality is
** only skipped), the CIE's initial instructions and the FDE's
** instructions are run up to the address, and the resulting row's rules
** give the caller's CFA, return address and registers. A row found is
** remembered (with a generation of the loaded objects) by its address
** and by the range of addresses it holds for, so that the next samples
** at or near that code skip the search and the programs (below).
*/
#define _GNU_SOURCE  /* REG_* of <ucontext.h> */
#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

#if defined(__x86_64__)
#include <ucontext.h>
#endif

#define CFI_MAX_OPS 4096   /* CFI instructions run per step */
#define CFI_STATES 8       /* DW_CFA_remember_state depth */
#define CFI_MAX_CIE_AUG 8  /* augmentation string letters */

/* -- Bounded reads --------------------------------------------------------- */

typedef struct rd {
  uintptr_t p, end;  /* next byte, end of the readable range */
  int bad;
} rd;

/* The end of the mapped segment of t holding [a, a + n), or 0. */
static uintptr_t seg_end(const ljp_ehtab *t, uintptr_t a, uintptr_t n)
{
  uint32_t i;
  for (i = 0; i < t->nseg && i < LJP_EH_SEGS; i++)
    if (a >= t->lo[i] && a < t->hi[i] && n <= t->hi[i] - a) return t->hi[i];
  return 0;
}

static int rd_at(rd *c, const ljp_ehtab *t, uintptr_t a)
{
  c->p = a;
  c->end = seg_end(t, a, 1);
  c->bad = c->end == 0;
  return !c->bad;
}

static int rd_has(rd *c, uintptr_t n)
{
  if (c->bad || c->p > c->end || n > c->end - c->p) {
    c->bad = 1;
    return 0;
  }
  return 1;
}

static uint8_t rd_u8(rd *c)
{
  uint8_t v;
  if (!rd_has(c, 1)) return 0;
  v = *(const uint8_t *)c->p;
  c->p += 1;
  return v;
}

#define RD_FIXED(name, type)                          \
  static type name(rd *c)                             \
  {                                                   \
    type v;                                           \
    if (!rd_has(c, sizeof(type))) return 0;           \
    __builtin_memcpy(&v, (const void *)c->p, sizeof(type)); \
    c->p += sizeof(type);                             \
    return v;                                         \
  }
RD_FIXED(rd_u16, uint16_t)
RD_FIXED(rd_u32, uint32_t)
RD_FIXED(rd_u64, uint64_t)
RD_FIXED(rd_s16, int16_t)
RD_FIXED(rd_s32, int32_t)
RD_FIXED(rd_s64, int64_t)

static uint64_t rd_uleb(rd *c)
{
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = rd_u8(c);
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    else if (b & 0x7f) c->bad = 1;  /* does not fit */
    shift += 7;
  } while ((b & 0x80) && !c->bad && shift < 70);
  if (b & 0x80) c->bad = 1;
  return v;
}

static int64_t rd_sleb(rd *c)
{
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = rd_u8(c);
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while ((b & 0x80) && !c->bad && shift < 70);
  if (b & 0x80) c->bad = 1;
  if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
  return (int64_t)v;
}

/* -- Pointer encodings (DW_EH_PE_*) ---------------------------------------- */

#define PE_absptr 0x00
#define PE_uleb128 0x01
#define PE_udata2 0x02
#define PE_udata4 0x03
#define PE_udata8 0x04
#define PE_sleb128 0x09
#define PE_sdata2 0x0a
#define PE_sdata4 0x0b
#define PE_sdata8 0x0c
#define PE_pcrel 0x10
#define PE_datarel 0x30
#define PE_indirect 0x80
#define PE_omit 0xff

/* The value of an encoded pointer's format (the low nibble), unapplied. */
static uint64_t rd_format(rd *c, uint8_t enc)
{
  switch (enc & 0x0f) {
  case PE_absptr: return rd_u64(c);
  case PE_uleb128: return rd_uleb(c);
  case PE_udata2: return rd_u16(c);
  case PE_udata4: return rd_u32(c);
  case PE_udata8: return rd_u64(c);
  case PE_sleb128: return (uint64_t)rd_sleb(c);
  case PE_sdata2: return (uint64_t)(int64_t)rd_s16(c);
  case PE_sdata4: return (uint64_t)(int64_t)rd_s32(c);
  case PE_sdata8: return (uint64_t)rd_s64(c);
  default: c->bad = 1; return 0;
  }
}

/* An encoded address: absolute or pc-relative only (what GCC and the
** binutils linkers emit on x86-64 for FDE addresses); not indirect. */
static uintptr_t rd_addr(rd *c, uint8_t enc)
{
  uintptr_t at = c->p;
  uint64_t v;
  if (enc == PE_omit || (enc & PE_indirect)) {
    c->bad = 1;
    return 0;
  }
  v = rd_format(c, enc);
  switch (enc & 0x70) {
  case 0: return (uintptr_t)v;
  case PE_pcrel: return at + (uintptr_t)v;
  default: c->bad = 1; return 0;
  }
}

/* -- The search table ------------------------------------------------------ */

int ljp_cfi_init(ljp_ehtab *t, uintptr_t hdr)
{
  rd c;
  uint8_t ver, eh_enc, cnt_enc, tab_enc;
  uint32_t n;
  t->hdr = 0;
  t->table = 0;
  t->count = 0;
  if (!hdr || !rd_at(&c, t, hdr)) return -1;
  ver = rd_u8(&c);
  eh_enc = rd_u8(&c);
  cnt_enc = rd_u8(&c);
  tab_enc = rd_u8(&c);
  if (c.bad || ver != 1 || tab_enc != (PE_datarel | PE_sdata4) ||
      cnt_enc != PE_udata4 ||
      ((eh_enc & 0x0f) != PE_sdata4 && (eh_enc & 0x0f) != PE_udata4))
    return -1;
  (void)rd_u32(&c);  /* eh_frame_ptr: not needed */
  n = rd_u32(&c);
  if (c.bad || n == 0 || n > (1u << 26) ||
      !seg_end(t, c.p, (uintptr_t)n * 8))
    return -1;
  t->hdr = hdr;
  t->table = c.p;
  t->count = n;
  return 0;
}

/* -- CIE and FDE ------------------------------------------------------------- */

typedef struct cie {
  uint64_t caf;          /* code alignment factor */
  int64_t daf;           /* data alignment factor */
  uint32_t ra;           /* return address column */
  uint8_t fde_enc;       /* 'R' */
  uint8_t aug_z, sig;    /* 'z' present; 'S' */
  uintptr_t ins, end;    /* initial instructions */
} cie;

typedef struct fde {
  uintptr_t lo, hi;      /* code covered */
  uintptr_t ins, end;    /* instructions */
} fde;

static int parse_cie(const ljp_ehtab *t, uintptr_t a, cie *ci)
{
  rd c;
  uint32_t len, id;
  uint8_t ver;
  char aug[CFI_MAX_CIE_AUG];
  int na = 0, i;
  if (!rd_at(&c, t, a)) return -1;
  len = rd_u32(&c);
  if (c.bad || len == 0 || len == 0xffffffffu || !rd_has(&c, len)) return -1;
  c.end = c.p + len;  /* this entry only */
  id = rd_u32(&c);
  ver = rd_u8(&c);
  if (c.bad || id != 0 || (ver != 1 && ver != 3)) return -1;
  for (;;) {  /* the augmentation string */
    uint8_t ch = rd_u8(&c);
    if (c.bad) return -1;
    if (!ch) break;
    if (na == CFI_MAX_CIE_AUG) return -1;
    aug[na++] = (char)ch;
  }
  ci->caf = rd_uleb(&c);
  ci->daf = rd_sleb(&c);
  ci->ra = ver == 1 ? rd_u8(&c) : (uint32_t)rd_uleb(&c);
  ci->fde_enc = PE_absptr;
  ci->aug_z = ci->sig = 0;
  if (c.bad || ci->ra != LJP_CFI_RA) return -1;
  if (na) {
    uint64_t alen;
    uintptr_t aend;
    if (aug[0] != 'z') return -1;  /* "eh" and other old forms */
    ci->aug_z = 1;
    alen = rd_uleb(&c);
    if (!rd_has(&c, alen)) return -1;
    aend = c.p + alen;
    for (i = 1; i < na; i++) {
      switch (aug[i]) {
      case 'R': ci->fde_enc = rd_u8(&c); break;
      case 'L': (void)rd_u8(&c); break;  /* the FDE's LSDA: in its data */
      case 'P': {                        /* personality: skipped */
        uint8_t pe = rd_u8(&c);
        if (pe == PE_omit) return -1;
        (void)rd_format(&c, pe);
        break;
      }
      case 'S': ci->sig = 1; break;
      case 'B': case 'G': break;         /* no data */
      default: return -1;
      }
    }
    if (c.bad || c.p > aend) return -1;
    c.p = aend;
  }
  ci->ins = c.p;
  ci->end = c.end;
  return c.bad ? -1 : 0;
}

/* The FDE at a, with its CIE; 0, or -1 on anything unexpected. */
static int parse_fde(const ljp_ehtab *t, uintptr_t a, fde *fd, cie *ci)
{
  rd c;
  uint32_t len, cptr;
  uintptr_t at;
  uint64_t range;
  if (!rd_at(&c, t, a)) return -1;
  len = rd_u32(&c);
  if (c.bad || len == 0 || len == 0xffffffffu || !rd_has(&c, len)) return -1;
  c.end = c.p + len;
  at = c.p;
  cptr = rd_u32(&c);
  if (c.bad || cptr == 0 || cptr > at) return -1;  /* 0 would be a CIE */
  if (parse_cie(t, at - cptr, ci) != 0) return -1;
  fd->lo = rd_addr(&c, ci->fde_enc);
  range = rd_format(&c, ci->fde_enc & 0x0f);
  if (c.bad || range > (1u << 30) || fd->lo + range < fd->lo) return -1;
  fd->hi = fd->lo + (uintptr_t)range;
  if (ci->aug_z) {
    uint64_t alen = rd_uleb(&c);
    if (!rd_has(&c, alen)) return -1;
    c.p += alen;
  }
  fd->ins = c.p;
  fd->end = c.end;
  return c.bad ? -1 : 0;
}

/* The FDE covering pc, by the search table; 0, else -1. *next (or
NULL): where the table's next entry starts (UINTPTR_MAX: none), so that
every address in [fd->lo, *next) finds this entry too. */
static int find_fde(const ljp_ehtab *t, uintptr_t pc, fde *fd, cie *ci,
                    uintptr_t *next)
{
  uint32_t lo = 0, hi, mid;
  int32_t w[2];
  if (!t || !t->hdr || !t->count) return -1;
  hi = t->count;
  /* The table was bounds-checked at registration (ljp_cfi_init). */
  while (hi - lo > 1) {  /* the last entry starting at or before pc */
    mid = lo + (hi - lo) / 2;
    __builtin_memcpy(w, (const void *)(t->table + (uintptr_t)mid * 8), 8);
    if (t->hdr + (intptr_t)w[0] <= pc) lo = mid;
    else hi = mid;
  }
  if (next) {
    *next = UINTPTR_MAX;
    if (lo + 1 < t->count) {
      __builtin_memcpy(w, (const void *)(t->table + (uintptr_t)(lo + 1) * 8), 8);
      *next = t->hdr + (intptr_t)w[0];
    }
  }
  __builtin_memcpy(w, (const void *)(t->table + (uintptr_t)lo * 8), 8);
  if (t->hdr + (intptr_t)w[0] > pc) return -1;
  if (parse_fde(t, t->hdr + (intptr_t)w[1], fd, ci) != 0) return -1;
  if (pc < fd->lo || pc >= fd->hi) return -1;  /* a gap between entries */
  return 0;
}

int ljp_cfi_proc(const ljp_ehtab *t, uintptr_t pc, uintptr_t *lo,
                 uintptr_t *hi)
{
  fde fd;
  cie ci;
  if (find_fde(t, pc, &fd, &ci, NULL) != 0) return 0;
  *lo = fd.lo;
  *hi = fd.hi;
  return 1;
}

/* -- The CFI program ---------------------------------------------------------- */

enum { R_SAME, R_UNDEF, R_OFFSET, R_VALOFF, R_REG, R_EXPR };

typedef struct rule {
  uint8_t how;     /* R_*; R_SAME also for "no rule" */
  uint8_t reg;     /* R_REG */
  int32_t off;     /* R_OFFSET, R_VALOFF: from the CFA */
} rule;

typedef struct row {
  uint8_t cfa_reg, cfa_expr;
  int32_t cfa_off;
  rule r[LJP_CFI_NREG];
  /* set when the row is found (row_masks), for the step: the registers
  ** with rule R_SAME, and those with R_OFFSET, R_VALOFF or R_REG (the
  ** others, undefined or an expression, are unknown in the caller) */
  uint32_t same, set;
} row;

/* Offsets beyond +-2 GB are nonsense here: refused. */
static int fit32(int64_t v, int32_t *out)
{
  if (v < INT32_MIN || v > INT32_MAX) return 0;
  *out = (int32_t)v;
  return 1;
}

/* The CFA rule linkers give the stubs of a lazy .plt (GNU ld, lld):
**   rsp + A + ((rip & 15) >= N ? 8 : 0)
** (DW_OP_breg7 A; breg16 0; lit15; and; litN; ge; lit3; shl; plus): the
** return address is on top of the stack until the stub pushes its
** relocation index. 2 + N with A in *a for exactly that expression, else
** 1 (an expression we do not evaluate). */
static uint8_t plt_expr(uintptr_t p, uintptr_t n, int32_t *a)
{
  static const uint8_t tail[] = {0x3f, 0x1a, 0 /* litN */, 0x2a, 0x33, 0x24, 0x22};
  rd c;
  int64_t v;
  uint8_t thr = 0;
  uintptr_t i;
  c.p = p;
  c.end = p + n;
  c.bad = 0;
  if (rd_u8(&c) != 0x77) return 1;  /* breg7 (rsp) */
  v = rd_sleb(&c);
  if (c.bad || !fit32(v, a) || rd_u8(&c) != 0x80 || rd_sleb(&c) != 0 ||
      c.end - c.p != sizeof(tail))
    return 1;
  for (i = 0; i < sizeof(tail); i++) {
    uint8_t b = rd_u8(&c);
    if (i == 2 && b >= 0x30 && b <= 0x3f) thr = (uint8_t)(b - 0x30);
    else if (c.bad || b != tail[i]) return 1;
  }
  return (uint8_t)(2 + thr);
}

/* Run the instructions [ins, end) from location loc, stopping before the
** first row that starts after pc. init: the CIE's row (for restore); NULL
** while running the CIE's own instructions. 0, or -1. [*rlo, *rhi): the
** addresses the resulting row holds for, narrowed from what the caller
** put there (the entry's range): from the last location at or before pc
** to the first after it; *rhi 0 when the locations went backwards
** (set_loc), so no range is known. */
static int run_cfi(const ljp_ehtab *t, const cie *ci, uintptr_t ins,
                   uintptr_t end, uintptr_t loc, uintptr_t pc, row *cur,
                   const row *init, int *ops, uintptr_t *rlo, uintptr_t *rhi)
{
  row stack[CFI_STATES];
  int depth = 0;
  rd c;
#define AT_LOC(nl)                                             \
  do {                                                         \
    if ((nl) < loc) *rhi = 0;        /* not monotonic */       \
    loc = (nl);                                                \
    if (loc > pc) {                                            \
      if (*rhi && loc < *rhi) *rhi = loc;                      \
      return 0;                                                \
    }                                                          \
    if (loc > *rlo) *rlo = loc;                                \
  } while (0)
  if (ins == end) return 0;
  if (!rd_at(&c, t, ins) || end < ins || end > c.end) return -1;
  c.end = end;
  while (c.p < c.end) {
    uint8_t op = rd_u8(&c);
    uint64_t reg = 0, u;
    int64_t s;
    int32_t off;
    if (c.bad || ++*ops > CFI_MAX_OPS) return -1;
    switch (op & 0xc0) {
    case 0x40:  /* DW_CFA_advance_loc */
      AT_LOC(loc + (uintptr_t)((op & 0x3f) * ci->caf));
      continue;
    case 0x80:  /* DW_CFA_offset */
      reg = op & 0x3f;
      s = (int64_t)rd_uleb(&c) * ci->daf;
      if (!fit32(s, &off)) return -1;
      if (reg < LJP_CFI_NREG) {
        cur->r[reg].how = R_OFFSET;
        cur->r[reg].off = off;
      }
      continue;
    case 0xc0:  /* DW_CFA_restore */
      reg = op & 0x3f;
      if (!init) return -1;
      if (reg < LJP_CFI_NREG) cur->r[reg] = init->r[reg];
      continue;
    }
    switch (op) {
    case 0x00: break;  /* nop */
    case 0x01: {       /* set_loc */
      uintptr_t nl = rd_addr(&c, ci->fde_enc);
      if (c.bad) return -1;
      AT_LOC(nl);
      break;
    }
    case 0x02: case 0x03: case 0x04:  /* advance_loc1, 2, 4 */
      u = op == 0x02 ? rd_u8(&c) : op == 0x03 ? rd_u16(&c) : rd_u32(&c);
      if (c.bad) return -1;
      AT_LOC(loc + (uintptr_t)(u * ci->caf));
      break;
    case 0x05: case 0x11: case 0x14: case 0x15: case 0x2f:
      /* offset_extended, offset_extended_sf, val_offset, val_offset_sf,
      ** GNU_negative_offset_extended */
      reg = rd_uleb(&c);
      if (op == 0x11 || op == 0x15) s = rd_sleb(&c) * ci->daf;
      else if (op == 0x2f) s = -(int64_t)rd_uleb(&c) * ci->daf;
      else s = (int64_t)rd_uleb(&c) * ci->daf;
      if (c.bad || !fit32(s, &off)) return -1;
      if (reg < LJP_CFI_NREG) {
        cur->r[reg].how = (op == 0x14 || op == 0x15) ? R_VALOFF : R_OFFSET;
        cur->r[reg].off = off;
      }
      break;
    case 0x06:  /* restore_extended */
      reg = rd_uleb(&c);
      if (c.bad || !init) return -1;
      if (reg < LJP_CFI_NREG) cur->r[reg] = init->r[reg];
      break;
    case 0x07: case 0x08:  /* undefined, same_value */
      reg = rd_uleb(&c);
      if (c.bad) return -1;
      if (reg < LJP_CFI_NREG) cur->r[reg].how = op == 0x07 ? R_UNDEF : R_SAME;
      break;
    case 0x09:  /* register */
      reg = rd_uleb(&c);
      u = rd_uleb(&c);
      if (c.bad) return -1;
      if (reg < LJP_CFI_NREG) {
        if (u < LJP_CFI_NREG) {
          cur->r[reg].how = R_REG;
          cur->r[reg].reg = (uint8_t)u;
        } else {
          cur->r[reg].how = R_EXPR;  /* a register we do not track */
        }
      }
      break;
    case 0x0a:  /* remember_state */
      if (depth == CFI_STATES) return -1;
      stack[depth++] = *cur;
      break;
    case 0x0b:  /* restore_state: the whole row, CFA included */
      if (!depth) return -1;
      *cur = stack[--depth];
      break;
    case 0x0c: case 0x12:  /* def_cfa, def_cfa_sf */
      reg = rd_uleb(&c);
      s = op == 0x0c ? (int64_t)rd_uleb(&c) : rd_sleb(&c) * ci->daf;
      if (c.bad || reg >= LJP_CFI_NREG || !fit32(s, &off)) return -1;
      cur->cfa_reg = (uint8_t)reg;
      cur->cfa_off = off;
      cur->cfa_expr = 0;
      break;
    case 0x0d:  /* def_cfa_register */
      reg = rd_uleb(&c);
      if (c.bad || reg >= LJP_CFI_NREG) return -1;
      cur->cfa_reg = (uint8_t)reg;
      cur->cfa_expr = 0;
      break;
    case 0x0e: case 0x13:  /* def_cfa_offset, def_cfa_offset_sf */
      s = op == 0x0e ? (int64_t)rd_uleb(&c) : rd_sleb(&c) * ci->daf;
      if (c.bad || !fit32(s, &off)) return -1;
      cur->cfa_off = off;
      break;
    case 0x0f:  /* def_cfa_expression: the PLT's, else unsupported if used */
      u = rd_uleb(&c);
      if (!rd_has(&c, u)) return -1;
      cur->cfa_expr = plt_expr(c.p, u, &off);
      if (cur->cfa_expr != 1) {
        cur->cfa_reg = LJP_CFI_RSP;
        cur->cfa_off = off;
      }
      c.p += u;
      break;
    case 0x10: case 0x16:  /* expression, val_expression */
      reg = rd_uleb(&c);
      u = rd_uleb(&c);
      if (!rd_has(&c, u)) return -1;
      c.p += u;
      if (reg < LJP_CFI_NREG) cur->r[reg].how = R_EXPR;
      break;
    case 0x2e:  /* GNU_args_size: nothing to do for a walk */
      (void)rd_uleb(&c);
      break;
    default:
      return -1;  /* an opcode we do not know */
    }
    if (c.bad) return -1;
  }
  return 0;
#undef AT_LOC
}

static int stack_read(const ljp_stack *st, uintptr_t a, uintptr_t *out)
{
  if (a < st->lo || a > st->hi || st->hi - a < sizeof(uintptr_t)) return 0;
  __builtin_memcpy(out, (const void *)a, sizeof(uintptr_t));
  return 1;
}

/* Callee-saved in the x86-64 psABI: rbx, rbp, r12-r15. Without a rule a
** callee-saved register keeps its value in the caller; the others are
** unknown there. */
#define CALLEE_SAVED ((1u << 3) | (1u << 6) | (1u << 12) | (1u << 13) | \
                      (1u << 14) | (1u << 15))

/* -- Rows remembered -------------------------------------------------------- */

/* The row for an address, once found, is kept: finding it (a binary
** search, parsing the FDE and CIE, running both programs) costs some 2,000
** instructions, and a program's samples keep landing on the same call
** sites. An entry is keyed by the unwind table's address, the lookup
** address and the caller's generation of the list of loaded objects
** (nonzero, changed whenever an object is added or removed), so a row is
** never used for code that replaced the code it was found for.
**
** Handlers on several threads may share an entry: it is a sequence lock.
** A writer claims an even sequence by compare-and-swap (never waits: a
** claimed entry is simply not written), writes, then publishes the next
** even number; a reader copies the entry and keeps the copy only when the
** sequence was even and unchanged around the copy (its second read an
** atomic update, so that the copy is ordered before it). */
#define MEMO_SIZE 256   /* entries, a power of two */

#define ROW_WORDS ((sizeof(row) + 7) / 8)

/* Every word is read and written with relaxed atomic operations (plain
** moves on x86-64): a racing copy is discarded by the sequence check, and
** the race is one the compiler and the thread sanitizer know of. An entry
** holds for the addresses [rlo, rhi): one address in the memo (rhi =
** pc + 1), a row's range in the range cache below. */
typedef struct memo {
  uint32_t seq;         /* odd while being written */
  uint64_t gen, hdr, rlo, rhi, sig, lo;
  uint64_t row[ROW_WORDS];
} memo;

static memo cfi_memo[MEMO_SIZE];

static memo *memo_slot(uintptr_t hdr, uintptr_t pc)
{
  uint64_t h = ((uint64_t)pc ^ ((uint64_t)hdr << 7)) * 0x9e3779b97f4a7c15ull;
  return &cfi_memo[h >> 56 & (MEMO_SIZE - 1)];
}

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* The entry's row when it holds for pc in the table hdr of generation gen
** and no writer changed it during the copy. */
static int entry_get(memo *m, uint64_t gen, uintptr_t hdr, uintptr_t pc,
                     row *out, int *sig, uintptr_t *lo)
{
  uint64_t w[ROW_WORDS], sg, fl;
  uint32_t s0 = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE), s1;
  size_t i;
  if ((s0 & 1) || LD(m->gen) != gen || LD(m->hdr) != hdr ||
      pc < LD(m->rlo) || pc >= LD(m->rhi))
    return 0;
  sg = LD(m->sig);
  fl = LD(m->lo);
  for (i = 0; i < ROW_WORDS; i++) w[i] = LD(m->row[i]);
  /* an update, not a load: the copy above cannot move below it */
  s1 = __atomic_fetch_add(&m->seq, 0, __ATOMIC_RELEASE);
  if (s0 != s1) return 0;
  __builtin_memcpy(out, w, sizeof(row));
  *sig = (int)sg;
  *lo = (uintptr_t)fl;
  return 1;
}

static void entry_put(memo *m, uint64_t gen, uintptr_t hdr, uintptr_t rlo,
                      uintptr_t rhi, const row *r, int sig, uintptr_t lo)
{
  uint64_t w[ROW_WORDS];
  uint32_t s = __atomic_load_n(&m->seq, __ATOMIC_RELAXED);
  size_t i;
  if ((s & 1) || !__atomic_compare_exchange_n(&m->seq, &s, s + 1, 0,
                                              __ATOMIC_ACQUIRE,
                                              __ATOMIC_RELAXED))
    return;  /* another writer has it; what follows stays after */
  w[ROW_WORDS - 1] = 0;
  __builtin_memcpy(w, r, sizeof(row));
  ST(m->gen, gen);
  ST(m->hdr, (uint64_t)hdr);
  ST(m->rlo, (uint64_t)rlo);
  ST(m->rhi, (uint64_t)rhi);
  ST(m->sig, (uint64_t)sig);
  ST(m->lo, (uint64_t)lo);
  for (i = 0; i < ROW_WORDS; i++) ST(m->row[i], w[i]);
  __atomic_store_n(&m->seq, s + 2, __ATOMIC_RELEASE);
}

/* Rows by the addresses they hold for. A row holds from one location of
** its entry's program to the next (run_cfi's range): every address in
** that range has the same row, found the same way (the same entry of the
** search table). The first sample at a new address in a long function
** (the interpreter's one entry covers all of its body; a hot loop's PCs)
** would miss the memo above and run the search and the programs again
** (some 2,000 instructions); the range it found, remembered under the
** granule of RANGE_SHIFT bits that holds the address, serves the others
** near it. Same keys (generation, table) and the same sequence lock. */
#define RANGE_SIZE 128  /* entries, a power of two */
#define RANGE_SHIFT 8

static memo cfi_range[RANGE_SIZE];

static memo *range_slot(uintptr_t hdr, uintptr_t pc)
{
  uint64_t h = ((uint64_t)(pc >> RANGE_SHIFT) ^ ((uint64_t)hdr << 7)) *
               0x9e3779b97f4a7c15ull;
  return &cfi_range[h >> 56 & (RANGE_SIZE - 1)];
}

/* The step's masks of a row found (row.same, row.set). */
static void row_masks(row *r)
{
  int i;
  r->same = r->set = 0;
  for (i = 0; i < LJP_CFI_NREG; i++) {
    uint8_t how = r->r[i].how;
    if (how == R_SAME) r->same |= 1u << i;
    else if (how == R_OFFSET || how == R_VALOFF || how == R_REG)
      r->set |= 1u << i;
  }
}

/* The row in effect at lookup and the start of its entry: 0, or -1. */
static int find_row(const ljp_ehtab *t, uintptr_t lookup, uint64_t gen,
                    row *cur, int *sig, uintptr_t *lo)
{
  fde fd;
  cie ci;
  row init;
  int ops = 0;
  uintptr_t next, clo, chi, rlo, rhi;
  if (gen && t &&
      (entry_get(memo_slot(t->hdr, lookup), gen, t->hdr, lookup, cur, sig,
                 lo) ||
       entry_get(range_slot(t->hdr, lookup), gen, t->hdr, lookup, cur, sig,
                 lo)))
    return 0;
  if (find_fde(t, lookup, &fd, &ci, &next) != 0) return -1;
  *lo = fd.lo;
  __builtin_memset(&init, 0, sizeof(init));
  init.cfa_reg = LJP_CFI_RSP;
  clo = fd.lo;
  chi = fd.hi;
  if (run_cfi(t, &ci, ci.ins, ci.end, fd.lo, lookup, &init, NULL, &ops,
              &clo, &chi) != 0)
    return -1;
  *cur = init;
  rlo = fd.lo;
  rhi = fd.hi < next ? fd.hi : next;
  if (run_cfi(t, &ci, fd.ins, fd.end, fd.lo, lookup, cur, &init, &ops,
              &rlo, &rhi) != 0)
    return -1;
  row_masks(cur);
  *sig = ci.sig;
  if (gen) {
    entry_put(memo_slot(t->hdr, lookup), gen, t->hdr, lookup, lookup + 1,
              cur, ci.sig, fd.lo);
    /* (a CIE program that moves the location: no range) */
    if (clo == fd.lo && chi == fd.hi && rhi && rlo <= lookup && lookup < rhi)
      entry_put(range_slot(t->hdr, lookup), gen, t->hdr, rlo, rhi, cur,
                ci.sig, fd.lo);
  }
  return 0;
}

/* -- One step ------------------------------------------------------------------ */

int ljp_cfi_step(const ljp_ehtab *t, ljp_regs *r, uintptr_t lookup,
                 const ljp_stack *st, uint64_t gen, int *sigframe,
                 uintptr_t *fn)
{
  row cur;
  ljp_regs nr;
  uintptr_t cfa, lo = 0;
  uint32_t same, set;
  int i, sig = 0;
  *sigframe = 0;
  if (find_row(t, lookup, gen, &cur, &sig, &lo) != 0) return LJP_CFI_FAIL;
  if (fn) *fn = lo;
  *sigframe = sig;
  if (cur.r[LJP_CFI_RA].how == R_UNDEF) return LJP_CFI_END;
  if (cur.cfa_expr == 1 || !(r->valid & (1u << cur.cfa_reg))) return LJP_CFI_FAIL;
  cfa = r->r[cur.cfa_reg] + (uintptr_t)(intptr_t)cur.cfa_off;
  if (cur.cfa_expr) {  /* a PLT stub's: where in the stub is the pc? */
    if (!(r->valid & (1u << LJP_CFI_RA))) return LJP_CFI_FAIL;
    if ((r->r[LJP_CFI_RA] & 15) >= (uintptr_t)(cur.cfa_expr - 2)) cfa += 8;
  }
  /* Registers with no rule (R_SAME): the stack pointer is the CFA, a
  ** callee-saved one keeps its value; the others are unknown. Then only
  ** the registers with a rule that gives a value (row.set). */
  __builtin_memset(&nr, 0, sizeof(nr));
  same = cur.same & CALLEE_SAVED & r->valid;
  while (same) {
    i = __builtin_ctz(same);
    same &= same - 1;
    nr.r[i] = r->r[i];
  }
  nr.valid = cur.same & CALLEE_SAVED & r->valid;
  if (cur.same & (1u << LJP_CFI_RSP)) {
    nr.r[LJP_CFI_RSP] = cfa;
    nr.valid |= 1u << LJP_CFI_RSP;
  }
  for (set = cur.set; set; set &= set - 1) {
    const rule *ru;
    uint32_t bit;
    i = __builtin_ctz(set);
    ru = &cur.r[i];
    bit = 1u << i;
    switch (ru->how) {
    case R_OFFSET:
      if (!stack_read(st, cfa + (uintptr_t)(intptr_t)ru->off, &nr.r[i])) {
        if (i == LJP_CFI_RA || i == 6 || (CALLEE_SAVED & bit))
          return LJP_CFI_FAIL;  /* a saved value we cannot read */
        break;
      }
      nr.valid |= bit;
      break;
    case R_VALOFF:
      nr.r[i] = cfa + (uintptr_t)(intptr_t)ru->off;
      nr.valid |= bit;
      break;
    case R_REG:
      if (r->valid & (1u << ru->reg)) {
        nr.r[i] = r->r[ru->reg];
        nr.valid |= bit;
      }
      break;
    default:  /* undefined, or an expression: unknown in the caller */
      break;
    }
  }
  if (!(nr.valid & (1u << LJP_CFI_RA))) return LJP_CFI_FAIL;
  if (nr.r[LJP_CFI_RA] == 0) return LJP_CFI_END;
  /* The caller's frame lies above this one on the same stack. */
  if (!(nr.valid & (1u << LJP_CFI_RSP)) ||
      !((r->valid & (1u << LJP_CFI_RSP)) && nr.r[LJP_CFI_RSP] > r->r[LJP_CFI_RSP]))
    return LJP_CFI_FAIL;
  *r = nr;
  return LJP_CFI_OK;
}

void ljp_cfi_regs(ljp_regs *r, const void *ucontext)
{
#if defined(__x86_64__)
  const mcontext_t *m = &((const ucontext_t *)ucontext)->uc_mcontext;
  static const uint8_t map[LJP_CFI_NREG] = {
    REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP,
    REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15,
    REG_RIP};
  int i;
  for (i = 0; i < LJP_CFI_NREG; i++) r->r[i] = (uintptr_t)m->gregs[map[i]];
  r->valid = (1u << LJP_CFI_NREG) - 1;
#else
  (void)ucontext;
  r->valid = 0;
#endif
}
