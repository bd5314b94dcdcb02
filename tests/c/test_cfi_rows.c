#define _GNU_SOURCE
/* The CFI unwinder's row cache and its step for rows of saved values
** (src/cfi.c: "Rows remembered", step_row), on rows made up here. cfi.c
** is included, so that its static functions are called directly.
**
** 1. A row kept serves every address of its range, on either side of a
**    granule's edge, in a function body longer than 4 KB (the row of
**    LuaJIT's compiler that missed 9 times in one run when rows were kept
**    under the 256-byte granule of the address they were found for), and,
**    for a row longer than RC_SPAN large granules, the granules around
**    that address; never an address outside it, another generation or
**    another unwind table.
** 2. A set filled beyond its ways: whatever is found is the row put for
**    that range, the last row put is found, and a row put again does not
**    take a second way.
** 3. A row with more rules than an entry holds is not kept.
** 4. Threads putting and getting rows in the same sets: every hit is the
**    row of its range (a copy torn by a writer would mix two rows).
** 5. The step's path for rows of saved values (CROW_SIMPLE) gives what
**    the general path gives: return code and registers, stack bounds
**    crossed or not; crow_of sets CROW_SIMPLE only where it applies.
** 6. The CIE cache: a CIE kept gives back its fields, its initial row
**    (every rule kind) and its instruction count, under its own key only;
**    one with more rules than an entry holds is not kept. */
#include <pthread.h>
#include <string.h>

#include "../../src/cfi.c"
#include "check.h"

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return rnd_state;
}

/* A row whose every field derives from key (n rules). */
static void mkrow(crow *c, uint64_t key, unsigned n)
{
  unsigned i;
  memset(c, 0, sizeof(*c));
  c->fn = (uintptr_t)(key * 0x9e3779b97f4a7c15ull);
  c->cfa_off = (int32_t)(8 + (key % 97) * 8);
  c->cfa_reg = (uint8_t)(key % 2 ? LJP_CFI_RSP : 6);
  c->cfa_expr = (uint8_t)(key % 5 == 0 ? 3 : 0);
  c->flags = (uint8_t)(key % 3 == 0 ? CROW_SIG : 0);
  c->same = (uint32_t)(key * 2654435761u) & ((1u << LJP_CFI_NREG) - 1);
  c->n = (uint8_t)n;
  for (i = 0; i < n; i++)
    c->rule[i] = RULE(i, R_OFFSET, -(int32_t)(8 * (i + 1 + key % 7)));
}

static int same_row(const crow *a, const crow *b)
{
  unsigned i;
  if (a->fn != b->fn || a->cfa_off != b->cfa_off || a->cfa_reg != b->cfa_reg ||
      a->cfa_expr != b->cfa_expr || a->flags != b->flags || a->n != b->n ||
      a->same != b->same || a->omin != b->omin || a->omax != b->omax)
    return 0;
  for (i = 0; i < a->n; i++)
    if (a->rule[i] != b->rule[i]) return 0;
  return 1;
}

/* Every address of [lo, hi) finds the row a: the misses and the wrong
** rows found. */
static void scan(uint64_t gen, uintptr_t hdr, uintptr_t lo, uintptr_t hi,
                 const crow *a, long *miss, long *wrong)
{
  uintptr_t pc;
  crow b;
  *miss = *wrong = 0;
  for (pc = lo; pc < hi; pc++) {
    if (!rc_get(gen, hdr, pc, &b)) (*miss)++;
    else if (!same_row(a, &b)) (*wrong)++;
  }
}

static void test_ranges(void)
{
  const uint64_t gen = 7;
  const uintptr_t hdr = 0x7f0000100000;
  crow a, b;
  long miss, wrong;

  /* a small row, inside one granule */
  mkrow(&a, 1, 3);
  rc_put(gen, hdr, 0x401010, 0x4010f0, 0x401080, &a);
  scan(gen, hdr, 0x401010, 0x4010f0, &a, &miss, &wrong);
  CHECK_EQ(miss, 0);
  CHECK_EQ(wrong, 0);
  CHECK(!rc_get(gen, hdr, 0x40100f, &b));
  CHECK(!rc_get(gen, hdr, 0x4010f0, &b));
  CHECK(!rc_get(gen + 1, hdr, 0x401080, &b));
  CHECK(!rc_get(gen, hdr + 0x1000, 0x401080, &b));

  /* a small row across a granule's edge, found on its far side */
  mkrow(&a, 2, 7);
  rc_put(gen, hdr, 0x4020f0, 0x4021e0, 0x4021d0, &a);
  scan(gen, hdr, 0x4020f0, 0x4021e0, &a, &miss, &wrong);
  CHECK_EQ(miss, 0);
  CHECK_EQ(wrong, 0);

  /* a function's body of 7 KB (lj_asm's in the trace-churn bench) */
  mkrow(&a, 3, 7);
  rc_put(gen, hdr, 0x468e50, 0x46a9f4, 0x469c43, &a);
  scan(gen, hdr, 0x468e50, 0x46a9f4, &a, &miss, &wrong);
  CHECK_EQ(miss, 0);
  CHECK_EQ(wrong, 0);
  CHECK(!rc_get(gen, hdr, 0x468e4f, &b));
  CHECK(!rc_get(gen, hdr, 0x46a9f4, &b));

  /* 40 KB: the RC_SPAN granules around the address found (one below) */
  mkrow(&a, 4, 2);
  rc_put(gen, hdr, 0x500000, 0x50a000, 0x505010, &a);
  scan(gen, hdr, 0x504000, 0x504000 + RC_SPAN * 4096, &a, &miss, &wrong);
  CHECK_EQ(miss, 0);
  CHECK_EQ(wrong, 0);
  CHECK(!rc_get(gen, hdr, 0x500000, &b));     /* bounded: not filed there */
  CHECK(!rc_get(gen, hdr, 0x504000 + RC_SPAN * 4096, &b));
  /* found near its end: the last RC_SPAN granules */
  mkrow(&a, 5, 2);
  rc_put(gen, hdr, 0x600000, 0x60a000, 0x609ff0, &a);
  scan(gen, hdr, 0x60a000 - RC_SPAN * 4096, 0x60a000, &a, &miss, &wrong);
  CHECK_EQ(miss, 0);
  CHECK_EQ(wrong, 0);

  /* one address (no range known) */
  mkrow(&a, 6, 1);
  rc_put(gen, hdr, 0x700123, 0x700124, 0x700123, &a);
  CHECK(rc_get(gen, hdr, 0x700123, &b) && same_row(&a, &b));
  CHECK(!rc_get(gen, hdr, 0x700122, &b));
  CHECK(!rc_get(gen, hdr, 0x700124, &b));

  /* more rules than an entry holds: not kept; as many: kept */
  mkrow(&a, 8, RC_RULES + 1);
  rc_put(gen, hdr, 0x800000, 0x800040, 0x800000, &a);
  CHECK(!rc_get(gen, hdr, 0x800000, &b));
  mkrow(&a, 9, RC_RULES);
  rc_put(gen, hdr, 0x810000, 0x810040, 0x810000, &a);
  CHECK(rc_get(gen, hdr, 0x810020, &b) && same_row(&a, &b));
}

/* Granules of the small table that share one set: n of them in g[]. */
static void same_set(uintptr_t hdr, uintptr_t from, uintptr_t *g, int n)
{
  uint32_t set = rc_set(&rc_tabs[0], hdr, from);
  uintptr_t x;
  int k = 0;
  for (x = from; k < n; x++)
    if (rc_set(&rc_tabs[0], hdr, x) == set) g[k++] = x;
}

static void test_sets(void)
{
  const uint64_t gen = 11;
  const uintptr_t hdr = 0x7f0000200000;
  uintptr_t g[8];
  crow a, b;
  int i, k, found;
  same_set(hdr, 0x90000, g, 8);
  for (i = 0; i < 8; i++) {
    mkrow(&a, g[i], 1 + (unsigned)i % 5);
    rc_put(gen, hdr, g[i] << 8, (g[i] << 8) + 64, g[i] << 8, &a);
    CHECK(rc_get(gen, hdr, (g[i] << 8) + 10, &b) && same_row(&a, &b));
    for (k = found = 0; k <= i; k++) {
      crow e;
      mkrow(&e, g[k], 1 + (unsigned)k % 5);
      if (rc_get(gen, hdr, (g[k] << 8) + 10, &b)) {
        found++;
        CHECK(same_row(&e, &b));
      }
    }
    CHECK(found == (i + 1 < RC_SMALL_WAYS ? i + 1 : RC_SMALL_WAYS));
  }
  /* a row put again stays in its way: both rows of a full set stay */
  same_set(hdr, 0xa0000, g, 2);
  mkrow(&a, g[0], 2);
  rc_put(gen, hdr, g[0] << 8, (g[0] << 8) + 32, g[0] << 8, &a);
  mkrow(&b, g[1], 3);
  rc_put(gen, hdr, g[1] << 8, (g[1] << 8) + 32, g[1] << 8, &b);
  for (i = 0; i < 5; i++)
    rc_put(gen, hdr, g[0] << 8, (g[0] << 8) + 32, g[0] << 8, &a);
  CHECK(rc_get(gen, hdr, g[0] << 8, &b));
  CHECK(rc_get(gen, hdr, g[1] << 8, &b));
}

/* -- 4. Threads ------------------------------------------------------------- */

#define THREADS 3
static uintptr_t hot[8];
static volatile int stop;
static long t_hits[THREADS], t_wrong[THREADS];

static void *hammer(void *arg)
{
  int id = (int)(intptr_t)arg;
  uint64_t s = 0x12345 + (uint64_t)id * 0x9e3779b9u;
  long it;
  crow a, b;
  for (it = 0; !stop || it < 200000; it++) {
    uintptr_t g, pc;
    uint64_t gen;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    g = hot[s % 8];
    gen = 1 + (s >> 8) % 2;  /* two generations: stale entries too */
    if ((s >> 16) % 4 == 0) {
      mkrow(&a, g * 3 + gen, 1 + (unsigned)((g + gen) % RC_RULES));
      rc_put(gen, 0x1000, g << 8, (g + 1) << 8, (g << 8) + (s >> 24) % 256, &a);
    }
    pc = (g << 8) + (s >> 32) % 256;
    if (rc_get(gen, 0x1000, pc, &b)) {
      mkrow(&a, g * 3 + gen, 1 + (unsigned)((g + gen) % RC_RULES));
      t_hits[id]++;
      if (!same_row(&a, &b)) t_wrong[id]++;
    }
    if (it > 5000000) break;
  }
  return NULL;
}

static void test_threads(void)
{
  pthread_t th[THREADS];
  struct timespec ts = {0, 300 * 1000000};
  long hits = 0, wrong = 0;
  int i;
  same_set(0x1000, 0x50000, hot, 8);
  for (i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, hammer, (void *)(intptr_t)i);
  nanosleep(&ts, NULL);
  stop = 1;
  for (i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    hits += t_hits[i];
    wrong += t_wrong[i];
  }
  printf("threads: %ld hits, %ld wrong rows\n", hits, wrong);
  CHECK(hits > 1000);
  CHECK_EQ(wrong, 0);
}

/* -- 5. The step's two paths -------------------------------------------------- */

static void test_step(void)
{
  uintptr_t stk[64];
  long fast = 0, bounds = 0, ok = 0, diff = 0;
  int it;
  for (it = 0; it < 200000; it++) {
    crow c, g;
    ljp_regs r, r1, r2;
    ljp_stack st;
    unsigned i, k, n = 0;
    int rc1, rc2;
    for (i = 0; i < 64; i++) stk[i] = rnd() % 4 ? rnd() : 0;
    memset(&c, 0, sizeof(c));
    c.cfa_reg = (uint8_t)(rnd() % 2 ? LJP_CFI_RSP : 6);
    c.cfa_off = (int32_t)(8 * (rnd() % 12));
    c.cfa_expr = (uint8_t)(rnd() % 8 == 0 ? 2 + rnd() % 16 : 0);
    c.same = (uint32_t)rnd() & ((1u << LJP_CFI_NREG) - 1) &
             ~(1u << LJP_CFI_RA);
    c.same |= 1u << LJP_CFI_RSP;
    c.omin = INT32_MAX;
    c.omax = INT32_MIN;
    for (i = 0; i < 16; i++) {  /* saved registers, then the RA */
      int32_t off;
      if (i == LJP_CFI_RSP || rnd() % 3) continue;
      c.same &= ~(1u << i);
      off = -(int32_t)(8 * (1 + rnd() % 10)) + (rnd() % 16 == 0 ? 4 : 0);
      c.rule[n++] = RULE(i, R_OFFSET, off);
      if (off < c.omin) c.omin = off;
      if (off > c.omax) c.omax = off;
    }
    {
      int32_t off = -8 * (int32_t)(1 + rnd() % 3);
      c.rule[n++] = RULE(LJP_CFI_RA, R_OFFSET, off);
      if (off < c.omin) c.omin = off;
      if (off > c.omax) c.omax = off;
    }
    c.n = (uint8_t)n;
    c.flags = CROW_SIMPLE;
    for (i = 0; i < LJP_CFI_NREG; i++) r.r[i] = rnd();
    r.valid = (uint32_t)rnd() & ((1u << LJP_CFI_NREG) - 1);
    if (rnd() % 8) r.valid |= (1u << c.cfa_reg) | (1u << LJP_CFI_RSP);
    r.r[c.cfa_reg] = (uintptr_t)&stk[16 + rnd() % 24];
    if (rnd() % 2) r.r[LJP_CFI_RSP] = (uintptr_t)&stk[rnd() % 40];
    for (i = 0; i < LJP_CFI_NREG; i++)
      if (!(r.valid & (1u << i))) r.r[i] = 0;
    k = (unsigned)(rnd() % 40);
    st.lo = (uintptr_t)&stk[k] + (rnd() % 8 == 0 ? 4 : 0);
    st.hi = (uintptr_t)&stk[k + 1 + rnd() % (64 - k - 1)];
    {  /* did the fast path's bounds hold? (counted: both cases seen) */
      uintptr_t cfa = r.r[c.cfa_reg] + (uintptr_t)(intptr_t)c.cfa_off;
      if (cfa + (uintptr_t)(intptr_t)c.omin >= st.lo &&
          cfa + (uintptr_t)(intptr_t)c.omax + 8 <= st.hi)
        fast++;
      else
        bounds++;
    }
    g = c;
    g.flags = 0;  /* the general path */
    r1 = r2 = r;
    rc1 = step_row(&c, &r1, &st);
    rc2 = step_row(&g, &r2, &st);
    if (rc1 == LJP_CFI_OK) ok++;
    if (rc1 != rc2 || memcmp(&r1, &r2, sizeof(r1)) != 0) {
      if (!diff++)
        fprintf(stderr, "step %d: fast path %d, general path %d\n", it, rc1,
                rc2);
    }
  }
  printf("step: %ld rows in bounds, %ld not, %ld steps ok, %ld differ\n",
         fast, bounds, ok, diff);
  CHECK(fast > 10000);
  CHECK(bounds > 10000);
  CHECK(ok > 10000);
  CHECK_EQ(diff, 0);
}

static void test_crow_of(void)
{
  row r;
  crow c;
  memset(&r, 0, sizeof(r));
  r.cfa_reg = LJP_CFI_RSP;
  r.cfa_off = 56;
  r.r[LJP_CFI_RA].how = R_OFFSET;
  r.r[LJP_CFI_RA].off = -8;
  r.r[3].how = R_OFFSET;
  r.r[3].off = -48;
  r.r[6].how = R_OFFSET;
  r.r[6].off = -16;
  crow_of(&c, &r, 0x1234, 0);
  CHECK(c.flags == CROW_SIMPLE);
  CHECK_EQ(c.n, 3);
  CHECK_EQ(c.omin, -48);
  CHECK_EQ(c.omax, -8);
  CHECK_EQ(RULE_REG(c.rule[c.n - 1]), LJP_CFI_RA);
  CHECK_EQ(c.fn, 0x1234);
  r.r[12].how = R_REG;  /* a rule that is not a saved value */
  r.r[12].reg = 3;
  crow_of(&c, &r, 0x1234, 1);
  CHECK(c.flags == CROW_SIG);
  r.r[12].how = R_SAME;
  r.r[LJP_CFI_RSP].how = R_VALOFF;  /* the stack pointer with a rule */
  crow_of(&c, &r, 0x1234, 0);
  CHECK(!(c.flags & CROW_SIMPLE));
  r.r[LJP_CFI_RSP].how = R_SAME;
  r.r[3].off = -40000;  /* beyond int16_t */
  crow_of(&c, &r, 0x1234, 0);
  CHECK(!(c.flags & CROW_SIMPLE));
  r.r[3].off = -48;
  r.r[LJP_CFI_RA].how = R_UNDEF;  /* outermost */
  crow_of(&c, &r, 0x1234, 0);
  CHECK(c.flags == CROW_RA_UNDEF);
}

static void test_cies(void)
{
  cie ci, co;
  row init, got;
  int ops = 0, i;
  memset(&ci, 0, sizeof(ci));
  ci.caf = 1;
  ci.daf = -8;
  ci.ra = LJP_CFI_RA;
  ci.fde_enc = 0x1b;
  ci.aug_z = 1;
  ci.sig = 1;
  ci.at = 0x4a0010;
  memset(&init, 0, sizeof(init));
  init.cfa_reg = LJP_CFI_RSP;
  init.cfa_off = 8;
  init.cfa_expr = 0;
  init.r[LJP_CFI_RA].how = R_OFFSET;
  init.r[LJP_CFI_RA].off = -8;
  init.r[3].how = R_REG;
  init.r[3].reg = 12;
  init.r[5].how = R_UNDEF;
  init.r[9].how = R_VALOFF;
  init.r[9].off = -24;
  cc_put(5, 0x2000, &ci, &init, 3);
  memset(&co, 0xff, sizeof(co));
  memset(&got, 0xff, sizeof(got));
  CHECK(cc_get(5, 0x2000, 0x4a0010, &co, &got, &ops));
  CHECK_EQ(ops, 3);
  CHECK(co.caf == 1 && co.daf == -8 && co.ra == LJP_CFI_RA &&
        co.fde_enc == 0x1b && co.aug_z == 1 && co.sig == 1);
  CHECK(got.cfa_reg == LJP_CFI_RSP && got.cfa_off == 8 && got.cfa_expr == 0);
  for (i = 0; i < LJP_CFI_NREG; i++) {
    CHECK_EQ(got.r[i].how, init.r[i].how);
    if (init.r[i].how == R_REG) CHECK_EQ(got.r[i].reg, init.r[i].reg);
    if (init.r[i].how == R_OFFSET || init.r[i].how == R_VALOFF)
      CHECK_EQ(got.r[i].off, init.r[i].off);
  }
  CHECK(!cc_get(6, 0x2000, 0x4a0010, &co, &got, &ops));
  CHECK(!cc_get(5, 0x3000, 0x4a0010, &co, &got, &ops));
  CHECK(!cc_get(5, 0x2000, 0x4a0018, &co, &got, &ops));
  /* more rules than an entry holds */
  ci.at = 0x4b0000;
  for (i = 0; i < 8; i++) {
    init.r[i].how = R_OFFSET;
    init.r[i].off = -16 - 8 * i;
  }
  cc_put(5, 0x2000, &ci, &init, 9);
  CHECK(!cc_get(5, 0x2000, 0x4b0000, &co, &got, &ops));
}

int main(void)
{
  test_cies();
  test_ranges();
  test_sets();
  test_crow_of();
  test_step();
  test_threads();
  return check_done("cfi_rows");
}
