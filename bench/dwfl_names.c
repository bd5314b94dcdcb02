/*
** The elfutils side of docs/decisions.md's "Why not elfutils" table: what
** naming native frames with libdwfl would cost in the profiled process.
** Loads libdw.so.1 with dlopen (only the runtime package libdw1 is
** needed, no headers), reports this process's objects, then names
** libc's qsort internals (msort_with_tmp, a static function: found only
** in libc6-dbg's debug file) and memcpy's implementation, times a
** repeated lookup, and asks for the inline scopes of a few addresses.
**   cc -O2 bench/dwfl_names.c -o dwfl_names -ldl && ./dwfl_names
** ljprof's side: bench/names_cost.lua. The offset 0x3f960 is Debian 12's
** libc 2.36 (nm on its debug file); elsewhere pass another: ./dwfl_names 0x...
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct { void *find_elf, *find_debuginfo, *section_address; char **debuginfo_path; } Dwfl_Callbacks;
typedef struct { void *addr, *cu, *abbrev; long padding; } Dwarf_Die;  /* libdw.h's layout */

static double now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long maxrss_kb(void)
{
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_maxrss;
}

#define SYM(h, name) dlsym(h, name)

int main(int argc, char **argv)
{
  static char *debuginfo_path = NULL;
  uintptr_t off = argc > 1 ? strtoul(argv[1], NULL, 16) : 0x3f960;
  double t0 = now_ms(), t1, t2, t3, t4, t5;
  long rss0 = maxrss_kb();
  void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  Dwfl *(*begin)(const Dwfl_Callbacks *);
  void (*report_begin)(Dwfl *);
  int (*proc_report)(Dwfl *, int);
  int (*report_end)(Dwfl *, void *, void *);
  Dwfl_Module *(*addrmodule)(Dwfl *, uintptr_t);
  const char *(*addrname)(Dwfl_Module *, uintptr_t);
  Dwarf_Die *(*addrdie)(Dwfl_Module *, uintptr_t, uintptr_t *);
  int (*getscopes)(Dwarf_Die *, uintptr_t, Dwarf_Die **);
  int (*tag)(Dwarf_Die *);
  const char *(*diename)(Dwarf_Die *);
  Dwfl_Callbacks cb;
  Dwfl *d;
  Dwfl_Module *m;
  Dl_info di;
  const char *name, *mname = NULL;
  uintptr_t a, mc;
  int i, k;
  if (!h) {
    printf("no libdw.so.1: %s\n", dlerror());
    return 1;
  }
  t1 = now_ms();
  begin = SYM(h, "dwfl_begin");
  report_begin = SYM(h, "dwfl_report_begin");
  proc_report = SYM(h, "dwfl_linux_proc_report");
  report_end = SYM(h, "dwfl_report_end");
  addrmodule = SYM(h, "dwfl_addrmodule");
  addrname = SYM(h, "dwfl_module_addrname");
  addrdie = SYM(h, "dwfl_module_addrdie");
  getscopes = SYM(h, "dwarf_getscopes");
  tag = SYM(h, "dwarf_tag");
  diename = SYM(h, "dwarf_diename");
  cb.find_elf = SYM(h, "dwfl_linux_proc_find_elf");
  cb.find_debuginfo = SYM(h, "dwfl_standard_find_debuginfo");
  cb.section_address = NULL;
  cb.debuginfo_path = &debuginfo_path;
  d = begin(&cb);
  report_begin(d);
  proc_report(d, getpid());
  report_end(d, NULL, NULL);
  t2 = now_ms();
  dladdr((void *)qsort, &di);
  a = (uintptr_t)di.dli_fbase + off + 5;
  m = addrmodule(d, a);
  name = m ? addrname(m, a) : NULL;
  t3 = now_ms();
  for (i = 0; i < 10000; i++) {
    m = addrmodule(d, a + (i & 63));
    if (m) addrname(m, a + (i & 63));
  }
  t4 = now_ms();
  mc = (uintptr_t)dlsym(RTLD_DEFAULT, "memcpy");
  if ((m = addrmodule(d, mc))) mname = addrname(m, mc);
  t5 = now_ms();
  printf("dlopen libdw %.2f ms; report %.2f ms; first name in libc %.2f ms (%s); "
         "%.1f us per later name; memcpy is %s (%.2f ms); maxrss +%ld KB\n",
         t1 - t0, t2 - t1, t3 - t2, name ? name : "?", (t4 - t3) * 1e3 / 10000,
         mname ? mname : "?", t5 - t4, maxrss_kb() - rss0);
  for (k = 0; k < 3; k++) {  /* inline frames: the DWARF scopes */
    uintptr_t b = a + 0x40 + 0x100 * (uintptr_t)k, bias = 0;
    Dwarf_Die *cu, *sc = NULL;
    double s0 = now_ms();
    int n;
    m = addrmodule(d, b);
    cu = m ? addrdie(m, b, &bias) : NULL;
    n = cu ? getscopes(cu, b - bias, &sc) : -1;
    printf("scopes at libc+0x%lx: %.2f ms:", (unsigned long)(b - (uintptr_t)di.dli_fbase),
           now_ms() - s0);
    for (i = 0; i < n; i++)
      if (tag(&sc[i]) == 0x1d || tag(&sc[i]) == 0x2e)  /* inlined, subprogram */
        printf(" %s%s", diename(&sc[i]), tag(&sc[i]) == 0x1d ? " (inlined)" : "");
    printf("\n");
    free(sc);
  }
  return 0;
}
