-- Aggregation throughput and memory per unique stack: profiles a real
-- program (luacheck; the json workload when luacheck is missing) with
-- ljprof to collect realistic stack keys, then replays them through
-- bench/aggbench.c, which runs ljprof's own ring and table code.
local proc = require("lib.proc")
local stat = require("lib.stat")

local M = {}

function M.run(ctx)
  if not ctx.aggbench then return nil end
  local stacks = proc.TMP .. "/stacks.txt"
  local source = ctx.have.luacheck and "luacheck" or "json"
  local opts = "clock=wall,rate=5000,fmt=jprof,depth=-200,stacks=" .. stacks
  proc.log("throughput: collecting stacks from %s\n", source)
  local env = {}
  for k, v in pairs(ctx.env) do env[k] = v end
  env.LJPROF_BENCH = opts
  assert(proc.run_retry("stacks " .. source, {"luajit", "bench/with_ljprof.lua", ctx.script(source)}, env),
         "the stack collection run crashed")
  proc.log("throughput: replaying %d samples\n", ctx.agg_samples)
  local r = proc.run({ctx.aggbench, stacks, tostring(ctx.agg_samples)}, ctx.env)
  local t = {}
  for k, v in r.out:gmatch("([%w_]+) ([^\n]*)") do t[k] = tonumber(v) or v end
  t.source = source
  t.collect = "LJPROF_BENCH=" .. opts:gsub(",stacks=.*", ",stacks=FILE") ..
              " luajit bench/with_ljprof.lua " .. ctx.script(source)
  return t
end

function M.tables(t)
  local L = {}
  local function p(s) L[#L + 1] = s end
  p(string.format("Stacks: the %d distinct (stack, VM state) keys of one profile of **%s** " ..
    "(`%s`), %.1f frames per sampled stack on average (%.0f bytes per key as `-jprof`'s text " ..
    "format writes it: chunk path, function name and line per frame; %d distinct frames). " ..
    "`bench/aggbench.c` compiles src/ring.c and src/table.c in, interns each frame once (as " ..
    "complete.c's caches hand out a frame id per stack level) and replays %d samples drawn " ..
    "independently from the profile's distribution (so consecutive samples rarely share a " ..
    "stack) through ljprof's per-sample path: ring reserve/publish (the handler's part, " ..
    "without the VM reads), claim, the stack's frame ids interned as one key and the leaf's " ..
    "function, and aggregation into the (stack, VM state, zone) and (function, VM state) count " ..
    "tables whenever the ring (%d records of %d bytes) is half full. The walk that produces " ..
    "the frame ids is not in it (see per-sample cost): the ids are copied into the frame " ..
    "buffer instead, as the walk leaves them. Best of 5 passes over the samples (tables warm); " ..
    "median in brackets.",
    t.keys, t.source, t.collect, t.key_frames_mean or 0, t.key_bytes_mean, t.frames or 0,
    t.samples, t.ring_records, t.record_bytes))
  p("")
  p("| path | ns per sample | samples per second |")
  p("|---|---|---|")
  local rows = {
    {"ring only (reserve, publish, claim, retire)", "ring"},
    {"ring -> count tables (ljprof's aggregation stage, stacks already interned)", "count"},
    {"+ copying the frame ids into the frame buffer", "copy"},
    {"+ hashing them (ljp_hash), no table lookup", "hash"},
    {"**whole path: ring -> interned stack of frame ids -> count tables**", "full"},
    {"whole path, every sample a different stack in turn", "distinct"},
  }
  for _, row in ipairs(rows) do
    local k = row[2]
    if t[k .. "_ns"] then
      p(string.format("| %s | %.1f (%.1f) | %s |", row[1], t[k .. "_ns"], t[k .. "_median_ns"],
                      M.rate(t[k .. "_per_s"])))
    end
  end
  p("")
  local function mem(n)
    local s = t["mem_" .. n .. "_stacks"]
    if not s then return end
    p(string.format("| %d | %.1f | %.0f |", s, t["mem_" .. n .. "_frames_per_stack"] or 0,
                    t["mem_" .. n .. "_bytes_per_stack"]))
  end
  p("Memory held by the stack table, the frame table and both count tables after aggregating " ..
    "each distinct stack once (the profile's own stacks, then 100 000 stacks made by putting " ..
    "a distinct synthetic frame on top of them). The ring is a fixed " ..
    string.format("%.0f KB", t.ring_records * t.record_bytes / 1024) .. " on top.")
  p("")
  p("| unique stacks | frames per stack (mean) | bytes per unique stack |")
  p("|---|---|---|")
  mem(t.keys)
  mem(100000)
  p("")
  return table.concat(L, "\n")
end

function M.rate(x)
  if not x then return "" end
  if x >= 1e6 then return string.format("%.2f M", x / 1e6) end
  return string.format("%.0f k", x / 1e3)
end

return M
