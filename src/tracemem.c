/*
** LuaJIT's compiled traces read from memory (tracemem.h).
**
** What a sample needs of a trace, its machine code range and where it
** started, is in LuaJIT's own objects: the trace array of the state's
** jit_State holds each trace (GCtrace) by number, and a trace holds its
** machine code, the prototype and bytecode it started at and its root.
** Reading them there costs nothing per trace event (luacheck compiles and
** aborts ~230,000 traces a run; a jit.attach handler is called for every
** one) and no Lua call at the safe point (jit.util.tracemc copies the
** machine code into a string). LuaJIT's own exit handling finds a trace
** by PC the same way, by looking through the array.
**
** Learning (ljp_tracemem_probe, once per process, in a Lua state of
** ljprof's own): loop functions of distinct chunks are compiled, each
** into a root trace and a side trace (a branch that turns after 200 of 300
** iterations), until a trace number reaches 8 (the array has grown from
** 8) and at least two chunks ran, at most six; chunks 2.. are loaded from
** a stripped dump of the first (no parse: 3k instructions a chunk, not
** 22k; a stripped chunk takes the name it is loaded under). jit.attach's "start" events give each trace's function,
** start bytecode and parent, jit.util.tracemc its machine code. Then, with
** fault-safe reads:
**   - the trace array's size is the one uint32 after G that is 8 after the
**     first function and has doubled (LuaJIT grows it from 8) when more
**     traces exist;
**   - the trace array is the one word after G whose array holds, at every
**     probe trace's number, an object with that trace's machine code
**     address (and its size, start prototype and PC, root, each at the one
**     offset where every trace agrees);
**   - a prototype's size is the distance from the start prototype to its
**     bytecode, the same for all; its chunk name the one reference that
**     names each chunk's string.
** The readers used at run time are then replayed against the probe's
** traces. Anything that does not come out unique leaves ljp_tml.ok at 0.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include <lauxlib.h>

#include "luastack.h"
#include "tracemem.h"
#include "vmprobe.h"

ljp_tmlayout ljp_tml;

#define GWIN 4096   /* bytes after G examined (global_State + jit_State) */
#define TWIN 160    /* bytes of a trace object examined */
#define PWIN 512    /* largest prototype header accepted */
#define NREC 24     /* probe traces examined */
#define MAXTR 120   /* highest trace number the probe may see */

/* -- Readers ---------------------------------------------------------------- */


int ljp_tm_read(uintptr_t g, int32_t tr, ljp_tmtrace *t)
{
  uintptr_t T = ljp_vm_trace(g, tr), pt, pc;
  memset(t, 0, sizeof(*t));
  if (!T) return 0;
  t->T = T;
  t->mcode = *(const uintptr_t *)(T + (uintptr_t)ljp_tml.t_mcode);
  t->size = *(const uint32_t *)(T + (uintptr_t)ljp_tml.t_szmcode);
  pt = *(const uintptr_t *)(T + (uintptr_t)ljp_tml.t_startpt);
  pc = *(const uintptr_t *)(T + (uintptr_t)ljp_tml.t_startpc);
  t->root = *(const uint16_t *)(T + (uintptr_t)ljp_tml.t_root);
  if (pt) {
    t->bc = pt + (uintptr_t)ljp_tml.pt_size;
    if (pc >= t->bc && ((pc - t->bc) & 3) == 0 &&
        pc - t->bc < ((uintptr_t)4 << 24))
      t->pc = (int32_t)((pc - t->bc) / 4);
    t->sig = ljp_proto_sig(t->bc);
  }
  return 1;
}

/* The trace array of g and its size (0: none), read once for a walk over
** it: the walks below read each slot with one load and skip the empty
** ones, about 4 instructions a slot (ljp_vm_trace per slot reread the
** layout, the size and the array: about 9). Slots holding J->cur, the
** trace being recorded, are skipped as ljp_vm_trace skips them. */
static uint32_t trace_array(uintptr_t g, const uintptr_t **arr)
{
  uint32_t n;
  if (!ljp_tml.ok || !g) return 0;
  n = *(const volatile uint32_t *)(g + (uintptr_t)ljp_tml.g_sizetrace);
  *arr = *(const uintptr_t *const volatile *)(g + (uintptr_t)ljp_tml.g_trace);
  if (!*arr) return 0;
  return n < 65536 ? n : 65536;
}

static inline int not_cur(uintptr_t g, uintptr_t T)
{
  return T - g > (uintptr_t)ljp_tml.g_trace;  /* ljp_vm_trace's rule */
}

int32_t ljp_tm_find(uintptr_t g, uintptr_t pc, ljp_tmtrace *t)
{
  const uintptr_t *arr;
  uint32_t n = trace_array(g, &arr), tr;
  for (tr = 1; tr < n; tr++) {
    uintptr_t T = arr[tr];
    if (T && not_cur(g, T) && ljp_vm_trace_holds(T, pc))
      return ljp_tm_read(g, (int32_t)tr, t) ? (int32_t)tr : 0;
  }
  return 0;
}

int ljp_tm_read_safe(uintptr_t g, int32_t tr, ljp_tmtrace *t, char *buf,
                     size_t n, int *firstline, int *line)
{
  uintptr_t arr, T, pt, pc, s;
  uint32_t size;
  uint16_t root;
  size_t k;
  memset(t, 0, sizeof(*t));
  if (!ljp_tml.ok || !g || tr <= 0 || n < 2 ||
      ljp_peek(&size, g + (uintptr_t)ljp_tml.g_sizetrace, 4) ||
      (uint32_t)tr >= size ||
      ljp_peek(&arr, g + (uintptr_t)ljp_tml.g_trace, 8) || !arr ||
      ljp_peek(&T, arr + 8 * (uintptr_t)tr, 8) || !T ||
      ljp_peek(&t->mcode, T + (uintptr_t)ljp_tml.t_mcode, 8) ||
      ljp_peek(&t->size, T + (uintptr_t)ljp_tml.t_szmcode, 4) ||
      ljp_peek(&pt, T + (uintptr_t)ljp_tml.t_startpt, 8) || !pt ||
      ljp_peek(&pc, T + (uintptr_t)ljp_tml.t_startpc, 8) ||
      ljp_peek(&root, T + (uintptr_t)ljp_tml.t_root, 2))
    return 0;
  t->T = T;
  t->root = root;
  t->bc = pt + (uintptr_t)ljp_tml.pt_size;
  if (pc < t->bc || ((pc - t->bc) & 3) || pc - t->bc >= ((uintptr_t)4 << 24))
    return 0;
  t->pc = (int32_t)((pc - t->bc) / 4);
  {
    int32_t fl[2];
    uint32_t ins;
    if (ljp_peek(&s, pt + (uintptr_t)ljp_tml.pt_chunkname, 8) || !s ||
        ljp_peek(fl, t->bc - (uintptr_t)ljp_lsl.bc_first, 8) ||
        ljp_peek(&ins, t->bc, 4))
      return 0;
    *firstline = fl[0];
    t->sig = (((uint64_t)(uint32_t)fl[0] << 32) ^
              ((uint64_t)(uint32_t)fl[1] << 12)) ^ ins;  /* ljp_proto_sig */
  }
  s += (uintptr_t)ljp_tml.str_size;
  for (k = 0; k + 1 < n; k++) {   /* byte by byte: it may end a page early */
    if (ljp_peek(&buf[k], s + k, 1)) return 0;
    if (!buf[k]) break;
  }
  buf[k] = '\0';
  *line = ljp_luastack_line_bc_safe(t->bc, t->pc);
  return 1;
}

int32_t ljp_tm_find_proto(uintptr_t g, uintptr_t bc, int32_t hint)
{
  uintptr_t pt = bc - (uintptr_t)ljp_tml.pt_size, T;
  const uintptr_t *arr;
  uint32_t n, tr;
  ptrdiff_t sp = ljp_tml.t_startpt;
  if (!ljp_tml.ok || !g || !bc) return 0;
  if (hint > 0 && (T = ljp_vm_trace(g, hint)) &&
      *(const uintptr_t *)(T + (uintptr_t)sp) == pt)
    return hint;
  n = trace_array(g, &arr);
  for (tr = 1; tr < n; tr++)
    if ((T = arr[tr]) && *(const uintptr_t *)(T + (uintptr_t)sp) == pt &&
        not_cur(g, T))
      return (int32_t)tr;
  return 0;
}

const char *ljp_tm_chunkname(uintptr_t bc)
{
  uintptr_t s;
  if (!ljp_tml.ok || !bc) return NULL;
  s = *(const uintptr_t *)(bc - (uintptr_t)ljp_tml.pt_size +
                           (uintptr_t)ljp_tml.pt_chunkname);
  return s ? (const char *)(s + (uintptr_t)ljp_tml.str_size) : NULL;
}

/* -- Learning ------------------------------------------------------------- */

static struct {
  uintptr_t g;
  unsigned char win[2][GWIN];   /* G.. at the two snapshots */
  int32_t maxtr[2];             /* highest trace number started by then */
  int nsnap;
} tp;

/* Lua: snap(k, highest trace number started so far). */
static int tm_snap(lua_State *L)
{
  int k = (int)lua_tointeger(L, 1);
  if (k < 1 || k > 2 || ljp_peek_g(tp.win[k - 1], tp.g, GWIN) != 0) return 0;
  tp.maxtr[k - 1] = (int32_t)lua_tointeger(L, 2);
  tp.nsnap |= k;
  return 0;
}

/* Six loop functions of distinct chunks; each loop becomes hot (a root
** trace) and its branch turns after 200 iterations (a side trace). The
** result: {tr, function, start pc, parent trace or false, exit, mcode size,
** mcode address} per trace that was compiled. */
static const char probe_chunk[] =
  "local snap = ...\n"
  "local jit = require('jit')\n"
  "if not (jit.status and jit.status() and jit.attach) then return nil end\n"
  "local ok, util = pcall(require, 'jit.util')\n"
  "if not ok or not util.tracemc then return nil end\n"
  "local starts, stopped, top = {}, {}, 0\n"
  "local function h(what, tr, fn, pc, otr, oex)\n"
  "  if what == 'start' then\n"
  "    starts[tr] = {fn, pc, otr or false, oex or false}\n"
  "    if tr > top then top = tr end\n"
  "  elseif what == 'stop' then stopped[#stopped + 1] = tr end\n"
  "end\n"
  "jit.attach(h, 'trace')\n"
  "local code = 'local s = 0 for i = 1, 300 do if i > 200 then s = s + 2 '\n"
  "  .. 'else s = s + 1 end end return s'\n"
  "local fns, bc = {}, nil\n"
  "for k = 1, 6 do\n"
  "  fns[k] = loadstring(bc or code, '=ljprof-trace-probe-' .. k)\n"
  "  bc = bc or string.dump(fns[k], true)\n"
  "  fns[k]()\n"
  "  if k == 1 then snap(1, top) end\n"
  "  if k > 1 and top >= 8 then break end\n"
  "end\n"
  "snap(2, top)\n"
  "jit.attach(h)\n"
  "local out = {}\n"
  "for _, tr in ipairs(stopped) do\n"
  "  local s = starts[tr]\n"
  "  local mc, addr = util.tracemc(tr)\n"
  "  if s and mc and addr then\n"
  "    out[#out + 1] = {tr, s[1], s[2], s[3], s[4], #mc, addr}\n"
  "  end\n"
  "end\n"
  "return out, fns\n";

typedef struct tmrec {
  int32_t tr, pc, root;
  uintptr_t fn, bc, mcode, source;
  uint32_t size;
  unsigned char T[TWIN];
} tmrec;

static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static int plausible(uint64_t p)
{
  return p >= 65536 && p < ((uint64_t)1 << 47) && !(p & 7);
}

/* LuaJIT grows the trace array from 8 by doubling. */
static uint32_t expected_size(int32_t maxtr)
{
  uint32_t n = 8;
  while (n <= (uint32_t)maxtr) n *= 2;
  return n;
}

static int fail(const char *why)
{
  snprintf(ljp_tml.why, sizeof(ljp_tml.why), "%s", why);
  return 0;
}

#define ONE_OFFSET(var, step, lim, cond) \
  LJP_ONE_OFFSET(var, step, lim, tmrec, cond)

static int learn(lua_State *S, tmrec *rec, int nrec)
{
  uint32_t e1 = expected_size(tp.maxtr[0]), e2 = expected_size(tp.maxtr[1]);
  ptrdiff_t s_off = -1, a_off = -1, o, m = -1, d = -1;
  int n, i, roots = 0, sides = 0;
  uintptr_t arr[MAXTR + 1];
  (void)S;
  if (e1 == e2) return fail("the trace array did not grow in the probe");
  if (tp.maxtr[1] > MAXTR) return fail("too many traces in the probe state");
  /* The size of the trace array: 8 after the first function, doubled. */
  for (n = 0, o = 0; o + 4 <= GWIN; o += 4)
    if (rd32(tp.win[0] + o) == e1 && rd32(tp.win[1] + o) == e2) {
      n++;
      s_off = o;
    }
  if (n != 1) return fail("no single trace array size");
  /* The trace array: entry 0 empty, each probe trace's number its object,
  ** whose machine code address lies at one offset for all of them (a
  ** dozen 64-bit addresses that must all match: the first word that
  ** passes is taken, and the readers are replayed below). The words that
  ** changed since the first snapshot are tried first: the array grew in
  ** between and was most likely moved, and every try is a system call. */
  for (n = 0; n < 2 && a_off < 0; n++) {
    for (o = 0; o + 8 <= GWIN && a_off < 0; o += 8) {
      uint64_t p = rd64(tp.win[1] + o);
      ptrdiff_t mm;
      if ((n == 0) != (p != rd64(tp.win[0] + o))) continue;
      if (!plausible(p) || ljp_peek(arr, p, 8u * (uint32_t)(tp.maxtr[1] + 1)))
        continue;
      if (arr[0] != 0) continue;
      for (i = 0; i < nrec; i++)
        if (!plausible(arr[rec[i].tr]) ||
            ljp_peek(rec[i].T, arr[rec[i].tr], TWIN))
          break;
      if (i < nrec) continue;
      for (mm = 0; mm + 8 <= TWIN && a_off < 0; mm += 8) {
        for (i = 0; i < nrec && rd64(rec[i].T + mm) == rec[i].mcode; i++) {}
        if (i == nrec) {
          a_off = o;
          m = mm;
        }
      }
    }
  }
  if (a_off < 0) return fail("no trace array");
  for (i = 0; i < nrec; i++) {
    if (rec[i].root) sides++;
    else roots++;
  }
  if (!roots || !sides) return fail("the probe made no side trace");
  ljp_tml.g_trace = a_off;
  ljp_tml.g_sizetrace = s_off;
  ljp_tml.t_mcode = m;
  ONE_OFFSET(ljp_tml.t_szmcode, 4, TWIN, rd32(r->T + o) == r->size);
  ONE_OFFSET(ljp_tml.t_startpc, 8, TWIN,
             rd64(r->T + o) == r->bc + 4u * (uint32_t)r->pc);
  ONE_OFFSET(ljp_tml.t_root, 2, TWIN, rd16(r->T + o) == (uint32_t)r->root);
  /* The start prototype lies a fixed distance before its bytecode. */
  ONE_OFFSET(ljp_tml.t_startpt, 8, TWIN,
             rd64(r->T + o) < r->bc && r->bc - rd64(r->T + o) <= PWIN &&
             r->bc - rd64(r->T + o) == rec[0].bc - rd64(rec[0].T + o));
  if (ljp_tml.t_szmcode < 0 || ljp_tml.t_startpc < 0 || ljp_tml.t_root < 0 ||
      ljp_tml.t_startpt < 0)
    return fail("trace fields not found once each");
  d = (ptrdiff_t)(rec[0].bc - rd64(rec[0].T + ljp_tml.t_startpt));
  ljp_tml.pt_size = d;
  /* The chunk name: the one reference in the prototype that points at
  ** each chunk's name string. */
  {
    unsigned char hdr[NREC][PWIN];
    ptrdiff_t c, found = -1;
    int nc = 0;
    for (i = 0; i < nrec; i++)
      if (ljp_peek(hdr[i], rec[i].bc - (uintptr_t)d, (size_t)d))
        return fail("prototype unreadable");
    for (c = 0; c + 8 <= d; c += 8) {
      for (i = 0; i < nrec && rd64(hdr[i] + c) + (uint64_t)ljp_tml.str_size ==
                                  rec[i].source; i++) {}
      if (i == nrec) { nc++; found = c; }
    }
    if (nc != 1) return fail("no single chunk name in a prototype");
    ljp_tml.pt_chunkname = found;
  }
  return 1;
}

/* The readers, against what jit.util and jit.attach said. */
static int replay(tmrec *rec, int nrec)
{
  int i;
  for (i = 0; i < nrec; i++) {
    ljp_tmtrace t;
    const char *cn;
    if (!ljp_tm_read(tp.g, rec[i].tr, &t) || t.mcode != rec[i].mcode ||
        t.size != rec[i].size || t.bc != rec[i].bc || t.pc != rec[i].pc ||
        t.root != rec[i].root || !ljp_vm_trace_holds(t.T, rec[i].mcode) ||
        ljp_vm_trace(tp.g, rec[i].tr) != t.T)
      return fail("a trace read back differently");
    if (ljp_tm_find(tp.g, rec[i].mcode + rec[i].size - 1, &t) != rec[i].tr)
      return fail("a trace not found by its machine code");
    cn = ljp_tm_chunkname(rec[i].bc);
    if (!cn || (uintptr_t)cn != rec[i].source)
      return fail("a chunk name read back differently");
  }
  return 1;
}

int ljp_tracemem_probe(lua_State *S)
{
  static int done;
  tmrec rec[NREC];
  int top = lua_gettop(S), nrec = 0, i, ok = 0, res;
  if (done) return ljp_tml.ok;
  done = 1;
  memset(&tp, 0, sizeof(tp));
  if (!ljp_vml.gc64 || !ljp_lsl.lines_ok)
    return fail("frame or line layout unknown");
  if (!(tp.g = ljp_vm_global(S))) return fail("global state unknown");
  /* GCstr: its characters follow the object. */
  lua_pushliteral(S, "ljprof");
  ljp_tml.str_size = (ptrdiff_t)((uintptr_t)lua_tostring(S, -1) -
                                 (uintptr_t)lua_topointer(S, -1));
  lua_pop(S, 1);
  if (ljp_tml.str_size < 8 || ljp_tml.str_size > 64)
    return fail("string layout unknown");
  if (luaL_loadbuffer(S, probe_chunk, sizeof(probe_chunk) - 1,
                      "=ljprof-trace-probe") != 0) {
    lua_settop(S, top);
    return fail("probe chunk");
  }
  lua_pushcfunction(S, tm_snap);
  if (lua_pcall(S, 1, 2, 0) != 0 || !lua_istable(S, -2) || tp.nsnap != 3) {
    lua_settop(S, top);
    return fail("no JIT, or the probe loops were not compiled");
  }
  res = lua_gettop(S) - 1;                  /* the records; then fns */
  for (i = 1; nrec < NREC; i++) {
    tmrec *r = &rec[nrec];
    lua_Debug ar;
    int row;
    lua_rawgeti(S, res, i);
    if (!lua_istable(S, -1)) { lua_pop(S, 1); break; }
    row = lua_gettop(S);
    memset(r, 0, sizeof(*r));
    lua_rawgeti(S, row, 1);
    r->tr = (int32_t)lua_tointeger(S, -1);
    lua_rawgeti(S, row, 3);
    r->pc = (int32_t)lua_tointeger(S, -1);
    lua_rawgeti(S, row, 4);                   /* parent (false: a root) */
    lua_rawgeti(S, row, 5);                   /* exit (-1: stitched) */
    if (lua_isnumber(S, -2) && lua_tointeger(S, -1) >= 0) {
      int32_t parent = (int32_t)lua_tointeger(S, -2);
      int k;
      r->root = parent;
      for (k = 0; k < nrec; k++)              /* the parent's own root */
        if (rec[k].tr == parent && rec[k].root) r->root = rec[k].root;
    }
    lua_rawgeti(S, row, 6);
    r->size = (uint32_t)lua_tointeger(S, -1);
    lua_rawgeti(S, row, 7);
    r->mcode = (uintptr_t)lua_tonumber(S, -1);
    lua_rawgeti(S, row, 2);                   /* the start function */
    r->fn = (uintptr_t)lua_topointer(S, -1);
    r->bc = ljp_fn_bc(r->fn);
    if (lua_isfunction(S, -1) && lua_getinfo(S, ">S", &ar) && ar.source)
      r->source = (uintptr_t)ar.source;       /* kept alive by fns */
    lua_settop(S, row - 1);
    if (r->tr > 0 && r->tr <= tp.maxtr[1] && r->bc && r->source &&
        r->size && r->mcode)
      nrec++;
  }
  if (nrec < 4) {
    lua_settop(S, top);
    return fail("too few probe traces");
  }
  if (learn(S, rec, nrec)) {
    ljp_tml.ok = 1;                           /* the readers check it */
    ok = replay(rec, nrec);
    ljp_tml.ok = ok;
    ljp_tml.traces = nrec;
  }
  lua_settop(S, top);
  return ok;
}
