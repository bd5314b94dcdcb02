/* Minimal assertion helpers for the C tests: count, report, exit status. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failed, check_total;

#define CHECK(cond) do { check_total++; if (!(cond)) { check_failed++; \
  fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_EQ(a, b) do { long long va_ = (long long)(a), vb_ = (long long)(b); \
  check_total++; if (va_ != vb_) { check_failed++; \
  fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, \
          __LINE__, #a, va_, #b, vb_); } } while (0)

static int check_done(const char *name)
{
  printf("%s: %d checks, %d failed\n", name, check_total, check_failed);
  return check_failed ? 1 : 0;
}
#endif
