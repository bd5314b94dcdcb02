/* Fixtures for tests/c/test_cfi.c: call chains compiled with different
** frame layouts (see tests/meson.build for each file's flags). */
#ifndef CFI_FIXTURE_H
#define CFI_FIXTURE_H
typedef long (*cfi_probe_fn)(long);
/* fp.c: -O2 -fno-omit-frame-pointer */
long fp_top(long n, cfi_probe_fn probe);
double fp_busy(long n);        /* a loop calling libm, three frames deep */
extern const unsigned char *fp_leaf_addr;
/* omit.c: -O2 -fomit-frame-pointer; calls back fp (and libc's qsort) */
long omit_a(long n, cfi_probe_fn probe);
#endif
