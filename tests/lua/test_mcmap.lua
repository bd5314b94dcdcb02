-- Machine code mapped back to IR (src/mcmap.c) on traces of known
-- structure (tests/lua/mcmap_workloads.lua): inlined leaves calling sin,
-- pure float helpers, integer helpers (ADDOV guards), compiled recursion,
-- string.format("%q") from a loop, inlined table-touching methods
-- (bench/lib/methods.lua); and the bench workloads richards, json and
-- nbody. Checked on every trace, against jit.util:
--   - 98% of each workload's traces are mapped (their code decodes and
--     lands on every snapshot boundary; LuaJIT's traces differ between
--     runs, and a rare one left unmapped is printed with its reason);
--   - every call instruction maps exactly to one IR instruction that can
--     call, its return address - 1 to the same one; in traces whose calls
--     are all CALL* instructions, the i-th call to the i-th of them, and its
--     target (call rel32; lea rax, [r14 + d] with r14 = DISPATCH found
--     once; mov rax, imm64) is jit.util.ircalladdr of that CALL's id, as
--     for every call mapped to a CALL*; the head's and LOOP's (GC checks)
--     call lj_gc_step_jit;
--   - every guard branch (jcc to outside the trace) maps exactly to an IR
--     instruction with the guard flag (or the head or tail), and when it
--     goes to exit stub k (jit.util.traceexitstub) to one of snapshot k's
--     instructions (or the head: a side trace's stack check exits
--     through its parent's exit);
--   - every instruction's refs within one snapshot's span, the spans
--     in the code's order;
--   - every snapshot span's anchors aligned (none left to its whole
--     ref range);
--   - the share of scalar add/sub/mul/div instructions mapped exactly to
--     an ADD/SUB/MUL/DIV (the same op), and of code bytes mapped exactly,
--     printed; the float share must reach 80% overall.
local t = require("t")
if jit.arch ~= "x64" then
  print("not x86-64: nothing to test")
  return t.done()
end
local ljprof = require("ljprof")
local util = require("jit.util")
local vmdef = require("jit.vmdef")
local bit = require("bit")

local CLS = {OTHER = 0, MOVE = 1, INT = 2, CMP = 3, FLT = 4, CALL = 5, JCC = 6, JMP = 7}
local FOP = {[1] = "ADD", [2] = "SUB", [3] = "MUL", [4] = "DIV"}
local CALLOPS = {CALLN = true, CALLA = true, CALLL = true, CALLS = true, CALLXS = true}
local CANCALL = {CALLN = true, CALLA = true, CALLL = true, CALLS = true, CALLXS = true,
  TNEW = true, TDUP = true, SNEW = true, XSNEW = true, STRTO = true, TOSTR = true,
  BUFPUT = true, BUFSTR = true, BUFHDR = true, CNEW = true, CNEWI = true, GCSTEP = true,
  OBAR = true, NEWREF = true, FPMATH = true, POW = true, MOD = true, LDEXP = true,
  CONV = true, ALEN = true, HREF = true, DIV = true, TMPREF = true, ATAN2 = true,
  LOOP = true}   -- (LOOP and the head, ref 0: a GC check)
local BIAS = 0x8000

local function opname(o) return (vmdef.irnames:sub(o * 6 + 1, o * 6 + 6):gsub(" ", "")) end

local function i32(s, at)
  local a, b, c, d = s:byte(at, at + 3)
  local v = a + b * 256 + c * 65536 + d * 16777216
  return v >= 2^31 and v - 2^32 or v
end
local function u64(s, at)
  local lo = i32(s, at) % 2^32
  local hi = i32(s, at + 4) % 2^32
  return hi * 2^32 + lo
end

local total = {bytes = 0, exact = 0, calls = 0, callord = 0, targets = 0, guards = 0,
               exitk = 0, exitk_ok = 0, flt = 0, flt_ok = 0, traces = 0, untrusted = 0, spans = 0}
local dispatch   -- r14, found from the first ordinal call through lea
local gcstep
for i = 0, #vmdef.ircall do
  if vmdef.ircall[i] == "lj_gc_step_jit" then gcstep = util.ircalladdr(i) end
end

local function check_trace(name, tr, acc)
  local mc, addr = util.tracemc(tr)
  local info = util.traceinfo(tr)
  if not mc or not info then return end
  local st, why = ljprof._mcmap(tr)
  -- (LuaJIT's traces differ from run to run: a rare trace the decoder
  -- leaves unmapped keeps the estimate, and is counted with its reason;
  -- the workload's share mapped is checked below)
  acc.all = (acc.all or 0) + 1
  if not st then
    acc.unmapped = (acc.unmapped or 0) + 1
    print(string.format("  %s: trace %d not mapped (%s)", name, tr, tostring(why)))
    return
  end
  acc.traces = acc.traces + 1
  acc.bytes, acc.exact = acc.bytes + st.bytes, acc.exact + st.exact_bytes
  acc.spans, acc.untrusted = acc.spans + st.spans, acc.untrusted + st.untrusted
  -- IR: op names, guard flags, operands.
  local ir = {}
  for ref = 1, info.nins do
    local m, ot, op1, op2 = util.traceir(tr, ref)
    if m then ir[ref] = {op = opname(bit.rshift(ot, 8)), guard = bit.band(ot, 0x80) ~= 0, op2 = op2} end
  end
  -- Snapshots' ref ranges and exit stubs.
  local sref, stub = {}, {}
  for k = 0, info.nexit - 1 do
    local s = util.tracesnap(tr, k)
    sref[k] = s and s[0]
    -- (Debian's LuaJIT: traceexitstub(exitno); newer: (tr, exitno))
    local a = util.traceexitstub(tr, 0) ~= util.traceexitstub(tr, 1) and util.traceexitstub(tr, k)
              or util.traceexitstub(k)
    if a then stub[a] = k end
  end
  local ins = ljprof._x64dec(mc, addr)
  local last = ins[#ins]
  t.ok(last and last[1] + last[2] == #mc, name .. ": trace " .. tr .. " decoded whole")
  -- Every instruction's refs lie in one snapshot's span (refs
  -- [snap k's ref, snap k+1's ref), the head ref 0 in snapshot 0's, the
  -- tail nins+1 in the last one's), and the spans follow the code's order.
  local function span_of(ref)
    local k = 0
    for j = 1, info.nexit - 1 do
      if sref[j] and ref >= sref[j] then k = j end
    end
    return k
  end
  local lastk, bad = 0, nil
  for _, x in ipairs(ins) do
    local lo, hi = ljprof._mcmap_refs(tr, x[1])
    if not lo then bad = bad or string.format("+%x unmapped", x[1]) break end
    lo, hi = lo - BIAS, hi - BIAS
    local k1, k2 = span_of(lo), span_of(hi)
    if lo > hi or lo < 0 or hi > info.nins + 1 or k1 ~= k2 or k1 < lastk then
      bad = bad or string.format("+%x -> %d..%d (snapshots %d, %d after %d)", x[1], lo, hi, k1, k2, lastk)
    end
    lastk = math.max(lastk, k1)
  end
  t.ok(not bad, string.format("%s: trace %d refs within one span each, in order%s", name, tr,
                              bad and (": " .. bad) or ""))
  local calls, callrefs = {}, {}
  for ref = 1, info.nins do
    if ir[ref] and CALLOPS[ir[ref].op] then callrefs[#callrefs + 1] = ref end
  end
  for n, x in ipairs(ins) do
    local ofs, len, cls, fop, target = x[1], x[2], x[3], x[4], x[5]
    if cls == CLS.CALL then
      local lo, hi, ex = ljprof._mcmap_refs(tr, ofs)
      local lo2, hi2, ex2 = ljprof._mcmap_refs(tr, ofs + len - 1)
      local ref = lo and lo - BIAS
      acc.calls = acc.calls + 1
      t.ok(ex and ex2 and lo2 == lo and hi == lo and (ref == 0 or ir[ref] and CANCALL[ir[ref].op]),
           string.format("%s: trace %d call at +%x -> %s..%s %s (%s)", name, tr, ofs,
                         tostring(lo and lo - BIAS), tostring(hi and hi - BIAS), tostring(ex),
                         ir[ref or 0] and ir[ref].op or "?"))
      -- its target
      local tg
      if target then
        tg = target
      elseif n > 1 then
        local p = ins[n - 1]
        local b = mc:sub(p[1] + 1, p[1] + p[2])
        if #b == 7 and b:byte(2) == 0x8d and b:byte(3) == 0x86 and b:byte(1) == 0x49 then
          tg = {disp = i32(b, 4)}       -- lea rax, [r14 + d32]
        elseif #b == 10 and b:byte(1) == 0x48 and b:byte(2) == 0xb8 then
          tg = u64(b, 3)                -- mov rax, imm64
        end
      end
      calls[#calls + 1] = {ofs = ofs, ref = ref, tg = tg}
    elseif cls == CLS.JCC and target and (target < addr or target >= addr + #mc) then
      local lo, hi, ex = ljprof._mcmap_refs(tr, ofs)
      local ref = lo and lo - BIAS
      acc.guards = acc.guards + 1
      -- (a guard of the head, before the first IR instruction: ref 0, or
      -- of the tail after the last: nins + 1)
      t.ok(ex and (ref == 0 or ref == info.nins + 1 or (ir[ref] and ir[ref].guard)),
           string.format("%s: trace %d guard at +%x -> %s %s (%s)", name, tr, ofs,
                         tostring(ref), tostring(ex), ir[ref or 0] and ir[ref].op or "?"))
      local k = stub[target]
      if k and ref and ref > 0 then
        acc.exitk = acc.exitk + 1
        local r0 = k == 0 and 1 or sref[k]
        local r1 = sref[k + 1] or info.nins + 2   -- (the last: and the tail)
        if ref >= r0 and ref < r1 then acc.exitk_ok = acc.exitk_ok + 1 end
        t.ok(ref >= r0 and ref < r1, string.format("%s: trace %d guard at +%x to exit %d: ref %d in [%d, %d)",
                                                   name, tr, ofs, k, ref, r0, r1))
      end
    elseif cls == CLS.FLT and FOP[fop] then
      local lo, hi, ex = ljprof._mcmap_refs(tr, ofs)
      acc.flt = acc.flt + 1
      if ex and ir[lo - BIAS] and ir[lo - BIAS].op == FOP[fop] then acc.flt_ok = acc.flt_ok + 1 end
    end
  end
  -- Calls by their order, where all of them are CALL* instructions (but
  -- the GC checks: at the head, ref 0, and at LOOP).
  local gcc = {}
  for _, c in ipairs(calls) do
    if c.ref ~= 0 and not (ir[c.ref] and ir[c.ref].op == "LOOP") then gcc[#gcc + 1] = c end
  end
  local allcalls = calls
  calls = gcc
  if #calls == #callrefs then
    for i, c in ipairs(calls) do
      acc.callord = acc.callord + 1
      t.eq(c.ref, callrefs[i], string.format("%s: trace %d call %d at +%x is CALL %d",
                                             name, tr, i, c.ofs, callrefs[i]))
      local want = util.ircalladdr(ir[callrefs[i]].op2)
      if type(c.tg) == "table" and not dispatch then
        dispatch = want - c.tg.disp   -- r14, from the first call by order
      end
    end
  end
  -- Every call mapped to a CALL* instruction goes to the function of its
  -- id (jit.util.ircalladdr(op2)); those at the head (ref 0) or LOOP, the
  -- GC checks, to lj_gc_step_jit.
  for _, c in ipairs(allcalls) do
    local want
    local op = c.ref and ir[c.ref] and ir[c.ref].op
    if c.ref == 0 or op == "LOOP" then want = gcstep
    elseif op and CALLOPS[op] and op ~= "CALLXS" then want = util.ircalladdr(ir[c.ref].op2) end
    local got = c.tg
    if type(got) == "table" then got = dispatch and dispatch + got.disp end
    if want and got then
      acc.targets = acc.targets + 1
      t.eq(got, want, string.format("%s: trace %d call at +%x (%s) calls its function", name, tr, c.ofs, op or "head"))
    end
  end
end

local works = dofile(t.SRC .. "/tests/lua/mcmap_workloads.lua")(t.SRC, 1)
-- and three bench workloads (object code, strings and tables, floats)
for _, name in ipairs({"richards", "json", "nbody"}) do
  works[#works + 1] = {name = name, text = t.read(t.SRC .. "/bench/workloads/" .. name .. ".lua")}
end
for _, w in ipairs(works) do
  t.case("mcmap_" .. w.name, function()
    jit.flush()
    ljprof._mcmap_clear()
    local chunk = assert(loadstring(w.text, "=" .. w.name))
    local saved, savedw = print, io.write
    print, io.write = function() end, function() end
    chunk()
    print, io.write = saved, savedw
    jit.off()
    collectgarbage("stop")
    local acc = {bytes = 0, exact = 0, calls = 0, callord = 0, targets = 0, guards = 0,
                 exitk = 0, exitk_ok = 0, flt = 0, flt_ok = 0, traces = 0, untrusted = 0, spans = 0}
    for tr = 1, 4000 do
      if util.traceinfo(tr) then check_trace(w.name, tr, acc) end
    end
    collectgarbage("restart")
    jit.on()
    t.ok(acc.traces > 0, w.name .. ": traces made")
    t.ok((acc.unmapped or 0) <= 0.02 * (acc.all or 0),
         string.format("%s: traces mapped: %d of %d", w.name, acc.traces, acc.all or 0))
    t.eq(acc.untrusted, 0, w.name .. ": every snapshot span aligned")
    print(string.format("  %-10s traces %d, %d bytes, %.1f%% exact; %d calls (%d by order, %d targets), " ..
                        "%d guards (%d/%d at their exit's snapshot), float ops %d/%d exact, " ..
                        "%d/%d spans untrusted",
                        w.name, acc.traces, acc.bytes, 100 * acc.exact / math.max(acc.bytes, 1),
                        acc.calls, acc.callord, acc.targets, acc.guards, acc.exitk_ok, acc.exitk,
                        acc.flt_ok, acc.flt, acc.untrusted, acc.spans))
    for k, v in pairs(acc) do total[k] = (total[k] or 0) + v end
  end)
end

t.case("mcmap_totals", function()
  print(string.format("  all: %d traces, %d bytes, %.1f%% exact; float add/sub/mul/div %d/%d (%.1f%%) exact; " ..
                      "guards at their exit's snapshot %d/%d; calls %d (%d by order, %d targets)",
                      total.traces, total.bytes, 100 * total.exact / math.max(total.bytes, 1),
                      total.flt_ok, total.flt, 100 * total.flt_ok / math.max(total.flt, 1),
                      total.exitk_ok, total.exitk, total.calls, total.callord, total.targets))
  t.ok(total.flt > 100 and total.flt_ok >= 0.8 * total.flt, "80% of float ops exact")
  t.ok(total.callord > 40 and total.targets > 50, "calls checked by order and target")
end)

t.done()
