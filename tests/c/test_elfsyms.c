/* The ELF symbol reader's table (src/elfsyms.c): for every object loaded
** in this process (the test itself, libc, libm, the loader, the vDSO),
** what ljp_elfsyms_load returns is sorted by start, one symbol per
** address, and every symbol is what ljp_elfsyms_find returns for its
** start; dlsym's addresses of functions libc and libm export (whether a
** symbol, an IFUNC's implementation or an alias) are named, and the ones
** no alias hides by their own names. The sort it checks is elfsyms.c's
** own (a radix sort and an in-place merge of what is appended: PLT
** stubs, IFUNC implementations), which replaced glibc's qsort. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/elfsyms.h"
#include "check.h"

static int no_proc(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
  (void)pc;
  (void)lo;
  (void)hi;
  return 0;
}

static int objects, symbols;

static int each(struct dl_phdr_info *info, size_t size, void *data)
{
  uintptr_t lo[8], hi[8];
  int n = 0, i;
  uint32_t k;
  ljp_symtab t = {0};
  (void)size;
  (void)data;
  for (i = 0; i < info->dlpi_phnum && n < 8; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
      lo[n] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
      hi[n] = lo[n] + info->dlpi_phdr[i].p_memsz;
      n++;
    }
  if (!n) return 0;
  {
    ljp_elfobj ob = {info->dlpi_name, "", info->dlpi_addr, n, lo, hi, NULL, 0, no_proc};
    ljp_elfsyms_load(&t, &ob);
  }
  objects++;
  symbols += (int)t.ns;
  for (k = 0; k < t.ns; k++) {
    CHECK(t.s[k].lo < t.s[k].hi);
    if (k) CHECK(t.s[k - 1].lo < t.s[k].lo);
    CHECK(ljp_elfsyms_find(&t, t.s[k].lo) == &t.s[k]);
  }
  if (strstr(info->dlpi_name, "libc.so") || strstr(info->dlpi_name, "libm.so")) {
    static const char *const fns[] = {"qsort", "strtod", "fopen", "sin", "exp",
                                      "memcpy", "strlen", "malloc", NULL};
    const char *const *f;
    void *h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
    for (f = fns; h && *f; f++) {
      uintptr_t a = (uintptr_t)dlsym(h, *f);
      const ljp_sym *s;
      int mine = 0;
      for (i = 0; i < n; i++) mine |= a >= lo[i] && a < hi[i];
      if (!a || !mine) continue;   /* another object's */
      s = ljp_elfsyms_find(&t, a);
      CHECK(s != NULL);
      if (s && (!strcmp(*f, "qsort") || !strcmp(*f, "sin") || !strcmp(*f, "fopen"))) {
        char nm[256];
        ljp_elfsyms_name(t.names + s->name, nm, sizeof(nm));
        if (strcmp(nm, *f)) fprintf(stderr, "%s named %s\n", *f, nm);
        CHECK(strcmp(nm, *f) == 0);
      }
    }
    if (h) dlclose(h);
  }
  free(t.s);
  free(t.names);
  return 0;
}

int main(int argc, char **argv)
{
  volatile double x = sin((double)argc);   /* (libm loaded and used) */
  (void)argv;
  (void)x;
  dl_iterate_phdr(each, NULL);
  CHECK(objects >= 4);
  CHECK(symbols > 1000);
  printf("elfsyms: %d objects, %d symbols\n", objects, symbols);
  return check_done("elfsyms");
}
