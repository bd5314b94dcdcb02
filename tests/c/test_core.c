/* Unit tests for the portable core that has no other C test: zones,
** labels, the store fed from a ring (ticks tagged with the zone and label
** set current at each tick, as the sampler takes them), the byte buffer's
** number formats and the OS interface's monotonic clock (os.h), and Lua
** frames named after they were interned (ljp_store_name_lua). The same
** file runs on Linux and, cross-built, on Windows under Wine (issue 31):
** it is what shows these files work on both (on Windows `long` is 32 bits
** and the clock is QueryPerformanceCounter). */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#include "../../src/buf.h"
#include "../../src/labels.h"
#include "../../src/os.h"
#include "../../src/ring.h"
#include "../../src/store.h"
#include "../../src/zones.h"
#include "check.h"

static void test_zones(void)
{
  ljp_zones z;
  uint16_t ai, phys;
  memset(&z, 0, sizeof(z));
  ai = ljp_zone_id(&z, "AI", 2);
  phys = ljp_zone_id(&z, "physics", 7);
  CHECK(ai != 0 && phys != 0 && ai != phys);
  CHECK_EQ(ljp_zone_id(&z, "AI", 2), ai);         /* interned once */
  CHECK_EQ(ljp_zone_id(&z, "AIx", 2), ai);        /* by length */
  CHECK(strcmp(ljp_zone_name(&z, phys), "physics") == 0);
  CHECK(strcmp(ljp_zone_name(&z, 0), "") == 0);
  CHECK_EQ(z.cur, 0);
  CHECK_EQ(ljp_zone_push_id(&z, ai), 0);
  CHECK_EQ(ljp_zone_push_id(&z, phys), 0);
  CHECK_EQ(z.cur, phys);
  CHECK_EQ(ljp_zone_push_id(&z, 999), -1);        /* not an id */
  CHECK_EQ(ljp_zone_pop(&z), phys);
  CHECK_EQ(z.cur, ai);
  CHECK_EQ(ljp_zone_pop(&z), ai);
  CHECK_EQ(z.cur, 0);
  CHECK_EQ(ljp_zone_pop(&z), 0);                  /* empty */
  ljp_zones_free(&z);
}

typedef struct pairs_seen {
  char text[256];
} pairs_seen;

static void visit_pair(void *d, const char *k, size_t kn, const char *v,
                       size_t vn)
{
  pairs_seen *p = d;
  size_t n = strlen(p->text);
  snprintf(p->text + n, sizeof(p->text) - n, "%.*s=%.*s;", (int)kn, k,
           (int)vn, v);
}

static uint16_t label_set(ljp_labels *l, const char *k1, const char *v1,
                          const char *k2, const char *v2)
{
  const char *kv[4] = {k1, v1, k2, v2};
  size_t len[4];
  uint16_t id = 0;
  int i, n = k2 ? 2 : 1;
  for (i = 0; i < 2 * n; i++) len[i] = strlen(kv[i]);
  CHECK_EQ(ljp_label_set(l, kv, len, n, &id), LJP_LABEL_OK);
  return id;
}

static void test_labels(void)
{
  ljp_labels l;
  pairs_seen seen;
  uint16_t a, b, merged;
  const char *bad[2] = {"zone", "x"};
  size_t badlen[2] = {4, 1};
  memset(&l, 0, sizeof(l));
  a = label_set(&l, "endpoint", "/api", NULL, NULL);
  b = label_set(&l, "user", "7", "endpoint", "/home");
  CHECK(a != 0 && b != 0 && a != b);
  CHECK_EQ(label_set(&l, "endpoint", "/api", NULL, NULL), a);
  CHECK_EQ(ljp_label_set(&l, bad, badlen, 1, &merged), LJP_LABEL_BADKEY);
  CHECK_EQ(ljp_label_push(&l, a, 1), LJP_LABEL_OK);
  CHECK_EQ(l.cur, a);
  /* b pushed onto a: its endpoint wins, user joins. */
  CHECK_EQ(ljp_label_push(&l, b, 1), LJP_LABEL_OK);
  merged = l.cur;
  memset(&seen, 0, sizeof(seen));
  CHECK_EQ(ljp_label_each(&l, merged, visit_pair, &seen), 2);
  CHECK(strcmp(seen.text, "endpoint=/home;user=7;") == 0);
  CHECK_EQ(ljp_label_pop(&l), merged);
  CHECK_EQ(l.cur, a);
  CHECK_EQ(ljp_label_pop(&l), a);
  CHECK_EQ(l.cur, 0);
  CHECK_EQ(ljp_label_pop(&l), -1);
  ljp_labels_free(&l);
}

/* Ticks as the sampler takes them: the zone and label set current at the
** tick go into the ring's record; the store's drain adds them up by
** (stack, VM state, zone, labels). */
typedef struct totals {
  uint64_t by_zone[3], with_labels, all;
  int rows;
} totals;

static uint16_t zone_ai, zone_phys, set_api;

static void visit_stack(void *d, uint32_t stack, int vmstate, uint16_t zone,
                        uint16_t labels, uint64_t ticks)
{
  totals *t = d;
  (void)stack;
  (void)vmstate;
  t->rows++;
  t->all += ticks;
  t->by_zone[zone == zone_ai ? 1 : zone == zone_phys ? 2 : 0] += ticks;
  if (labels == set_api) t->with_labels += ticks;
}

static void tick(ljp_ring *r, const ljp_zones *z, const ljp_labels *l,
                 uint32_t stack, uint32_t w)
{
  ljp_push_result res;
  ljp_record *rec = ljp_ring_reserve(r, w, NULL, NULL, &res);
  CHECK(rec != NULL);
  if (!rec) return;
  rec->vmstate = 'I';
  rec->stack = stack;
  rec->func = stack;
  rec->trace = 0;
  rec->zone = z->cur;
  rec->labels = l->cur;
  atomic_store(&rec->weight, w);
  ljp_ring_publish(r);
}

static void test_store(void)
{
  ljp_store s;
  ljp_ring r;
  ljp_zones z;
  ljp_labels l;
  _Atomic uint64_t dropped = 0;
  uint64_t from, to;
  totals t;
  uint32_t st1, st2, tag;
  uint16_t zz, ll;
  ljp_frame f;
  int i;
  memset(&z, 0, sizeof(z));
  memset(&l, 0, sizeof(l));
  memset(&f, 0, sizeof(f));
  CHECK_EQ(ljp_store_init(&s), 0);
  CHECK_EQ(ljp_ring_init(&r, 64), 0);
  zone_ai = ljp_zone_id(&z, "AI", 2);
  zone_phys = ljp_zone_id(&z, "physics", 7);
  set_api = label_set(&l, "endpoint", "/api", NULL, NULL);
  f.kind = LJP_FR_LUA;
  f.source = ljp_store_intern(&s, "@game.lua", 9);
  f.linedefined = 10;
  f.line = 12;
  {
    uint32_t fr = ljp_store_frame(&s, &f), ids[2];
    f.line = 40;
    ids[0] = ljp_store_frame(&s, &f);
    ids[1] = fr;
    st1 = ljp_store_stack(&s, &fr, 1);
    st2 = ljp_store_stack(&s, ids, 2);
    CHECK(st1 != 0 && st2 != 0 && st1 != st2);
    CHECK_EQ(ljp_store_stack(&s, ids, 2), st2);   /* interned once */
    CHECK_EQ(ljp_store_stack_len(&s, st2), 2);
  }
  for (i = 0; i < 10; i++) tick(&r, &z, &l, st1, 1);      /* no zone */
  ljp_zone_push_id(&z, zone_ai);
  for (i = 0; i < 20; i++) tick(&r, &z, &l, st2, 2);      /* AI: 40 */
  ljp_label_push(&l, set_api, 1);
  ljp_zone_push_id(&z, zone_phys);
  for (i = 0; i < 5; i++) tick(&r, &z, &l, st1, 3);       /* physics+api */
  ljp_zone_pop(&z);
  ljp_label_pop(&l);
  ljp_zone_pop(&z);
  /* Claimed records are drained (the safe point claims, then drains). */
  ljp_ring_claim(&r, &from, &to);
  CHECK_EQ(to - from, 35);
  ljp_store_drain(&s, &r, &dropped);
  CHECK_EQ(atomic_load(&dropped), 0);
  CHECK_EQ(ljp_store_total(&s), 10 + 40 + 15);
  CHECK_EQ(s.aggregated, 35);
  memset(&t, 0, sizeof(t));
  ljp_store_each_stack(&s, visit_stack, &t);
  CHECK_EQ(t.all, 65);
  CHECK_EQ(t.by_zone[0], 10);
  CHECK_EQ(t.by_zone[1], 40);
  CHECK_EQ(t.by_zone[2], 15);
  CHECK_EQ(t.with_labels, 15);
  CHECK_EQ(t.rows, 3);
  tag = ljp_store_tag(&s, zone_phys, set_api);
  CHECK(tag >= LJP_TAG_LABELS && tag <= LJP_TAG_MAX);
  ljp_store_untag(&s, tag, &zz, &ll);
  CHECK_EQ(zz, zone_phys);
  CHECK_EQ(ll, set_api);
  CHECK_EQ(ljp_store_nstacks(&s), 2);
  CHECK_EQ(ljp_store_reset(&s), 0);
  CHECK_EQ(ljp_store_total(&s), 0);
  ljp_ring_free(&r);
  ljp_store_free(&s);
  ljp_zones_free(&z);
  ljp_labels_free(&l);
}

static void test_buf(void)
{
  ljp_buf b;
  memset(&b, 0, sizeof(b));
  ljp_buf_int(&b, 0);
  ljp_buf_putc(&b, ' ');
  ljp_buf_int(&b, -2147483647L - 1);
  ljp_buf_putc(&b, ' ');
  ljp_buf_hex(&b, 0xdeadbeefUL);
  ljp_buf_putc(&b, ' ');
  ljp_buf_ptr(&b, (const void *)(uintptr_t)0x7ff612345678ULL);
  ljp_buf_putc(&b, ' ');
  ljp_buf_ptr(&b, NULL);
  ljp_buf_putc(&b, '\0');
  CHECK(b.b && strcmp(b.b, "0 -2147483648 deadbeef 0x7ff612345678 NULL") == 0);
  if (b.b) printf("buf: %s\n", b.b);
  ljp_buf_free(&b);
}

/* ljp_now_ns (os.h): monotonic, in nanoseconds: a 200 ms sleep reads as
** 150 ms to 5 s (a wrong unit or frequency is off by 10^3 or more). */
static void test_clock(void)
{
  uint64_t t0 = ljp_now_ns(), t1, t2, dt;
  int mono = 1, i;
  for (i = 0; i < 100000; i++) {
    t1 = ljp_now_ns();
    if (t1 < t0) mono = 0;
    t0 = t1;
  }
  CHECK(mono);
  t1 = ljp_now_ns();
#ifdef _WIN32
  Sleep(200);
#else
  {
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
  }
#endif
  t2 = ljp_now_ns();
  dt = t2 - t1;
  printf("clock: 200 ms sleep read as %.1f ms\n", (double)dt / 1e6);
  CHECK(dt >= 150000000u && dt <= 5000000000u);
}

/* Lua frames without a name take the name found later for their chunk
** and first line; named frames, other lines and other kinds do not. */
static void test_name_lua(void)
{
  ljp_store s;
  ljp_frame f;
  ljp_late_name v[3];
  uint32_t src, src2, nm, nm2, other, a, b, c, d, e, g;
  CHECK_EQ(ljp_store_init(&s), 0);
  src = ljp_store_intern(&s, "@a.lua", 6);
  src2 = ljp_store_intern(&s, "@b.lua", 6);
  nm = ljp_store_intern(&s, "step", 4);
  nm2 = ljp_store_intern(&s, "draw", 4);
  other = ljp_store_intern(&s, "called", 6);
  memset(&f, 0, sizeof(f));
  f.kind = LJP_FR_LUA;
  f.source = src; f.linedefined = 10; f.line = 12;
  a = ljp_store_frame(&s, &f);                     /* a.lua:10, line 12 */
  f.line = 14;
  b = ljp_store_frame(&s, &f);                     /* a.lua:10, line 14 */
  f.name = other;
  c = ljp_store_frame(&s, &f);                     /* named where called */
  f.name = 0; f.linedefined = 20;
  d = ljp_store_frame(&s, &f);                     /* a.lua:20: not found */
  f.source = src2; f.linedefined = 10;
  e = ljp_store_frame(&s, &f);                     /* b.lua:10 */
  memset(&f, 0, sizeof(f));
  f.kind = LJP_FR_NATIVE; f.source = src;
  g = ljp_store_frame(&s, &f);                     /* not a Lua frame */
  v[0].source = src2; v[0].linedefined = 10; v[0].name = nm2;
  v[1].source = src; v[1].linedefined = 10; v[1].name = nm;
  v[2].source = src; v[2].linedefined = 30; v[2].name = nm2;
  CHECK_EQ(ljp_store_name_lua(&s, v, 3), 3);       /* a, b, e */
  ljp_store_frame_get(&s, a, &f);
  CHECK(f.name == nm && f.line == 12 && f.linedefined == 10);
  ljp_store_frame_get(&s, b, &f);
  CHECK(f.name == nm && f.line == 14);
  ljp_store_frame_get(&s, c, &f);
  CHECK_EQ(f.name, other);
  ljp_store_frame_get(&s, d, &f);
  CHECK_EQ(f.name, 0);
  ljp_store_frame_get(&s, e, &f);
  CHECK_EQ(f.name, nm2);
  ljp_store_frame_get(&s, g, &f);
  CHECK_EQ(f.name, 0);
  /* the renamed frame is found under its new content, same id */
  ljp_store_frame_get(&s, a, &f);
  CHECK_EQ(ljp_store_frame(&s, &f), a);
  CHECK_EQ(ljp_store_name_lua(&s, v, 0), 0);
  ljp_store_free(&s);
}

int main(void)
{
  test_zones();
  test_labels();
  test_store();
  test_buf();
  test_clock();
  test_name_lua();
  return check_done("core");
}
