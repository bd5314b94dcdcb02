/* The per-state context stays small (issue 30): the trace event handler's
** tables (the abort index, the line cache: 22.5 KB) live behind a pointer
** in the trace part, allocated only when a run attaches the handler, so a
** context, and each periodic export's snapshot (a context of its own),
** no longer carries them inline. Before: sizeof(ljp_ctx) 25,040 bytes,
** of which ljp_tracest 22,808. */
#include "../../src/ljp.h"
#include "../../src/traces.h"
#include "check.h"

int main(void)
{
  printf("sizeof(ljp_ctx) %zu, ljp_tracest %zu, ljp_trtabs %zu\n",
         sizeof(ljp_ctx), sizeof(ljp_tracest), sizeof(ljp_trtabs));
  CHECK(sizeof(ljp_tracest) <= 1024);
  CHECK(sizeof(ljp_ctx) <= 4096);
  /* The tables themselves did not shrink: what a run with trace events
  ** indexes is unchanged (LJP_MAX_ABORTS records, LJP_LINECACHE lines). */
  CHECK_EQ(sizeof(((ljp_trtabs *)0)->abort_index) /
           sizeof(((ljp_trtabs *)0)->abort_index[0]), 2 * LJP_MAX_ABORTS);
  CHECK_EQ(sizeof(((ljp_trtabs *)0)->linecache) / sizeof(ljp_linecache),
           LJP_LINECACHE);
  return check_done("ctx_size");
}
