/*
** The x86-64 decoder (src/x64dec.c) against binutils' objdump, used by
** tests/lua/test_x64dec.lua:
**
**   objdump -D -b binary -m i386:x86-64 --insn-width=16 --adjust-vma=VMA FILE |
**     x64dec_oracle FILE VMA
**
** For every instruction objdump lists, the decoder is run at the same
** offset: the lengths must be equal, a relative call/jump objdump shows
** must have the same target, and the classes must agree with objdump's
** mnemonics (call, jmp, jcc, ret, the scalar float ops). Where objdump
** says "(bad)" the decoder must refuse too (or the line is counted as
** bad_both/bad_ours). Prints one line of counts; mismatches (the first 20)
** on stderr; exit status 1 on any mismatch.
**
** Traces (records of tests/lua/mcode_dump.lua: "tr addr size\n" and the
** bytes): `x64dec_oracle --traces IN.mc OUT.bin` writes their bytes end to
** end into OUT.bin; `objdump ... --adjust-vma=0 OUT.bin | x64dec_oracle
** --traces IN.mc` then checks each instruction at its trace's own address
** (targets outside the trace, such as exit stubs, included) and within its
** trace's bytes only (an instruction across two traces is a mismatch).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/x64dec.h"

static const char *const skipw[] = {
  "lock", "rep", "repz", "repnz", "repe", "repne", "data16", "data32",
  "addr32", "cs", "ds", "es", "ss", "fs", "gs", "bnd", "notrack", "xacquire",
  "xrelease", "{vex}", "{vex3}", "{evex}", NULL
};

/* The mnemonic: the first word that is not a prefix. */
static void mnemonic(const char *s, char *out, size_t n)
{
  for (;;) {
    size_t k = 0;
    int i, skip = 0;
    while (*s == ' ' || *s == '\t') s++;
    while (s[k] && s[k] != ' ' && s[k] != '\t' && s[k] != '\n') k++;
    if (!k) { out[0] = 0; return; }
    for (i = 0; skipw[i]; i++)
      if (strlen(skipw[i]) == k && !strncmp(s, skipw[i], k)) skip = 1;
    if (!strncmp(s, "rex", 3) && k >= 3) skip = 1;
    if (!skip) {
      if (k >= n) k = n - 1;
      memcpy(out, s, k);
      out[k] = 0;
      return;
    }
    s += k;
  }
}

static int fop_of(const char *m)
{
  static const struct { const char *p; int f; } t[] = {
    {"addsd", LJP_XF_ADD}, {"subsd", LJP_XF_SUB}, {"mulsd", LJP_XF_MUL},
    {"divsd", LJP_XF_DIV}, {"sqrtsd", LJP_XF_SQRT}, {"minsd", LJP_XF_MIN},
    {"maxsd", LJP_XF_MAX}, {"ucomisd", LJP_XF_CMP}, {"comisd", LJP_XF_CMP},
    {"cvtsi2sd", LJP_XF_CVT}, {"cvttsd2si", LJP_XF_CVT},
    {"cvtsd2si", LJP_XF_CVT}, {"cvtsd2ss", LJP_XF_CVT},
    {"cvtss2sd", LJP_XF_CVT}, {"roundsd", LJP_XF_ROUND},
    {"xorpd", LJP_XF_LOGIC}, {"andpd", LJP_XF_LOGIC},
    {"andnpd", LJP_XF_LOGIC}, {"orpd", LJP_XF_LOGIC},
    {"addss", LJP_XF_ADD}, {"subss", LJP_XF_SUB}, {"mulss", LJP_XF_MUL},
    {"divss", LJP_XF_DIV}, {NULL, 0}
  };
  int i;
  if (m[0] == 'v') m++;
  for (i = 0; t[i].p; i++) {
    size_t k = strlen(t[i].p);
    /* cvtsi2sd may carry a size suffix (cvtsi2sdl/q) */
    if (!strncmp(m, t[i].p, k) && (m[k] == 0 || ((m[k] == 'l' || m[k] == 'q') && m[k + 1] == 0)))
      return t[i].f;
  }
  return -1;
}

typedef struct region { long start, end; unsigned long long addr; } region;

/* Reads the records of file name into *buf, the regions into *rg. */
static long load_traces(const char *name, unsigned char **buf, region **rg,
                        int *nrg)
{
  FILE *f = fopen(name, "rb");
  long size = 0, cap = 1 << 20;
  int n = 0, rcap = 1024;
  unsigned long long addr;
  long len;
  int tr;
  if (!f) { perror(name); exit(2); }
  *buf = malloc((size_t)cap);
  *rg = malloc(sizeof(region) * (size_t)rcap);
  while (fscanf(f, "%d %llu %ld", &tr, &addr, &len) == 3 && fgetc(f) == '\n') {
    if (len <= 0 || len > (1 << 24)) { fprintf(stderr, "bad record\n"); exit(2); }
    while (size + len > cap) { cap *= 2; *buf = realloc(*buf, (size_t)cap); }
    if (n == rcap) { rcap *= 2; *rg = realloc(*rg, sizeof(region) * (size_t)rcap); }
    if (fread(*buf + size, 1, (size_t)len, f) != (size_t)len) {
      fprintf(stderr, "short record\n");
      exit(2);
    }
    (*rg)[n].start = size;
    (*rg)[n].end = size + len;
    (*rg)[n].addr = addr;
    n++;
    size += len;
  }
  fclose(f);
  *nrg = n;
  return size;
}

int main(int argc, char **argv)
{
  FILE *f;
  unsigned char *buf;
  long size;
  unsigned long long vma;
  region *rg = NULL;
  unsigned long long vmask = ~0ull;
  int nrg = 0, cur = 0;
  char line[4096];
  long insns = 0, mism = 0, bad_both = 0, bad_ours = 0, targets = 0,
       calls = 0, jccs = 0, flts = 0;
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: x64dec_oracle FILE VMA < objdump-output\n"
                    "       x64dec_oracle --traces IN.mc [OUT.bin]\n");
    return 2;
  }
  if (!strcmp(argv[1], "--traces")) {
    size = load_traces(argv[2], &buf, &rg, &nrg);
    vma = 0;
    /* objdump prints a target below 0 of a file at 0 in 64 bits, or a
    ** wrapped address: compared modulo 2^32 (a rel32 reaches +-2 GB) */
    vmask = 0xffffffffull;
    if (argc == 4) {                   /* write the bytes for objdump */
      f = fopen(argv[3], "wb");
      if (!f || fwrite(buf, 1, (size_t)size, f) != (size_t)size) return 2;
      fclose(f);
      printf("traces %d bytes %ld\n", nrg, size);
      return 0;
    }
  } else {
    f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) return 2;
    fclose(f);
    vma = strtoull(argv[2], NULL, 0);
  }
  while (fgets(line, sizeof(line), stdin)) {
    char *c = strchr(line, ':'), *tab1, *tab2, m[64];
    unsigned long long a;
    long off;
    int nb = 0, len, ok = 1, want;
    ljp_x64ins ins;
    const char *t;
    if (!c || c == line || line[0] != ' ') continue;
    a = strtoull(line, NULL, 16);
    tab1 = strchr(c, '\t');
    if (!tab1) continue;
    tab2 = strchr(tab1 + 1, '\t');
    for (t = tab1 + 1; *t && *t != '\t' && *t != '\n'; t++)
      if (*t != ' ' && (t[1] == ' ' || t[1] == '\t' || t[1] == '\n' || !t[1]))
        nb++;
    if (a < vma || a - vma >= (unsigned long long)size) continue;
    off = (long)(a - vma);
    m[0] = 0;
    if (tab2) mnemonic(tab2 + 1, m, sizeof(m));
    if (rg) {
      /* the trace holding off: its own address and bytes */
      unsigned long long at;
      long end;
      while (cur < nrg && rg[cur].end <= off) cur++;
      if (cur == nrg || rg[cur].start > off) continue;
      at = rg[cur].addr + (unsigned long long)(off - rg[cur].start);
      end = rg[cur].end;
      len = ljp_x64_decode(buf + off, (size_t)(end - off), at, &ins);
      /* objdump's targets are file offsets: rebase them */
      if (ins.has_target)
        ins.target = ins.target - at + (unsigned long long)off;
    } else {
      len = ljp_x64_decode(buf + off, (size_t)(size - off), a, &ins);
    }
    if (!strcmp(m, "(bad)") || !tab2) {
      if (len == 0) { bad_both++; continue; }
      /* objdump refuses what we decode: a mismatch (lengths differ) */
      ok = 0;
    } else if (len == 0) {
      bad_ours++;
      ok = 0;
    } else if (len != nb) {
      ok = 0;
    }
    insns++;
    if (ok) {
      /* Classes and targets. */
      char *op = tab2 ? tab2 + 1 : NULL;
      if (!strcmp(m, "call") || !strcmp(m, "callq")) {
        calls++;
        want = LJP_X64_CALL;
      } else if (!strcmp(m, "jmp") || !strcmp(m, "jmpq")) {
        want = LJP_X64_JMP;
      } else if (m[0] == 'j' || !strncmp(m, "loop", 4)) {
        jccs++;
        want = LJP_X64_JCC;
      } else if (!strcmp(m, "ret") || !strcmp(m, "retq")) {
        want = LJP_X64_RET;
      } else {
        want = -1;
      }
      if (!strcmp(m, "ljmp") || !strcmp(m, "lcall")) want = -1;
      if (want >= 0 && ins.cls != want) ok = 0;
      if (want < 0 && (ins.cls == LJP_X64_CALL || ins.cls == LJP_X64_JMP ||
                       ins.cls == LJP_X64_JCC || ins.cls == LJP_X64_RET) &&
          strcmp(m, "ljmp") && strcmp(m, "lcall") && strcmp(m, "lret"))
        ok = 0;
      if (want >= 0 && op) {
        /* "call   0x7f...": a direct target objdump computed */
        char *h = strstr(op, "0x");
        char *star = strchr(op, '*');
        if (h && !star && ins.has_target) {
          targets++;
          if ((strtoull(h, NULL, 16) & vmask) != (ins.target & vmask)) ok = 0;
        } else if (!star && h && !ins.has_target) {
          ok = 0;
        }
      }
      {
        int fo = fop_of(m);
        if (fo >= 0) {
          flts++;
          if (ins.cls != LJP_X64_FLT || ins.fop != fo) ok = 0;
        }
      }
    }
    if (!ok) {
      if (mism < 20)
        fprintf(stderr, "mismatch at %s+0x%lx: objdump %d bytes '%s', ours %d cls %d fop %d%s",
                argv[1], off, nb, m, len, ins.cls, ins.fop,
                strchr(line, '\n') ? "" : "\n");
      if (mism < 20) fprintf(stderr, "  %s", line);
      mism++;
    }
  }
  printf("insns %ld mismatches %ld bad_both %ld bad_ours %ld targets %ld "
         "calls %ld jccs %ld flts %ld\n",
         insns, mism, bad_both, bad_ours, targets, calls, jccs, flts);
  free(buf);
  return mism ? 1 : 0;
}
