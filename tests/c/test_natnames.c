/* The native names' cache of the last record (symbols.c, natlast): a
** record's outer frames taken from the record before, compared by lookup
** address (a return address is looked up one byte back, a leaf's PC as
** it is), must name every record exactly as a context with no cache of
** any kind does. Addresses in a library of eight named functions
** (tests/native/natlib.c), records made of a shared outer chain and
** random inner frames, some with their C function's frame left to Lua
** (r->cfunc) and some cut (LJP_NATIVE_CUT). Built from ljprof's sources
** (its internal symbols are hidden in the library). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/ljp.h"
#include "../../src/store.h"
#include "../../src/symbols.h"
#include "check.h"

long ljpn_a(long), ljpn_b(long), ljpn_c(long), ljpn_d(long);
long ljpn_e(long), ljpn_f(long), ljpn_g(long), ljpn_h(long);

#define MAXT 40

/* The names ljp_native_names gives r in ctx, as text, joined by ';'. */
static void names_of(ljp_ctx *ctx, const ljp_record *r, char *out, size_t n)
{
  uint32_t ids[LJP_NATIVE_MAX + 1];
  int k, m = ljp_native_names(ctx, NULL, r, ids);
  size_t at = 0;
  out[0] = '\0';
  for (k = 0; k < m && at + 1 < n; k++) {
    ljp_frame f;
    const ljp_str *s;
    ljp_store_frame_get(&ctx->store, ids[k], &f);
    s = ljp_store_text(&ctx->store, f.source);
    at += (size_t)snprintf(out + at, n - at, "%.*s;", (int)s->len, s->s);
  }
}

static ljp_ctx *ctx_new(void)
{
  ljp_ctx *c = calloc(1, sizeof(*c));
  if (!c || ljp_store_init(&c->store) != 0) abort();
  return c;
}

static void ctx_free(ljp_ctx *c)
{
  ljp_native_names_reset(c);
  ljp_store_free(&c->store);
  free(c);
}

/* The names of r with no cache: a context of its own. */
static void names_fresh(const ljp_record *r, char *out, size_t n)
{
  ljp_ctx *c = ctx_new();
  names_of(c, r, out, n);
  ctx_free(c);
}

static void set(ljp_record *r, int n, const uintptr_t *a)
{
  memset(r, 0, sizeof(*r));
  r->nnative = (uint8_t)n;
  memcpy(r->native, a, (size_t)n * sizeof(a[0]));
}

int main(void)
{
  long (*fn[8])(long) = {ljpn_a, ljpn_b, ljpn_c, ljpn_d,
                         ljpn_e, ljpn_f, ljpn_g, ljpn_h};
  uintptr_t pool[8 * 4 + 1], base[LJP_NATIVE_MAX], a[LJP_NATIVE_MAX];
  char got[4096], want[4096];
  ljp_ctx *ctx = ctx_new();
  ljp_record r;
  int i, k, npool = 0, nbase = 0, reused = 0, named = 0;
  unsigned seed = 12345;
  for (i = 0; i < 8; i++) {
    uintptr_t f = (uintptr_t)(void *)fn[i];
    pool[npool++] = f;          /* a return address here names the one before */
    pool[npool++] = f + 1;
    pool[npool++] = f + 7;
    pool[npool++] = f + 16;
  }
  pool[npool++] = 0x10;         /* in no object: "0x..." */

  /* Named as they are: a return address one byte back, a leaf's PC as
  ** it is. */
  a[0] = (uintptr_t)(void *)ljpn_c + 5;
  a[1] = (uintptr_t)(void *)ljpn_b + 5;
  a[2] = (uintptr_t)(void *)ljpn_a + 5;
  set(&r, 3, a);
  names_of(ctx, &r, got, sizeof(got));
  CHECK(strcmp(got, "ljpn_c;ljpn_b;ljpn_a;") == 0);
  /* A leaf at a function's first byte, then the same address as a return
  ** address: the second looks up the byte before, another function's. */
  a[0] = (uintptr_t)(void *)ljpn_b;
  set(&r, 1, a);
  names_of(ctx, &r, got, sizeof(got));
  CHECK(strcmp(got, "ljpn_b;") == 0);
  a[0] = (uintptr_t)(void *)ljpn_c + 5;
  a[1] = (uintptr_t)(void *)ljpn_b;
  set(&r, 2, a);
  names_of(ctx, &r, got, sizeof(got));
  names_fresh(&r, want, sizeof(want));
  CHECK(strcmp(got, want) == 0);
  CHECK(strncmp(got, "ljpn_c;", 7) == 0 && strstr(got, "ljpn_b") == NULL);
  if (strcmp(got, want)) fprintf(stderr, "got %s, want %s\n", got, want);

  /* Random records: an outer chain kept for a while, inner frames new. */
  for (i = 0; i < 3000; i++) {
    int ninner, n;
    seed = seed * 1103515245u + 12345u;
    if (i % 17 == 0) {              /* a new outer chain now and then */
      nbase = (int)((seed >> 8) % 12);
      for (k = 0; k < nbase; k++) {
        seed = seed * 1103515245u + 12345u;
        base[k] = pool[(seed >> 8) % (unsigned)npool];
      }
    }
    seed = seed * 1103515245u + 12345u;
    ninner = (int)((seed >> 8) % 7);
    n = ninner + nbase;
    for (k = 0; k < ninner; k++) {
      seed = seed * 1103515245u + 12345u;
      a[k] = pool[(seed >> 8) % (unsigned)npool];
    }
    for (k = 0; k < nbase; k++) a[ninner + k] = base[k];
    set(&r, n, a);
    seed = seed * 1103515245u + 12345u;
    if ((seed >> 8) % 5 == 0 && n)   /* its C function: Lua names it */
      r.cfunc = (uintptr_t)(void *)fn[(seed >> 12) % 8];
    if ((seed >> 16) % 10 == 0 && n) r.nflags |= LJP_NATIVE_CUT;
    names_of(ctx, &r, got, sizeof(got));
    names_fresh(&r, want, sizeof(want));
    CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want))
      fprintf(stderr, "record %d (%d frames): got %s, want %s\n", i, n, got, want);
    if (strstr(want, "ljpn_")) named++;
    if (nbase && i % 17) reused++;
  }
  CHECK(named > 2000);              /* the names are the functions' */
  CHECK(reused > 2000);             /* records shared their outer frames */
  ctx_free(ctx);
  return check_done("natnames");
}
