/* Unit tests for the aggregation tables: interning (identity, growth,
** collisions), counts (growth, keys differing only in vmstate or
** zone), agreement with a naive reference on random data, and an entry
** rewritten in place (ljp_strtab_rewrite, ljp_strtab_reindex). */
#include <stdio.h>
#include <string.h>

#include "../../src/store.h"
#include "../../src/table.h"
#include "check.h"

static void test_intern(void)
{
  ljp_strtab t;
  char buf[64];
  uint32_t ids[5000];
  int i, ok = 1;
  CHECK_EQ(ljp_strtab_init(&t), 0);
  CHECK_EQ(ljp_strtab_intern(&t, "", 0), 0);      /* id 0: empty stack */
  CHECK_EQ(ljp_strtab_intern(&t, "a;b;c", 5), 1);
  CHECK_EQ(ljp_strtab_intern(&t, "a;b;c", 5), 1);
  CHECK_EQ(ljp_strtab_intern(&t, "a;b", 3), 2);
  CHECK_EQ(ljp_strtab_intern(&t, "a;b;c", 3), 2); /* length matters */
  CHECK(memcmp(ljp_strtab_get(&t, 1)->s, "a;b;c", 6) == 0);
  for (i = 0; i < 5000; i++) {                    /* grows many times */
    int n = snprintf(buf, sizeof(buf), "main;f%d;g%d", i, i * 7);
    ids[i] = ljp_strtab_intern(&t, buf, (size_t)n);
  }
  for (i = 0; i < 5000; i++) {
    int n = snprintf(buf, sizeof(buf), "main;f%d;g%d", i, i * 7);
    const ljp_str *s = ljp_strtab_get(&t, ids[i]);
    ok &= ljp_strtab_intern(&t, buf, (size_t)n) == ids[i];
    ok &= s->len == (uint32_t)n && memcmp(s->s, buf, (size_t)n) == 0;
  }
  CHECK(ok);
  CHECK_EQ(t.n, 5003);
  CHECK(t.icap >= 8192);
  /* Long strings get their own chunk. */
  {
    static char big[200000];
    memset(big, 'x', sizeof(big));
    uint32_t id = ljp_strtab_intern(&t, big, sizeof(big));
    CHECK_EQ(ljp_strtab_intern(&t, big, sizeof(big)), id);
    CHECK_EQ(ljp_strtab_get(&t, id)->len, sizeof(big));
  }
  ljp_strtab_free(&t);
}

/* Collisions: at up to 70% load many keys do not sit in their home slot;
** check that such displaced keys exist (the probing path is exercised) and
** that every identity still resolves, before and after growth. */
static uint32_t displaced(const ljp_strtab *t)
{
  uint32_t id, n = 0, mask = t->icap - 1;
  for (id = 0; id < t->n; id++)
    if (t->index[(uint32_t)t->str[id].hash & mask] != id + 1) n++;
  return n;
}

static void test_collisions(void)
{
  ljp_strtab t;
  char buf[16];
  int i, ok = 1;
  uint32_t before_growth = 0;
  ljp_strtab_init(&t);
  for (i = 0; i < 300; i++) {
    int n = snprintf(buf, sizeof(buf), "%d", i);
    ok &= ljp_strtab_intern(&t, buf, (size_t)n) == (uint32_t)i + 1;
    if (t.icap == 256) before_growth = displaced(&t);
  }
  for (i = 0; i < 300; i++) {
    int n = snprintf(buf, sizeof(buf), "%d", i);
    ok &= ljp_strtab_intern(&t, buf, (size_t)n) == (uint32_t)i + 1;
  }
  CHECK(ok);
  CHECK(before_growth > 0);   /* collisions happened at 256 slots */
  CHECK(displaced(&t) > 0);   /* and after growth */
  ljp_strtab_free(&t);
}

static uint64_t lcg(uint64_t *s) { *s = *s * 6364136223846793005ull + 1442695040888963407ull; return *s >> 33; }

static void test_counts(void)
{
  ljp_counts c;
  static uint64_t ref[64][5][4];
  const char vm[] = "NICGJ";
  uint64_t seed = 42;
  int i, s, v, z, ok = 1;
  CHECK_EQ(ljp_counts_init(&c), 0);
  for (i = 0; i < 200000; i++) {
    s = (int)(lcg(&seed) % 64);
    v = (int)(lcg(&seed) % 5);
    z = (int)(lcg(&seed) % 4);
    ref[s][v][z] += (uint64_t)(i % 3 + 1);
    CHECK(ljp_counts_add(&c, ljp_stack_key((uint32_t)s, vm[v], (uint16_t)z),
                         (uint64_t)(i % 3 + 1)) == 0);
  }
  for (s = 0; s < 64; s++)
    for (v = 0; v < 5; v++)
      for (z = 0; z < 4; z++)
        ok &= ljp_counts_get(&c, ljp_stack_key((uint32_t)s, vm[v], (uint16_t)z)) == ref[s][v][z];
  CHECK(ok);
  CHECK_EQ(c.n, 64 * 5 * 4);
  CHECK(c.cap >= 2048);                 /* grew from 256 */
  {
    uint64_t k = ljp_stack_key(123456, 'J', 65535);
    CHECK_EQ(ljp_stack_key_stack(k), 123456);
    CHECK_EQ(ljp_stack_key_vmstate(k), 'J');
    CHECK_EQ(ljp_stack_key_tag(k), 65535);
    /* the widest tag (a zone and label set pair) keeps every field */
    k = ljp_stack_key(UINT32_MAX, 'N', LJP_TAG_MAX);
    CHECK_EQ(ljp_stack_key_stack(k), UINT32_MAX);
    CHECK_EQ(ljp_stack_key_vmstate(k), 'N');
    CHECK_EQ(ljp_stack_key_tag(k), LJP_TAG_MAX);
  }
  {  /* typed keys: never 0, and each keeps its full fields */
    uint64_t f = ljp_func_key(0, 'I'), tr = ljp_trace_key(0, 0);
    uint64_t big = ljp_trace_key(4000000000u, 65535);
    CHECK(f != 0);
    CHECK(tr != 0);
    CHECK_EQ(ljp_func_key_func(ljp_func_key(77, 'C')), 77);
    CHECK_EQ(ljp_func_key_vmstate(ljp_func_key(77, 'C')), 'C');
    CHECK_EQ(ljp_trace_key_start(big), 4000000000u);
    CHECK_EQ(ljp_trace_key_trace(big), 65535);
    CHECK_EQ(ljp_trace_key_trace(ljp_trace_key(5, 70000)), 70000);
    CHECK(ljp_trace_key(5, 1) != ljp_trace_key(5, 2));
  }
  ljp_counts_free(&c);
}

/* A rewritten entry keeps its id; after the reindex the new content is
** found under it and the old content is interned anew; before it, the
** new content is interned again, never taken for another entry. */
static void test_rewrite(void)
{
  ljp_strtab t;
  char buf[32];
  uint32_t id, i;
  int ok = 1;
  CHECK_EQ(ljp_strtab_init(&t), 0);
  for (i = 0; i < 300; i++) {
    int n = snprintf(buf, sizeof(buf), "frame%05u", i);
    CHECK_EQ(ljp_strtab_intern(&t, buf, (size_t)n), i + 1);
  }
  CHECK_EQ(ljp_strtab_rewrite(&t, 7, "FRAME00006", 10), 0);
  CHECK_EQ(ljp_strtab_rewrite(&t, 7, "short", 5), -1);     /* length */
  CHECK_EQ(ljp_strtab_rewrite(&t, 0, "", 0), -1);          /* id 0 */
  CHECK_EQ(ljp_strtab_rewrite(&t, 301, "FRAME00300", 10), -1);
  /* before the reindex: nothing is mistaken for id 7 */
  id = ljp_strtab_intern(&t, "frame00006", 10);
  CHECK(id != 7 && id == 301);
  CHECK_EQ(ljp_strtab_reindex(&t), 0);
  CHECK_EQ(ljp_strtab_intern(&t, "FRAME00006", 10), 7);
  CHECK_EQ(ljp_strtab_intern(&t, "frame00006", 10), 301);
  for (i = 0; i < 300; i++) {
    int n = snprintf(buf, sizeof(buf), "frame%05u", i);
    if (i != 6) ok &= ljp_strtab_intern(&t, buf, (size_t)n) == i + 1;
  }
  CHECK(ok);
  CHECK_EQ(t.n, 302);
  ljp_strtab_free(&t);
}

int main(void)
{
  test_intern();
  test_collisions();
  test_counts();
  test_rewrite();
  return check_done("table");
}
