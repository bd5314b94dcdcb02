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
** reduced to the rules a step reads (crow) and remembered (with a
** generation of the loaded objects) for the whole range of addresses it
** holds for, in two fixed set-associative tables (below), so that the next
** samples anywhere in that range skip the search and the programs; a
** CIE's fields and initial row are remembered too (by its address), so
** that a row found anew parses only its FDE. A row whose rules are all
** saved values at the CFA (the common case) is stepped with one check of
** the stack's bounds.
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

static inline uint8_t rd_u8(rd *c)
{
  if (c->bad || c->p >= c->end) {
    c->bad = 1;
    return 0;
  }
  return *(const uint8_t *)c->p++;
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

static uint64_t rd_uleb_long(rd *c)
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

/* (one byte, most values in CFI: inline) */
static inline uint64_t rd_uleb(rd *c)
{
  uint8_t b;
  if (!c->bad && c->p < c->end && !((b = *(const uint8_t *)c->p) & 0x80)) {
    c->p++;
    return b;
  }
  return rd_uleb_long(c);
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
  uint8_t known;         /* its initial row taken from the CIE cache */
  int ops;               /* (known) the CFI instructions that row took */
  uintptr_t at;          /* where it lies */
  uintptr_t ins, end;    /* initial instructions (unless known) */
} cie;

struct row;
static int cc_get(uint64_t gen, uintptr_t hdr, uintptr_t at, cie *ci,
                  struct row *init, int *ops);

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

/* The FDE at a, with its CIE; 0, or -1 on anything unexpected. gen
** nonzero and init: the CIE and its initial row (ci->known) may come from
** the CIE cache. */
static int parse_fde(const ljp_ehtab *t, uintptr_t a, fde *fd, cie *ci,
                     uint64_t gen, struct row *init)
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
  ci->known = 0;
  if (gen && init && cc_get(gen, t->hdr, at - cptr, ci, init, &ci->ops))
    ci->known = 1;
  else if (parse_cie(t, at - cptr, ci) != 0)
    return -1;
  ci->at = at - cptr;
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
                    uintptr_t *next, uint64_t gen, struct row *init)
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
  if (parse_fde(t, t->hdr + (intptr_t)w[1], fd, ci, gen, init) != 0)
    return -1;
  if (pc < fd->lo || pc >= fd->hi) return -1;  /* a gap between entries */
  return 0;
}

int ljp_cfi_proc(const ljp_ehtab *t, uintptr_t pc, uintptr_t *lo,
                 uintptr_t *hi)
{
  fde fd;
  cie ci;
  if (find_fde(t, pc, &fd, &ci, NULL, 0, NULL) != 0) return 0;
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
** (set_loc), so no range is known. *moved set when the location moved. */
static int run_cfi(const ljp_ehtab *t, const cie *ci, uintptr_t ins,
                   uintptr_t end, uintptr_t loc, uintptr_t pc, row *cur,
                   const row *init, int *ops, uintptr_t *rlo, uintptr_t *rhi,
                   int *moved)
{
  row stack[CFI_STATES];
  int depth = 0;
  rd c;
#define AT_LOC(nl)                                             \
  do {                                                         \
    if ((nl) < loc) *rhi = 0;        /* not monotonic */       \
    *moved = 1;                                                \
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
    uint8_t op;
    uint64_t reg = 0, u;
    int64_t s;
    int32_t off;
    if (c.bad || ++*ops > CFI_MAX_OPS) return -1;
    op = *(const uint8_t *)c.p++;  /* (c.p < c.end, c.bad clear) */
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

/* -- Rows as the step reads them --------------------------------------------- */

/* A row found, reduced to what a step reads: the CFA rule, the registers
** with no rule (R_SAME), and, in register order, the n rules that give a
** value in the caller (R_OFFSET, R_VALOFF, R_REG; the others, undefined or
** an expression, leave the register unknown there). */
#define CROW_SIG 1       /* the entry is a signal frame ('S') */
#define CROW_RA_UNDEF 2  /* the return address is undefined: outermost */
/* Every rule is R_OFFSET, the last one the RA's, the stack pointer has no
** rule (it is the CFA), and the offsets lie in [omin, omax], both in
** int16_t: the step checks the stack bounds once (the common case). */
#define CROW_SIMPLE 4

typedef struct crow {
  uintptr_t fn;                 /* the start of the row's entry (FDE) */
  int32_t cfa_off;
  uint8_t cfa_reg, cfa_expr;    /* the row's */
  uint8_t flags, n;             /* CROW_*; the rules in rule[] */
  uint32_t same;                /* the registers with rule R_SAME */
  int32_t omin, omax;           /* CROW_SIMPLE: the rules' offsets */
  uint64_t rule[LJP_CFI_NREG];  /* RULE(register, how, value) */
} crow;

/* A rule in one word: the value (R_OFFSET, R_VALOFF: the offset from the
** CFA; R_REG: the register that holds it) in bits 0-31, the register in
** bits 32-39, how (R_*) in bits 40-47. */
#define RULE(reg, how, v) ((uint64_t)(uint32_t)(v) | (uint64_t)(reg) << 32 | \
                           (uint64_t)(how) << 40)
#define RULE_REG(w) ((unsigned)((w) >> 32) & 0xffu)
#define RULE_HOW(w) ((unsigned)((w) >> 40) & 0xffu)
#define RULE_VAL(w) ((int32_t)(uint32_t)(w))

static void crow_of(crow *o, const row *r, uintptr_t fn, int sig)
{
  unsigned i;
  int simple = 1;
  o->fn = fn;
  o->cfa_off = r->cfa_off;
  o->cfa_reg = r->cfa_reg;
  o->cfa_expr = r->cfa_expr;
  o->flags = (uint8_t)((sig ? CROW_SIG : 0) |
                       (r->r[LJP_CFI_RA].how == R_UNDEF ? CROW_RA_UNDEF : 0));
  o->n = 0;
  o->same = 0;
  o->omin = INT32_MAX;
  o->omax = INT32_MIN;
  for (i = 0; i < LJP_CFI_NREG; i++) {
    const rule *ru = &r->r[i];
    if (ru->how == R_SAME)
      o->same |= 1u << i;
    else if (ru->how == R_OFFSET || ru->how == R_VALOFF)
      o->rule[o->n++] = RULE(i, ru->how, ru->off);
    else if (ru->how == R_REG)
      o->rule[o->n++] = RULE(i, R_REG, ru->reg);
    if (ru->how == R_OFFSET) {
      if (ru->off < o->omin) o->omin = ru->off;
      if (ru->off > o->omax) o->omax = ru->off;
    } else if (ru->how != R_SAME) {
      simple = 0;
    }
  }
  if (simple && o->n && r->r[LJP_CFI_RA].how == R_OFFSET &&
      r->r[LJP_CFI_RSP].how == R_SAME && o->omin >= INT16_MIN &&
      o->omax <= INT16_MAX)
    o->flags |= CROW_SIMPLE;
  else
    o->omin = o->omax = 0;
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

/* Finding a row (a binary search, parsing the FDE and its CIE, running
** both programs) costs 1,000-3,000 instructions, and a program's samples
** keep landing in the same code. A row holds from one location of its
** entry's program to the next (run_cfi's range, clamped to its entry of
** the search table): every address in that range has the same row, found
** the same way. So a row found is kept with that range, [rlo, rhi), and
** serves every address in it: a sample at a new PC in a function body
** already seen hits. A row whose range is not known (a CIE program that
** moves the location, set_loc going backwards) is kept for its one
** address, [pc, pc + 1).
**
** Where: two fixed set-associative tables, indexed by a hash of the
** unwind table and the address's granule. A row of at most RC_SMALL bytes
** (most of them: a prologue's or an epilogue's steps, a small function's
** body) lies in at most two granules of the small table (256 bytes) and
** is filed under each; a longer one (a large function's body) is filed in
** the large table (granules of 4 KB) under those it covers, at most
** RC_SPAN of them, those around the address it was found for. A lookup
** probes the small table's set for the address, then the large table's:
** at most six entries, each compared on its key before anything else is
** copied. A full set's victim is chosen round robin (a counter per set,
** updated without a lock: two writers racing may pick the same victim,
** and then one of them does not write it).
**
** Keys: the unwind table's address, the range and the caller's generation
** of the list of loaded objects (nonzero, changed whenever an object is
** added or removed), so a row is never used for code that replaced the
** code it was found for. An entry holds at most RC_RULES rules: a row
** with more is not kept (found anew each time).
**
** Handlers on several threads may share an entry: it is a sequence lock.
** A writer claims an even sequence by compare-and-swap (never waits: a
** claimed entry is simply not written), writes, then publishes the next
** even number; a reader copies the entry and keeps the copy only when the
** sequence was even and unchanged around the copy (its second read an
** atomic update, so that the copy is ordered before it). Every word is
** read and written with relaxed atomic operations (plain moves on
** x86-64): a racing copy is discarded by the sequence check, and the race
** is one the compiler and the thread sanitizer know of. */
#define RC_RULES 10      /* the RA, six callee-saved registers, three more */
#define RC_SMALL_SHIFT 8
#define RC_SMALL (1u << RC_SMALL_SHIFT)  /* a small row's length, at most */
#define RC_SMALL_SETS_LOG2 8
#define RC_SMALL_WAYS 2
#define RC_LARGE_SHIFT 12
#define RC_LARGE_SETS_LOG2 6
#define RC_LARGE_WAYS 4
#define RC_SPAN 4        /* granules a large row is filed under, at most */

typedef struct rentry {
  uint32_t seq;                 /* odd while being written */
  uint64_t gen, hdr, rlo, rhi;  /* the key: the row holds for [rlo, rhi) */
  uint64_t fn, meta, same;      /* the crow's (RC_META, RC_SAME) */
  uint64_t rule[RC_RULES];
} rentry;

#define RC_META(c) ((uint64_t)(uint32_t)(c)->cfa_off |                      \
                    (uint64_t)(c)->cfa_reg << 32 |                          \
                    (uint64_t)(c)->cfa_expr << 40 |                         \
                    (uint64_t)(c)->flags << 48 | (uint64_t)(c)->n << 56)
#define RC_SAME(c) ((uint64_t)(c)->same |                                   \
                    (uint64_t)(uint16_t)(int16_t)(c)->omin << 32 |          \
                    (uint64_t)(uint16_t)(int16_t)(c)->omax << 48)

static rentry rc_small[(1u << RC_SMALL_SETS_LOG2) * RC_SMALL_WAYS];
static rentry rc_large[(1u << RC_LARGE_SETS_LOG2) * RC_LARGE_WAYS];
static uint32_t rc_small_next[1u << RC_SMALL_SETS_LOG2];
static uint32_t rc_large_next[1u << RC_LARGE_SETS_LOG2];

typedef struct rtab {
  rentry *e;         /* a set's ways together */
  uint32_t *next;    /* per set: the next victim when it is full */
  unsigned shift, sets_log2, ways;
} rtab;

static const rtab rc_tabs[2] = {
  {rc_small, rc_small_next, RC_SMALL_SHIFT, RC_SMALL_SETS_LOG2,
   RC_SMALL_WAYS},
  {rc_large, rc_large_next, RC_LARGE_SHIFT, RC_LARGE_SETS_LOG2,
   RC_LARGE_WAYS},
};

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* The set of granule g (an address >> tb->shift) of table hdr: its index. */
static inline uint32_t rc_set(const rtab *tb, uintptr_t hdr, uintptr_t g)
{
  uint64_t h = ((uint64_t)g ^ ((uint64_t)hdr << 7)) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(h >> (64 - tb->sets_log2));
}

/* The entry's row when it holds for pc in the table hdr of generation gen
** and no writer changed it during the copy. */
static inline int entry_get(rentry *m, uint64_t gen, uintptr_t hdr,
                            uintptr_t pc, crow *out)
{
  uint64_t fn, meta, same;
  uint32_t s0 = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE), s1, n, i;
  if ((s0 & 1) || LD(m->gen) != gen || LD(m->hdr) != hdr ||
      pc < LD(m->rlo) || pc >= LD(m->rhi))
    return 0;
  fn = LD(m->fn);
  meta = LD(m->meta);
  same = LD(m->same);
  n = (uint32_t)(meta >> 56);
  if (n > RC_RULES) return 0;  /* (a copy a writer tore) */
  for (i = 0; i < n; i++) out->rule[i] = LD(m->rule[i]);
  /* an update, not a load: the copy above cannot move below it */
  s1 = __atomic_fetch_add(&m->seq, 0, __ATOMIC_RELEASE);
  if (s0 != s1) return 0;
  out->fn = (uintptr_t)fn;
  out->cfa_off = (int32_t)(uint32_t)meta;
  out->cfa_reg = (uint8_t)(meta >> 32);
  out->cfa_expr = (uint8_t)(meta >> 40);
  out->flags = (uint8_t)(meta >> 48);
  out->n = (uint8_t)n;
  out->same = (uint32_t)same;
  out->omin = (int16_t)(uint16_t)(same >> 32);
  out->omax = (int16_t)(uint16_t)(same >> 48);
  return 1;
}

static void entry_put(rentry *m, uint64_t gen, uintptr_t hdr, uintptr_t rlo,
                      uintptr_t rhi, const crow *r)
{
  uint32_t s = __atomic_load_n(&m->seq, __ATOMIC_RELAXED), i;
  if ((s & 1) || !__atomic_compare_exchange_n(&m->seq, &s, s + 1, 0,
                                              __ATOMIC_ACQUIRE,
                                              __ATOMIC_RELAXED))
    return;  /* another writer has it; what follows stays after */
  ST(m->gen, gen);
  ST(m->hdr, (uint64_t)hdr);
  ST(m->rlo, (uint64_t)rlo);
  ST(m->rhi, (uint64_t)rhi);
  ST(m->fn, (uint64_t)r->fn);
  ST(m->meta, RC_META(r));
  ST(m->same, RC_SAME(r));
  for (i = 0; i < r->n; i++) ST(m->rule[i], r->rule[i]);
  __atomic_store_n(&m->seq, s + 2, __ATOMIC_RELEASE);
}

/* The row remembered for pc in the table hdr of generation gen: 1 and
** *out, else 0. */
static int rc_get(uint64_t gen, uintptr_t hdr, uintptr_t pc, crow *out)
{
  const rtab *tb;
  rentry *m;
  unsigned w;
  tb = &rc_tabs[0];
  m = &tb->e[rc_set(tb, hdr, pc >> RC_SMALL_SHIFT) * RC_SMALL_WAYS];
  for (w = 0; w < RC_SMALL_WAYS; w++)
    if (entry_get(&m[w], gen, hdr, pc, out)) return 1;
  tb = &rc_tabs[1];
  m = &tb->e[rc_set(tb, hdr, pc >> RC_LARGE_SHIFT) * RC_LARGE_WAYS];
  for (w = 0; w < RC_LARGE_WAYS; w++)
    if (entry_get(&m[w], gen, hdr, pc, out)) return 1;
  return 0;
}

/* File the row r for [rlo, rhi) under granule g of table tb: in a way
** that holds it already (nothing to do), else one of another generation
** (or empty), else the set's next victim. */
static void rc_file(const rtab *tb, uint64_t gen, uintptr_t hdr,
                    uintptr_t g, uintptr_t rlo, uintptr_t rhi, const crow *r)
{
  uint32_t set = rc_set(tb, hdr, g), k;
  rentry *m = &tb->e[set * tb->ways], *v = NULL;
  unsigned w;
  for (w = 0; w < tb->ways; w++) {
    uint64_t eg = LD(m[w].gen);
    if (eg == gen && LD(m[w].hdr) == hdr && LD(m[w].rlo) == rlo &&
        LD(m[w].rhi) == rhi)
      return;
    if (!v && eg != gen) v = &m[w];
  }
  if (!v) {
    k = LD(tb->next[set]);
    ST(tb->next[set], k + 1);
    v = &m[k % tb->ways];
  }
  entry_put(v, gen, hdr, rlo, rhi, r);
}

/* Remember the row r, which holds for [rlo, rhi) (pc in it) in the table
** hdr of generation gen (nonzero). */
static void rc_put(uint64_t gen, uintptr_t hdr, uintptr_t rlo, uintptr_t rhi,
                   uintptr_t pc, const crow *r)
{
  const rtab *tb;
  uintptr_t g, g0, g1, gp;
  if (r->n > RC_RULES || rhi <= rlo || pc < rlo || pc >= rhi) return;
  tb = &rc_tabs[rhi - rlo > RC_SMALL];
  g0 = rlo >> tb->shift;
  g1 = (rhi - 1) >> tb->shift;
  if (g1 - g0 >= RC_SPAN) {  /* the RC_SPAN granules around pc's */
    gp = pc >> tb->shift;
    g0 = gp > g0 ? gp - 1 : g0;
    if (g1 - g0 >= RC_SPAN) g1 = g0 + RC_SPAN - 1;
    else g0 = g1 - (RC_SPAN - 1);
  }
  for (g = g0; g <= g1; g++) rc_file(tb, gen, hdr, g, rlo, rhi, r);
}

/* -- CIEs remembered ------------------------------------------------------------ */

/* An object's FDEs share a few CIEs (GCC's one or two per object): a row
** found anew (a first sample in a function) would parse its FDE's CIE and
** run the CIE's initial instructions again, some 350 of the 1,500-2,500
** instructions of a row found. The CIE's fields and its initial row are
** kept by its address, in a direct-mapped table with the row cache's keys
** (generation, unwind table) and sequence lock: only a CIE whose program
** does not move the location (its row then the same for every FDE) and
** whose initial row has at most CC_RULES rules other than R_SAME. */
#define CC_SIZE_LOG2 5
#define CC_RULES 4

typedef struct centry {
  uint32_t seq;                 /* odd while being written */
  uint64_t gen, hdr, at;        /* the key: the CIE's address */
  uint64_t caf, daf, info, cfa, n;
  uint64_t rule[CC_RULES];      /* RULE(register, how, off or register) */
} centry;

static centry cc_tab[1u << CC_SIZE_LOG2];

static centry *cc_slot(uintptr_t hdr, uintptr_t at)
{
  uint64_t h = ((uint64_t)at ^ ((uint64_t)hdr << 7)) * 0x9e3779b97f4a7c15ull;
  return &cc_tab[h >> (64 - CC_SIZE_LOG2)];
}

/* The CIE at at (of the table hdr, generation gen), its initial row and
** the instructions that took (counted in a step's CFI_MAX_OPS), when
** remembered and no writer changed them during the copy. */
static int cc_get(uint64_t gen, uintptr_t hdr, uintptr_t at, cie *ci,
                  row *init, int *ops)
{
  centry *m = cc_slot(hdr, at);
  uint64_t caf, daf, info, cfa, n, w[CC_RULES];
  uint32_t s0 = __atomic_load_n(&m->seq, __ATOMIC_ACQUIRE), s1, i;
  if ((s0 & 1) || LD(m->gen) != gen || LD(m->hdr) != hdr || LD(m->at) != at)
    return 0;
  caf = LD(m->caf);
  daf = LD(m->daf);
  info = LD(m->info);
  cfa = LD(m->cfa);
  n = LD(m->n);
  if (n > CC_RULES) return 0;  /* (a copy a writer tore) */
  for (i = 0; i < n; i++) w[i] = LD(m->rule[i]);
  s1 = __atomic_fetch_add(&m->seq, 0, __ATOMIC_RELEASE);
  if (s0 != s1) return 0;
  for (i = 0; i < n; i++)
    if (RULE_REG(w[i]) >= LJP_CFI_NREG) return 0;
  ci->caf = caf;
  ci->daf = (int64_t)daf;
  ci->fde_enc = (uint8_t)info;
  ci->aug_z = (uint8_t)(info >> 8);
  ci->sig = (uint8_t)(info >> 16);
  ci->ra = (uint32_t)(info >> 24) & 0xff;
  *ops = (int)(uint32_t)(info >> 32);
  ci->ins = ci->end = 0;
  for (i = 0; i < LJP_CFI_NREG; i++) {  /* (not a memset: rep stosb) */
    static const rule none = {R_SAME, 0, 0};
    init->r[i] = none;
  }
  init->cfa_off = (int32_t)(uint32_t)cfa;
  init->cfa_reg = (uint8_t)(cfa >> 32);
  init->cfa_expr = (uint8_t)(cfa >> 40);
  for (i = 0; i < n; i++) {
    rule *ru = &init->r[RULE_REG(w[i])];
    ru->how = (uint8_t)RULE_HOW(w[i]);
    if (ru->how == R_REG) ru->reg = (uint8_t)RULE_VAL(w[i]);
    else ru->off = RULE_VAL(w[i]);
  }
  return 1;
}

/* Remember the CIE ci (parsed), its initial row init and the
** instructions that took (ops). */
static void cc_put(uint64_t gen, uintptr_t hdr, const cie *ci,
                   const row *init, int ops)
{
  centry *m;
  uint64_t w[CC_RULES];
  uint32_t s, i, n = 0;
  for (i = 0; i < LJP_CFI_NREG; i++) {
    const rule *ru = &init->r[i];
    if (ru->how == R_SAME) continue;
    if (n == CC_RULES) return;  /* not kept */
    w[n++] = RULE(i, ru->how, ru->how == R_REG ? (int32_t)ru->reg : ru->off);
  }
  m = cc_slot(hdr, ci->at);
  s = __atomic_load_n(&m->seq, __ATOMIC_RELAXED);
  if ((s & 1) || !__atomic_compare_exchange_n(&m->seq, &s, s + 1, 0,
                                              __ATOMIC_ACQUIRE,
                                              __ATOMIC_RELAXED))
    return;  /* another writer has it */
  ST(m->gen, gen);
  ST(m->hdr, (uint64_t)hdr);
  ST(m->at, (uint64_t)ci->at);
  ST(m->caf, ci->caf);
  ST(m->daf, (uint64_t)ci->daf);
  ST(m->info, (uint64_t)ci->fde_enc | (uint64_t)ci->aug_z << 8 |
              (uint64_t)ci->sig << 16 | (uint64_t)(ci->ra & 0xff) << 24 |
              (uint64_t)(uint32_t)ops << 32);
  ST(m->cfa, (uint64_t)(uint32_t)init->cfa_off |
             (uint64_t)init->cfa_reg << 32 | (uint64_t)init->cfa_expr << 40);
  ST(m->n, (uint64_t)n);
  for (i = 0; i < n; i++) ST(m->rule[i], w[i]);
  __atomic_store_n(&m->seq, s + 2, __ATOMIC_RELEASE);
}

/* The row in effect at lookup, found from the unwind table (and kept
** when gen is nonzero): 0, or -1. Not inlined: its frame (two rows) stays
** off the path of a row remembered. */
static __attribute__((noinline)) int find_row_anew(const ljp_ehtab *t,
                                                   uintptr_t lookup,
                                                   uint64_t gen, crow *out)
{
  fde fd;
  cie ci;
  row init, cur;
  int ops = 0, moved = 0;
  uintptr_t next, clo, chi, rlo, rhi;
  if (find_fde(t, lookup, &fd, &ci, &next, gen, &init) != 0) return -1;
  clo = fd.lo;
  chi = fd.hi;
  if (ci.known) {
    ops = ci.ops;
  } else {  /* the CIE's program: its initial row */
    __builtin_memset(&init, 0, sizeof(init));
    init.cfa_reg = LJP_CFI_RSP;
    if (run_cfi(t, &ci, ci.ins, ci.end, fd.lo, lookup, &init, NULL, &ops,
                &clo, &chi, &moved) != 0)
      return -1;
    if (gen && !moved) cc_put(gen, t->hdr, &ci, &init, ops);
  }
  cur = init;
  rlo = fd.lo;
  rhi = fd.hi < next ? fd.hi : next;
  if (run_cfi(t, &ci, fd.ins, fd.end, fd.lo, lookup, &cur, &init, &ops,
              &rlo, &rhi, &moved) != 0)
    return -1;
  crow_of(out, &cur, fd.lo, ci.sig);
  if (gen) {
    /* (a CIE program that moves the location: no range) */
    if (clo == fd.lo && chi == fd.hi && rhi && rlo <= lookup && lookup < rhi)
      rc_put(gen, t->hdr, rlo, rhi, lookup, out);
    else
      rc_put(gen, t->hdr, lookup, lookup + 1, lookup, out);
  }
  return 0;
}

/* The row in effect at lookup: 0, or -1. */
static inline int find_row(const ljp_ehtab *t, uintptr_t lookup,
                           uint64_t gen, crow *out)
{
  if (gen && t && t->hdr && rc_get(gen, t->hdr, lookup, out)) return 0;
  return find_row_anew(t, lookup, gen, out);
}

/* -- One step ------------------------------------------------------------------ */

/* The step by the row cur from the frame *r: LJP_CFI_*. */
static int step_row(const crow *cur, ljp_regs *r, const ljp_stack *st)
{
  uintptr_t cfa, v[LJP_CFI_NREG], ra = 0, sp = 0;
  uint32_t valid, got = 0, clear;
  unsigned k;
  if (cur->flags & CROW_RA_UNDEF) return LJP_CFI_END;
  if (cur->cfa_expr == 1 || cur->cfa_reg >= LJP_CFI_NREG ||
      !(r->valid & (1u << cur->cfa_reg)))
    return LJP_CFI_FAIL;
  cfa = r->r[cur->cfa_reg] + (uintptr_t)(intptr_t)cur->cfa_off;
  if (cur->cfa_expr) {  /* a PLT stub's: where in the stub is the pc? */
    if (!(r->valid & (1u << LJP_CFI_RA))) return LJP_CFI_FAIL;
    if ((r->r[LJP_CFI_RA] & 15) >= (uintptr_t)(cur->cfa_expr - 2)) cfa += 8;
  }
  if ((cur->flags & CROW_SIMPLE) && cur->n > 0) {
    /* every rule a saved value at the CFA + [omin, omax]: one check of
    ** the stack's bounds for all of them, then the same as below */
    uintptr_t amin = cfa + (uintptr_t)(intptr_t)cur->omin;
    uintptr_t amax = cfa + (uintptr_t)(intptr_t)cur->omax;
    if (amin >= st->lo && amin <= amax && amax <= st->hi &&
        st->hi - amax >= sizeof(uintptr_t)) {
      /* every read succeeds: the checks first, then the writes (the
      ** rules read no register), the RA's rule the last */
      __builtin_memcpy(&ra, (const void *)(cfa + (uintptr_t)(intptr_t)
                                           RULE_VAL(cur->rule[cur->n - 1])),
                       sizeof(uintptr_t));
      if (ra == 0) return LJP_CFI_END;
      if (!((r->valid & (1u << LJP_CFI_RSP)) && cfa > r->r[LJP_CFI_RSP]))
        return LJP_CFI_FAIL;
      valid = (cur->same & CALLEE_SAVED & r->valid) | (1u << LJP_CFI_RSP) |
              (1u << LJP_CFI_RA);
      for (k = 0; k + 1 < cur->n; k++) {  /* registers 0-15 */
        uint64_t w = cur->rule[k];
        unsigned i = RULE_REG(w) & 15;
        valid |= 1u << i;
        __builtin_memcpy(&r->r[i], (const void *)(cfa + (uintptr_t)(intptr_t)
                                                  RULE_VAL(w)),
                         sizeof(uintptr_t));
      }
      for (clear = r->valid & ~valid; clear; clear &= clear - 1)
        r->r[__builtin_ctz(clear)] = 0;
      r->r[LJP_CFI_RA] = ra;
      r->r[LJP_CFI_RSP] = cfa;
      r->valid = valid;
      return LJP_CFI_OK;
    }
  }
  /* Registers with no rule (R_SAME): the stack pointer is the CFA, a
  ** callee-saved one keeps its value; the others are unknown. Then the
  ** registers with a rule that gives a value (the row's rules), each
  ** found before anything is written, so that a rule reads the callee's
  ** registers and a failed step leaves *r as it was. */
  valid = cur->same & CALLEE_SAVED & r->valid;
  if (cur->same & (1u << LJP_CFI_RSP)) {
    valid |= 1u << LJP_CFI_RSP;
    sp = cfa;
  }
  for (k = 0; k < cur->n; k++) {
    uint64_t w = cur->rule[k];
    unsigned i = RULE_REG(w), from;
    uint32_t bit;
    if (i >= LJP_CFI_NREG) return LJP_CFI_FAIL;
    bit = 1u << i;
    switch (RULE_HOW(w)) {
    case R_OFFSET:
      if (!stack_read(st, cfa + (uintptr_t)(intptr_t)RULE_VAL(w), &v[k])) {
        if (i == LJP_CFI_RA || (CALLEE_SAVED & bit))
          return LJP_CFI_FAIL;  /* a saved value we cannot read */
        continue;
      }
      break;
    case R_VALOFF:
      v[k] = cfa + (uintptr_t)(intptr_t)RULE_VAL(w);
      break;
    case R_REG:
      from = (unsigned)RULE_VAL(w);
      if (from >= LJP_CFI_NREG || !(r->valid & (1u << from))) continue;
      v[k] = r->r[from];
      break;
    default:
      continue;
    }
    got |= 1u << k;
    valid |= bit;
    if (i == LJP_CFI_RA) ra = v[k];
    else if (i == LJP_CFI_RSP) sp = v[k];
  }
  if (!(valid & (1u << LJP_CFI_RA))) return LJP_CFI_FAIL;
  if (ra == 0) return LJP_CFI_END;
  /* The caller's frame lies above this one on the same stack. */
  if (!(valid & (1u << LJP_CFI_RSP)) ||
      !((r->valid & (1u << LJP_CFI_RSP)) && sp > r->r[LJP_CFI_RSP]))
    return LJP_CFI_FAIL;
  /* The caller's registers: those no longer known read as 0. */
  for (clear = r->valid & ~valid; clear; clear &= clear - 1)
    r->r[__builtin_ctz(clear)] = 0;
  for (; got; got &= got - 1) {
    k = (unsigned)__builtin_ctz(got);
    r->r[RULE_REG(cur->rule[k])] = v[k];
  }
  r->r[LJP_CFI_RSP] = sp;
  r->valid = valid;
  return LJP_CFI_OK;
}

int ljp_cfi_step(const ljp_ehtab *t, ljp_regs *r, uintptr_t lookup,
                 const ljp_stack *st, uint64_t gen, int *sigframe,
                 uintptr_t *fn)
{
  crow cur;
  *sigframe = 0;
  if (find_row(t, lookup, gen, &cur) != 0) return LJP_CFI_FAIL;
  if (fn) *fn = cur.fn;
  *sigframe = cur.flags & CROW_SIG;
  return step_row(&cur, r, st);
}

void ljp_cfi_regs(ljp_regs *r, const void *ucontext)
{
#if defined(__x86_64__)
  const mcontext_t *m = &((const ucontext_t *)ucontext)->uc_mcontext;
  /* (one move each, not a loop over a table: once per signal) */
#define CFI_REG(i, g) r->r[i] = (uintptr_t)m->gregs[g]
  CFI_REG(0, REG_RAX); CFI_REG(1, REG_RDX); CFI_REG(2, REG_RCX);
  CFI_REG(3, REG_RBX); CFI_REG(4, REG_RSI); CFI_REG(5, REG_RDI);
  CFI_REG(6, REG_RBP); CFI_REG(7, REG_RSP); CFI_REG(8, REG_R8);
  CFI_REG(9, REG_R9); CFI_REG(10, REG_R10); CFI_REG(11, REG_R11);
  CFI_REG(12, REG_R12); CFI_REG(13, REG_R13); CFI_REG(14, REG_R14);
  CFI_REG(15, REG_R15); CFI_REG(16, REG_RIP);
#undef CFI_REG
  r->valid = (1u << LJP_CFI_NREG) - 1;
#else
  (void)ucontext;
  r->valid = 0;
#endif
}
