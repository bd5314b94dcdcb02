/*
** Test library for the native names' cache (tests/c/test_natnames.c):
** eight exported functions, each long enough that addresses inside it
** name it, laid out one after another in this library's text.
*/
#define NOINLINE __attribute__((noinline))

static volatile long sink;

#define FN(name, k)                                   \
  NOINLINE long name(long n)                          \
  {                                                   \
    long x = 0, i;                                    \
    for (i = 0; i < n; i++) x += (i % (k + 2)) * k;   \
    sink = x;                                         \
    return x + k;                                     \
  }

FN(ljpn_a, 1)
FN(ljpn_b, 2)
FN(ljpn_c, 3)
FN(ljpn_d, 4)
FN(ljpn_e, 5)
FN(ljpn_f, 6)
FN(ljpn_g, 7)
FN(ljpn_h, 8)
