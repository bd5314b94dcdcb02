/*
** x86-64 instruction length decoder and classifier (x64dec.h).
**
** Decoding follows the Intel SDM's encoding (volume 2, chapter 2 and
** appendix A): legacy prefixes, REX, VEX (C4/C5) and EVEX (62) prefixes,
** the one-byte, 0F, 0F38 and 0F3A opcode maps; ModRM, SIB, displacement
** and immediate sizes. It is proven against binutils' objdump on the
** machine code of LuaJIT traces and the text of libluajit and libc
** (tests/lua/test_x64dec.lua): every instruction boundary and every
** relative branch target the same.
**
** Pure: no allocation, no global state; never reads past p[n).
*/
#include <string.h>

#include "x64dec.h"

/* Immediate kinds. */
#define I_NONE 0
#define I_B 1       /* imm8 */
#define I_W 2       /* imm16 */
#define I_Z 3       /* imm16 with 66, else imm32 */
#define I_V 4       /* imm64 with REX.W, imm16 with 66, else imm32 */
#define I_ENTER 5   /* imm16 + imm8 */
#define I_MOFFS 6   /* 8-byte address (4 with 67) */
#define I_R8 7      /* rel8 */
#define I_R32 8     /* rel32 */

/* One-byte map: ModRM present? */
static int map0_modrm(int op)
{
  if (op < 0x40) return (op & 7) < 4;
  if (op == 0x63 || op == 0x69 || op == 0x6b) return 1;
  if (op >= 0x80 && op <= 0x8f) return 1;
  if (op == 0xc0 || op == 0xc1 || op == 0xc6 || op == 0xc7) return 1;
  if (op >= 0xd0 && op <= 0xd3) return 1;
  if (op >= 0xd8 && op <= 0xdf) return 1;
  if (op == 0xf6 || op == 0xf7 || op == 0xfe || op == 0xff) return 1;
  return 0;
}

static int map0_valid(int op)
{
  switch (op) {
  case 0x06: case 0x07: case 0x0e: case 0x16: case 0x17: case 0x1e:
  case 0x1f: case 0x27: case 0x2f: case 0x37: case 0x3f: case 0x60:
  case 0x61: case 0x82: case 0x9a: case 0xce: case 0xd4: case 0xd5:
  case 0xd6: case 0xea:
    return 0;
  default:
    return 1;
  }
}

static int map0_imm(int op, int reg)
{
  if (op < 0x40) {
    if ((op & 7) == 4) return I_B;
    if ((op & 7) == 5) return I_Z;
    return I_NONE;
  }
  if (op >= 0x70 && op <= 0x7f) return I_R8;
  if (op >= 0xb0 && op <= 0xb7) return I_B;
  if (op >= 0xb8 && op <= 0xbf) return I_V;
  if (op >= 0xe0 && op <= 0xe3) return I_R8;
  switch (op) {
  case 0x68: case 0x69: case 0x81: case 0xa9: case 0xc7: return I_Z;
  case 0x6a: case 0x6b: case 0x80: case 0x83: case 0xa8: case 0xc0:
  case 0xc1: case 0xc6: case 0xcd: case 0xe4: case 0xe5: case 0xe6:
  case 0xe7:
    return I_B;
  case 0xc2: case 0xca: return I_W;
  case 0xc8: return I_ENTER;
  case 0xa0: case 0xa1: case 0xa2: case 0xa3: return I_MOFFS;
  case 0xe8: case 0xe9: return I_R32;
  case 0xeb: return I_R8;
  case 0xf6: return reg < 2 ? I_B : I_NONE;
  case 0xf7: return reg < 2 ? I_Z : I_NONE;
  default: return I_NONE;
  }
}

/* 0F map. */
static int map1_modrm(int op)
{
  if (op >= 0x80 && op <= 0x8f) return 0;
  if (op >= 0xc8 && op <= 0xcf) return 0;
  if (op >= 0x30 && op <= 0x37) return 0;
  switch (op) {
  case 0x05: case 0x06: case 0x07: case 0x08: case 0x09: case 0x0b:
  case 0x0e: case 0x77: case 0xa0: case 0xa1: case 0xa2: case 0xa8:
  case 0xa9: case 0xaa:
    return 0;
  default:
    return 1;
  }
}

static int map1_valid(int op)
{
  switch (op) {
  case 0x04: case 0x0a: case 0x0c: case 0x24: case 0x25: case 0x26:
  case 0x27: case 0x36: case 0x39: case 0x3b: case 0x3c: case 0x3d:
  case 0x3e: case 0x3f: case 0x7a: case 0x7b: case 0xa6: case 0xa7:
    return 0;
  default:
    return 1;
  }
}

static int map1_imm(int op)
{
  if (op >= 0x80 && op <= 0x8f) return I_R32;
  switch (op) {
  case 0x70: case 0x71: case 0x72: case 0x73: case 0xa4: case 0xac:
  case 0xba: case 0xc2: case 0xc4: case 0xc5: case 0xc6: case 0x0f:
    return I_B;
  default:
    return I_NONE;
  }
}

/* Float op of a 0F-map opcode (legacy or VEX/EVEX map 1). */
static int map1_fop(int op)
{
  switch (op) {
  case 0x51: return LJP_XF_SQRT;
  case 0x54: case 0x55: case 0x56: case 0x57: return LJP_XF_LOGIC;
  case 0x58: return LJP_XF_ADD;
  case 0x59: return LJP_XF_MUL;
  case 0x5c: return LJP_XF_SUB;
  case 0x5d: return LJP_XF_MIN;
  case 0x5e: return LJP_XF_DIV;
  case 0x5f: return LJP_XF_MAX;
  case 0x2a: case 0x2c: case 0x2d: case 0x5a: case 0x5b: case 0xe6:
    return LJP_XF_CVT;
  case 0x2e: case 0x2f: case 0xc2: return LJP_XF_CMP;
  default: return LJP_XF_NONE;
  }
}

static void classify0(ljp_x64ins *o, int op, int reg)
{
  int c = LJP_X64_OTHER;
  if (op < 0x40 && (op & 7) < 6)
    c = (op >> 3) == 7 ? LJP_X64_CMP : LJP_X64_INT;
  else if (op >= 0x70 && op <= 0x7f) c = LJP_X64_JCC;
  else if (op >= 0x91 && op <= 0x97) c = LJP_X64_MOVE;
  else if (op >= 0xb0 && op <= 0xbf) c = LJP_X64_MOVE;
  else if (op >= 0xe0 && op <= 0xe3) c = LJP_X64_JCC;
  else if (op >= 0xd0 && op <= 0xd3) c = LJP_X64_INT;
  else switch (op) {
  case 0x63: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8a:
  case 0x8b: case 0x8c: case 0x8e: case 0xa0: case 0xa1: case 0xa2:
  case 0xa3: case 0xc6: case 0xc7:
    c = LJP_X64_MOVE; break;
  case 0x69: case 0x6b: case 0x8d: case 0x98: case 0x99: case 0xc0:
  case 0xc1: case 0xfe:
    c = LJP_X64_INT; break;
  case 0x80: case 0x81: case 0x83:
    c = reg == 7 ? LJP_X64_CMP : LJP_X64_INT; break;
  case 0x84: case 0x85: case 0xa8: case 0xa9:
    c = LJP_X64_CMP; break;
  case 0xc2: case 0xc3: c = LJP_X64_RET; break;
  case 0xe8: c = LJP_X64_CALL; break;
  case 0xe9: case 0xeb: c = LJP_X64_JMP; break;
  case 0xf6: case 0xf7: c = reg < 2 ? LJP_X64_CMP : LJP_X64_INT; break;
  case 0xff:
    c = reg < 2 ? LJP_X64_INT : reg < 4 ? LJP_X64_CALL
      : reg < 6 ? LJP_X64_JMP : LJP_X64_OTHER;
    break;
  default: break;
  }
  o->cls = (uint8_t)c;
}

static void classify1(ljp_x64ins *o, int op, int reg)
{
  int f = map1_fop(op), c = LJP_X64_OTHER;
  if (f) {
    o->fop = (uint8_t)f;
    o->cls = LJP_X64_FLT;
    return;
  }
  if (op >= 0x80 && op <= 0x8f) c = LJP_X64_JCC;
  else if (op >= 0x90 && op <= 0x9f) c = LJP_X64_SETCC;
  else if (op >= 0x40 && op <= 0x4f) c = LJP_X64_MOVE;
  else if (op >= 0xc8 && op <= 0xcf) c = LJP_X64_INT;
  else switch (op) {
  case 0x10: case 0x11: case 0x12: case 0x13: case 0x16: case 0x17:
  case 0x28: case 0x29: case 0x2b: case 0x6e: case 0x6f: case 0x7e:
  case 0x7f: case 0xb6: case 0xb7: case 0xbe: case 0xbf: case 0xd6:
    c = LJP_X64_MOVE; break;
  case 0xa3: c = LJP_X64_CMP; break;
  case 0xba: c = reg == 4 ? LJP_X64_CMP : LJP_X64_INT; break;
  case 0xa4: case 0xa5: case 0xab: case 0xac: case 0xad: case 0xaf:
  case 0xb3: case 0xb8: case 0xbb: case 0xbc: case 0xbd: case 0xc0:
  case 0xc1:
    c = LJP_X64_INT; break;
  default: break;
  }
  o->cls = (uint8_t)c;
}

static int decode1(const uint8_t *p, size_t n, uint64_t addr, ljp_x64ins *o);

/* fwait (9B) before fnstcw/fnstenv/fnstsw/fnsave/fnclex/fninit is one
** instruction to assemblers and disassemblers (fstcw, fstsw, ...): kept
** whole, as objdump shows it. */
static int wait_form(const uint8_t *p, size_t n)
{
  int reg;
  if (n < 2) return 0;
  reg = (p[1] >> 3) & 7;
  switch (p[0]) {
  case 0xd9: return p[1] < 0xc0 && reg >= 6;
  case 0xdd: return p[1] < 0xc0 && reg >= 6;
  case 0xdb: return p[1] == 0xe2 || p[1] == 0xe3;
  case 0xdf: return p[1] == 0xe0;
  default: return 0;
  }
}

int ljp_x64_decode(const uint8_t *p, size_t n, uint64_t addr, ljp_x64ins *o)
{
  if (n >= 3 && p[0] == 0x9b && wait_form(p + 1, n - 1)) {
    int len = decode1(p + 1, n - 1, addr + 1, o);
    if (len && len < 15) {
      o->len = (uint8_t)(len + 1);
      return len + 1;
    }
  }
  return decode1(p, n, addr, o);
}

static int decode1(const uint8_t *p, size_t n, uint64_t addr, ljp_x64ins *o)
{
  size_t i = 0, lim = n < 15 ? n : 15;
  int o16 = 0, a32 = 0, rex = 0, map = 0, op, vex = 0, modrm = -1;
  int has_modrm, imm, reg = 0, immlen = 0;
  memset(o, 0, sizeof(*o));
  o->modrm_reg = 0xff;
  o->opreg = 0xff;
  /* Legacy prefixes (any order, any number up to the length limit). */
  for (;; i++) {
    if (i >= lim) return 0;
    switch (p[i]) {
    case 0x66: o16 = 1; continue;
    case 0x67: a32 = 1; continue;
    case 0xf0: case 0xf2: case 0xf3: case 0x2e: case 0x36: case 0x3e:
    case 0x26: case 0x64: case 0x65:
      continue;
    default: break;
    }
    break;
  }
  if ((p[i] & 0xf0) == 0x40) {      /* REX: must come just before the opcode */
    rex = p[i++];
    if (i >= lim) return 0;
  }
  op = p[i++];
  if (op == 0xc4 || op == 0xc5 || op == 0x62) {
    int b1, b2;
    if (rex) return 0;
    if (op == 0xc5) {
      if (i >= lim) return 0;
      b1 = p[i++];
      map = 1;
      if (!(b1 & 0x80)) rex |= 4;
    } else if (op == 0xc4) {
      if (i + 1 >= lim) return 0;
      b1 = p[i++];
      b2 = p[i++];
      map = b1 & 0x1f;
      if (map < 1 || map > 3) return 0;
      if (!(b1 & 0x80)) rex |= 4;
      if (b2 & 0x80) rex |= 8;
    } else {                        /* EVEX */
      if (i + 2 >= lim) return 0;
      b1 = p[i++];
      b2 = p[i++];
      i++;
      if (!(b2 & 4)) return 0;
      map = b1 & 7;
      if (!(map == 1 || map == 2 || map == 3 || map == 5 || map == 6))
        return 0;
      if (!(b1 & 0x80)) rex |= 4;
      if (b2 & 0x80) rex |= 8;
    }
    vex = op == 0x62 ? 2 : 1;
    if (i >= lim) return 0;
    op = p[i++];
    /* VEX: ModRM always but for vzeroupper/vzeroall (map 1, 77). */
    has_modrm = !(vex == 1 && map == 1 && op == 0x77);
    imm = map == 3 ? I_B : (map == 1 && ((op >= 0x70 && op <= 0x73) ||
                                         op == 0xc2 || op == 0xc4 ||
                                         op == 0xc5 || op == 0xc6))
                               ? I_B : I_NONE;
  } else if (op == 0x0f) {
    if (i >= lim) return 0;
    op = p[i++];
    if (op == 0x38 || op == 0x3a) {
      map = op == 0x38 ? 2 : 3;
      if (i >= lim) return 0;
      op = p[i++];
      has_modrm = 1;
      imm = map == 3 ? I_B : I_NONE;
    } else {
      map = 1;
      if (!map1_valid(op)) return 0;
      has_modrm = map1_modrm(op);
      imm = map1_imm(op);
    }
  } else {
    if (!map0_valid(op)) return 0;
    has_modrm = map0_modrm(op);
    imm = I_NONE;               /* after ModRM (F6/F7 depend on reg) */
  }
  if (has_modrm) {
    int mod, rm;
    if (i >= lim) return 0;
    modrm = p[i++];
    mod = modrm >> 6;
    rm = modrm & 7;
    reg = (modrm >> 3) & 7;
    o->modrm_reg = (uint8_t)(reg | ((rex & 4) << 1));
    if (mod != 3) {
      if (rm == 4) {
        int sib;
        if (i >= lim) return 0;
        sib = p[i++];
        if (mod == 0 && (sib & 7) == 5) i += 4;
      } else if (mod == 0 && rm == 5) {
        i += 4;
      }
      if (mod == 1) i += 1;
      else if (mod == 2) i += 4;
    } else {
      o->opreg = (uint8_t)(rm | ((rex & 1) << 3));
    }
  }
  if (!vex && map == 0) imm = map0_imm(op, reg);
  switch (imm) {
  case I_B: case I_R8: immlen = 1; break;
  case I_W: immlen = 2; break;
  case I_Z: immlen = o16 ? 2 : 4; break;
  case I_V: immlen = (rex & 8) ? 8 : o16 ? 2 : 4; break;
  case I_ENTER: immlen = 3; break;
  case I_MOFFS: immlen = a32 ? 4 : 8; break;
  case I_R32: immlen = 4; break;
  default: break;
  }
  if (i + (size_t)immlen > lim) return 0;
  /* Classes. */
  if (map == 0) {
    classify0(o, op, reg);
    if (op >= 0xb8 && op <= 0xbf && (rex & 8)) {
      o->imm64 = 1;
      o->opreg = (uint8_t)((op & 7) | ((rex & 1) << 3));
      memcpy(&o->imm, p + i, 8);
    }
  } else if (map == 1) {
    classify1(o, op, reg);
  } else if (map == 2) {
    /* BMI/BMI2 (VEX): andn, bzhi/pdep/pext, mulx, shlx/sarx/shrx/bextr,
    ** blsr/blsmsk/blsi; legacy movbe/crc32. */
    if (vex == 1 && op >= 0xf2 && op <= 0xf7) o->cls = LJP_X64_INT;
    else if (!vex && (op == 0xf0 || op == 0xf1))
      o->cls = (uint8_t)(p[0] == 0xf2 ? LJP_X64_INT : LJP_X64_MOVE);
  } else if (map == 3) {
    if (op >= 0x08 && op <= 0x0b) {
      o->cls = LJP_X64_FLT;
      o->fop = LJP_XF_ROUND;
    } else if (vex == 1 && op == 0xf0) {
      o->cls = LJP_X64_INT;     /* rorx */
    }
  }
  if (imm == I_R8 || imm == I_R32) {
    int64_t rel;
    if (imm == I_R8) rel = (int8_t)p[i];
    else { int32_t r32; memcpy(&r32, p + i, 4); rel = r32; }
    o->has_target = 1;
    o->target = addr + i + (size_t)immlen + (uint64_t)rel;
  }
  i += (size_t)immlen;
  o->map = (uint8_t)map;
  o->op = (uint8_t)op;
  o->len = (uint8_t)i;
  return (int)i;
}
