#define _GNU_SOURCE
/* ljprof's own DWARF CFI unwinder (src/cfi.c) against an oracle.
**
** 1. Normal context: a chain of C functions built -O2 with and without
**    frame pointers, with a variable-size frame, one with several
**    epilogues (remember/restore_state), through libc's qsort; at the
**    deepest point our walk from a getcontext ucontext must give the same
**    return addresses as libunwind's step loop, frame for frame, on the
**    main thread and on a second thread.
** 2. Signal context: SIGPROF (setitimer) during a busy loop (the fp.c
**    fixture, -fno-omit-frame-pointer, calling libm): our walk from the
**    signal's ucontext must match libunwind's from the same ucontext
**    (UNW_INIT_SIGNAL_FRAME), and, when the PC is in the loop's body, the
**    frame-pointer chain.
** Without libunwind (no libunwind-dev at configure time) the oracle parts
** are skipped: exit code 77 after the frame-pointer check. */
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "../../src/cfi.h"
#include "../cfi/fixture.h"
#include "check.h"

#define MAXF 64

/* -- A tiny object registry (what objects.c keeps) ------------------------ */

typedef struct obj {
  ljp_ehtab eh;
  uintptr_t xlo[8], xhi[8];
  int nx;
} obj;
static obj objs[128];
static int nobjs;

static int scan(struct dl_phdr_info *info, size_t size, void *data)
{
  obj *o;
  uintptr_t hdr = 0;
  int i;
  (void)size; (void)data;
  if (nobjs == 128) return 1;
  o = &objs[nobjs];
  memset(o, 0, sizeof(*o));
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_GNU_EH_FRAME) hdr = lo;
    if (ph->p_type != PT_LOAD || !ph->p_memsz) continue;
    if (o->eh.nseg < LJP_EH_SEGS) {
      o->eh.lo[o->eh.nseg] = lo;
      o->eh.hi[o->eh.nseg++] = hi;
    }
    if ((ph->p_flags & PF_X) && o->nx < 8) {
      o->xlo[o->nx] = lo;
      o->xhi[o->nx++] = hi;
    }
  }
  if (hdr) ljp_cfi_init(&o->eh, hdr);
  nobjs++;
  return 0;
}

static const ljp_ehtab *find_obj(uintptr_t pc)
{
  int i, k;
  for (i = 0; i < nobjs; i++)
    for (k = 0; k < objs[i].nx; k++)
      if (pc >= objs[i].xlo[k] && pc < objs[i].xhi[k])
        return objs[i].eh.hdr ? &objs[i].eh : NULL;
  return NULL;
}

static void stack_of_thread(ljp_stack *st)
{
  pthread_attr_t a;
  void *addr;
  size_t size;
  st->lo = st->hi = 0;
  if (pthread_getattr_np(pthread_self(), &a) == 0) {
    if (pthread_attr_getstack(&a, &addr, &size) == 0) {
      st->lo = (uintptr_t)addr;
      st->hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&a);
  }
}

/* Our walk, as the handler does it: out[0] the PC, then return
** addresses. *end: 1 when it reached the outermost frame. gen: nonzero
** lets the rows found be remembered and reused (the handler passes the
** loader's generation; this process loads nothing while it runs). */
static int walk_gen(const void *uc, const ljp_stack *bounds, uintptr_t *out,
                    int *end, uint64_t gen)
{
  ljp_regs r;
  ljp_stack st = *bounds;
  uintptr_t lookup;
  int n = 0, sig = 0, rc;
  ljp_cfi_regs(&r, uc);
  if (r.r[LJP_CFI_RSP] < st.lo + 128 || r.r[LJP_CFI_RSP] >= st.hi) return 0;
  st.lo = r.r[LJP_CFI_RSP] - 128;
  lookup = r.r[LJP_CFI_RA];
  out[n++] = lookup;
  *end = 0;
  while (n < MAXF) {
    rc = ljp_cfi_step(find_obj(lookup), &r, lookup, &st, gen, &sig, NULL);
    if (rc == LJP_CFI_END) *end = 1;
    if (rc != LJP_CFI_OK) break;
    out[n++] = r.r[LJP_CFI_RA];
    lookup = sig ? r.r[LJP_CFI_RA] : r.r[LJP_CFI_RA] - 1;
  }
  return n;
}

static int walk(const void *uc, const ljp_stack *bounds, uintptr_t *out,
                int *end)
{
  return walk_gen(uc, bounds, out, end, 0);
}

static void print_frames(const char *who, const uintptr_t *f, int n)
{
  int i;
  fprintf(stderr, "  %s:", who);
  for (i = 0; i < n; i++) {
    Dl_info di;
    if (dladdr((void *)f[i], &di) && di.dli_sname)
      fprintf(stderr, " %s+%#lx", di.dli_sname,
              (unsigned long)(f[i] - (uintptr_t)di.dli_saddr));
    else
      fprintf(stderr, " %#lx", (unsigned long)f[i]);
  }
  fprintf(stderr, "\n");
}

/* -- 1. Normal context ----------------------------------------------------- */

static int normal_ok, normal_frames, timing;

static double now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Information only (never asserted): the cost of a walk, ours and
** libunwind's, from the same point, per frame. */
static void time_walks(const ucontext_t *uc, const ljp_stack *st)
{
  uintptr_t f[MAXF];
  int i, end, n = 0;
  double t0 = now_ns(), t1;
  for (i = 0; i < 20000; i++) n = walk(uc, st, f, &end);
  t1 = now_ns();
  printf("our walk: %.0f ns per walk of %d frames, %.0f ns per frame\n",
         (t1 - t0) / 20000, n, (t1 - t0) / 20000 / n);
  t0 = now_ns();
  for (i = 0; i < 20000; i++) n = walk_gen(uc, st, f, &end, 1);
  t1 = now_ns();
  printf("our walk, rows remembered: %.0f ns per walk of %d frames, "
         "%.0f ns per frame\n", (t1 - t0) / 20000, n, (t1 - t0) / 20000 / n);
#ifdef HAVE_LIBUNWIND
  {
    unw_context_t uuc;
    unw_cursor_t cur;
    int k = 0;
    unw_getcontext(&uuc);
    t0 = now_ns();
    for (i = 0; i < 20000; i++) {
      unw_init_local(&cur, &uuc);
      for (k = 1; k < MAXF && unw_step(&cur) > 0; k++) {}
    }
    t1 = now_ns();
    printf("libunwind (1.6, its cache warm): %.0f ns per walk of %d frames, "
           "%.0f ns per frame\n", (t1 - t0) / 20000, k, (t1 - t0) / 20000 / k);
  }
#endif
}

static long probe(long n)
{
  ucontext_t uc;
  ljp_stack st;
  uintptr_t ours[MAXF];
  int n_ours, end = 0;
  stack_of_thread(&st);
  getcontext(&uc);
  n_ours = walk(&uc, &st, ours, &end);
  normal_frames = n_ours;
  if (timing) time_walks(&uc, &st);
#ifdef HAVE_LIBUNWIND
  {
    unw_context_t uuc;
    unw_cursor_t cur;
    unw_word_t ip;
    uintptr_t theirs[MAXF];
    int n_lu = 0, i, same = 1;
    unw_getcontext(&uuc);
    unw_init_local(&cur, &uuc);
    unw_get_reg(&cur, UNW_REG_IP, &ip);
    theirs[n_lu++] = (uintptr_t)ip;
    while (n_lu < MAXF && unw_step(&cur) > 0 &&
           unw_get_reg(&cur, UNW_REG_IP, &ip) == 0)
      theirs[n_lu++] = (uintptr_t)ip;
    /* Frame 0 is probe itself at two different points: compare from 1. */
    for (i = 1; i < n_ours && i < n_lu; i++)
      if (ours[i] != theirs[i]) same = 0;
    if (!same || n_ours != n_lu || !end) {
      fprintf(stderr, "normal context: %d frames ours (end %d), %d "
              "libunwind's\n", n_ours, end, n_lu);
      print_frames("ours", ours, n_ours);
      print_frames("libunwind", theirs, n_lu);
    }
    CHECK(same);
    CHECK_EQ(n_ours, n_lu);
  }
#endif
  /* probe, fp_bottom, fp_top, cmp, qsort's frames, omit_sort, omit_multi,
  ** omit_alloca, omit_a, the caller, main or start_thread, ... */
  CHECK(n_ours >= 10);
  CHECK(end);  /* the outermost frame, not a failure */
  normal_ok = 1;
  return n;
}

static void *thread_main(void *arg)
{
  (void)arg;
  omit_a(41, probe);
  return NULL;
}

/* -- 2. Signal context ------------------------------------------------------- */

static ljp_stack main_stack;
static volatile long sig_n, sig_cmp, sig_diff, sig_fp, sig_fp_diff,
    sig_memo_diff,
    sig_deep;
static uintptr_t diff_ours[MAXF], diff_theirs[MAXF];
static int diff_n_ours, diff_n_theirs;
static uintptr_t leaf_lo, leaf_hi, leaf_body;

static void on_prof(int sig, siginfo_t *si, void *ucv)
{
  uintptr_t ours[MAXF];
  int n_ours, end = 0;
  const ucontext_t *uc = ucv;
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  (void)sig; (void)si;
  sig_n++;
  n_ours = walk(ucv, &main_stack, ours, &end);
  {  /* the same walk through the remembered rows (filled by earlier
     ** signals at the same call sites) gives the same frames */
    uintptr_t memo[MAXF];
    int n_memo, end_memo = 0, i;
    n_memo = walk_gen(ucv, &main_stack, memo, &end_memo, 1);
    if (n_memo != n_ours || end_memo != end) sig_memo_diff++;
    for (i = 0; i < n_ours && i < n_memo; i++)
      if (memo[i] != ours[i]) sig_memo_diff++;
  }
  if (n_ours >= 5) sig_deep++;  /* pc, fp_mid or leaf, fp_busy, main, ... */
#ifdef HAVE_LIBUNWIND
  {
    unw_cursor_t cur;
    unw_word_t ip;
    uintptr_t theirs[MAXF];
    int n_lu = 0, i, same = 1;
    if (unw_init_local2(&cur, (unw_context_t *)ucv, UNW_INIT_SIGNAL_FRAME) == 0) {
      unw_get_reg(&cur, UNW_REG_IP, &ip);
      theirs[n_lu++] = (uintptr_t)ip;
      while (n_lu < MAXF && unw_step(&cur) > 0 &&
             unw_get_reg(&cur, UNW_REG_IP, &ip) == 0)
        theirs[n_lu++] = (uintptr_t)ip;
      for (i = 0; i < n_ours && i < n_lu; i++)
        if (ours[i] != theirs[i]) same = 0;
      if (n_ours != n_lu) same = 0;
      sig_cmp++;
      if (!same && !sig_diff++) {
        memcpy(diff_ours, ours, sizeof(ours));
        memcpy(diff_theirs, theirs, sizeof(theirs));
        diff_n_ours = n_ours;
        diff_n_theirs = n_lu;
      }
    }
  }
#endif
  /* In the leaf's body (after its prologue, before its epilogue's ret):
  ** rbp heads the frame-pointer chain leaf -> fp_mid -> fp_busy. */
  if (pc >= leaf_body && pc < leaf_hi && *(const unsigned char *)pc != 0xc3) {
    uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], chain[3];
    int i;
    for (i = 0; i < 3; i++) {
      if (fp < main_stack.lo || fp + 16 > main_stack.hi) break;
      chain[i] = ((const uintptr_t *)fp)[1];
      fp = ((const uintptr_t *)fp)[0];
    }
    sig_fp++;
    if (i < 3 || n_ours < 4 || ours[1] != chain[0] || ours[2] != chain[1] ||
        ours[3] != chain[2])
      sig_fp_diff++;
  }
}

int main(void)
{
  pthread_t th;
  struct sigaction sa;
  struct itimerval it;
  uintptr_t lo, hi;
  int i;
  dl_iterate_phdr(scan, NULL);
  CHECK(nobjs > 3);

  /* 1. Normal context, main thread then another thread. */
  timing = getenv("LJPROF_CFI_TIMING") != NULL;
  omit_a(40, probe);
  timing = 0;
  CHECK(normal_ok);
  printf("normal context, main thread: %d frames\n", normal_frames);
  normal_ok = 0;
  pthread_create(&th, NULL, thread_main, NULL);
  pthread_join(th, NULL);
  CHECK(normal_ok);
  printf("normal context, second thread: %d frames\n", normal_frames);

  /* 2. Signal context. */
  CHECK(ljp_cfi_proc(find_obj((uintptr_t)fp_leaf_addr),
                     (uintptr_t)fp_leaf_addr, &lo, &hi));
  leaf_lo = lo;
  leaf_hi = hi;
  /* The prologue ends after "mov %rsp,%rbp" (48 89 e5). */
  for (i = 0; i < 16 && !leaf_body; i++)
    if (fp_leaf_addr[i] == 0x48 && fp_leaf_addr[i + 1] == 0x89 &&
        fp_leaf_addr[i + 2] == 0xe5)
      leaf_body = leaf_lo + (uintptr_t)i + 3;
  CHECK(leaf_body != 0);
  stack_of_thread(&main_stack);
  fp_busy(10);  /* binds libm's sin before the first signal */
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  memset(&it, 0, sizeof(it));
  it.it_interval.tv_usec = 1000;
  it.it_value.tv_usec = 1000;
  setitimer(ITIMER_PROF, &it, NULL);
  for (i = 0; i < 400 && (sig_n < 300 || sig_fp < 100); i++)
    fp_busy(2000000);
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_PROF, &it, NULL);
  signal(SIGPROF, SIG_IGN);
  printf("signal context: %ld signals, %ld deep walks, %ld compared with "
         "libunwind (%ld differ), %ld frame-pointer chains (%ld differ)\n",
         sig_n, sig_deep, sig_cmp, sig_diff, sig_fp, sig_fp_diff);
  printf("signal context: %ld frames differ between walks with rows found "
         "and rows remembered\n", sig_memo_diff);
  if (sig_diff) {
    fprintf(stderr, "first difference with libunwind (%d, %d frames):\n",
            diff_n_ours, diff_n_theirs);
    print_frames("ours", diff_ours, diff_n_ours);
    print_frames("libunwind", diff_theirs, diff_n_theirs);
  }
  CHECK(sig_n >= 100);
  CHECK(sig_deep >= sig_n * 9 / 10);
  CHECK(sig_fp >= 50);
  CHECK_EQ(sig_fp_diff, 0);
  CHECK_EQ(sig_diff, 0);
  CHECK_EQ(sig_memo_diff, 0);
#ifndef HAVE_LIBUNWIND
  if (check_failed == 0) {
    printf("cfi: libunwind (the oracle) is not installed: comparisons "
           "skipped\n");
    return 77;
  }
#endif
  return check_done("cfi");
}
