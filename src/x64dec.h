/*
** An x86-64 instruction length decoder and classifier (x64dec.c), for
** reading LuaJIT's trace machine code (mcmap.c): where each instruction
** ends, what kind it is (call, jump, float or integer arithmetic, move)
** and, for relative branches, where it goes.
**
** Pure: a function of the bytes given and their address; no allocation,
** no global state, never reads past p[n). Usable in any context.
*/
#ifndef LJP_X64DEC_H
#define LJP_X64DEC_H

#include <stddef.h>
#include <stdint.h>

/* Classes (ljp_x64ins.cls). */
enum {
  LJP_X64_OTHER = 0,  /* nop, push/pop, flags, system, x87, vector ops... */
  LJP_X64_MOVE,       /* mov/movzx/movsx/cmov/xchg, SSE moves: loads,
                         stores and register moves */
  LJP_X64_INT,        /* integer add/sub/adc/sbb/and/or/xor/imul/lea/
                         shifts/neg/not/inc/dec/div, BMI2 shifts */
  LJP_X64_CMP,        /* integer cmp/test, bt */
  LJP_X64_FLT,        /* scalar/packed float op: ljp_x64ins.fop */
  LJP_X64_CALL,       /* call rel32 (target) or call r/m (no target) */
  LJP_X64_JCC,        /* conditional branch (target) */
  LJP_X64_JMP,        /* jmp rel (target) or jmp r/m (no target) */
  LJP_X64_RET,
  LJP_X64_SETCC       /* setcc */
};

/* Float ops (ljp_x64ins.fop, for LJP_X64_FLT). */
enum {
  LJP_XF_NONE = 0,
  LJP_XF_ADD, LJP_XF_SUB, LJP_XF_MUL, LJP_XF_DIV, LJP_XF_SQRT,
  LJP_XF_MIN, LJP_XF_MAX,
  LJP_XF_CVT,         /* cvtsi2sd, cvttsd2si, cvtsd2ss, ... */
  LJP_XF_CMP,         /* ucomisd, comisd, cmpsd */
  LJP_XF_ROUND,       /* roundsd */
  LJP_XF_LOGIC        /* andpd, andnpd, orpd, xorpd (abs, neg) */
};

typedef struct ljp_x64ins {
  uint8_t len;        /* bytes; 0: not decoded */
  uint8_t cls;
  uint8_t fop;
  uint8_t has_target; /* target valid (relative call, jcc or jmp) */
  uint8_t modrm_reg;  /* ModRM reg field (with REX.R), 0xff if none */
  uint8_t imm64;      /* mov r64, imm64 (REX.W B8+r): imm holds it */
  uint8_t opreg;      /* for imm64 and ModRM mod=3: the register; 0xff
                         for a memory operand */
  uint8_t map;        /* opcode map: 0 one-byte, 1 0F, 2 0F38, 3 0F3A
                         (VEX/EVEX: their map) */
  uint8_t op;         /* the opcode byte in that map */
  uint64_t target;    /* absolute target (addr + len + rel) */
  uint64_t imm;       /* the 64-bit immediate of mov r64, imm64 */
} ljp_x64ins;

/* Decode the instruction at p[0..n), which lies at address addr. Returns
** its length (1..15) with *out filled, or 0 when the bytes are not a
** valid instruction in 64-bit mode or run past n. */
int ljp_x64_decode(const uint8_t *p, size_t n, uint64_t addr, ljp_x64ins *out);

#endif
