-- The x86-64 decoder (src/x64dec.c) against binutils' objdump: every
-- instruction boundary, every relative call/jump target and the classes
-- of calls, jumps and scalar float ops agree, over the machine code of
-- every trace of the bench workloads and of tests/lua/mcmap_workloads.lua
-- (copied as each trace is made: mcode_dump.lua) and the text of LuaJIT,
-- libc and libm (tests/c/x64dec_oracle.c does the comparison).
local t = require("t")
if jit.arch ~= "x64" then
  print("not x86-64: nothing to test")
  return t.done()
end
local ORACLE = assert(os.getenv("LJPROF_X64ORACLE"), "LJPROF_X64ORACLE not set (run from meson)")
local dir = t.tmpdir()
local OBJDUMP = "objdump -D -b binary -m i386:x86-64 --insn-width=16 "

local function sh(cmd)
  local out, code = t.sh_in(dir, cmd)
  return out, code
end

local totals = {insns = 0, mismatches = 0, targets = 0, calls = 0, jccs = 0, flts = 0, bytes = 0}
local function add(out)
  local r = {}
  for k, v in out:gmatch("(%a+) (%d+)") do r[k] = tonumber(v) end
  for k in pairs(totals) do if r[k] then totals[k] = totals[k] + r[k] end end
  return r
end

t.case("x64dec_traces_match_objdump", function()
  local progs = {}
  for _, w in ipairs(dofile(t.SRC .. "/tests/lua/mcmap_workloads.lua")(t.SRC, 1)) do
    local p = dir .. "/" .. w.name .. ".lua"
    t.write(p, w.text)
    progs[#progs + 1] = {w.name, p, t.SRC .. "/tests/lua"}
  end
  for _, name in ipairs({"binarytrees", "coroutines", "json", "mandelbrot", "mixed",
                         "nbody", "richards", "spectralnorm", "strings", "tablechurn"}) do
    progs[#progs + 1] = {name, t.SRC .. "/bench/workloads/" .. name .. ".lua",
                         t.SRC .. "/bench/workloads"}
  end
  local ntr = 0
  for _, p in ipairs(progs) do
    local mc = dir .. "/" .. p[1] .. ".mc"
    local out, code = t.sh_in(p[3], t.LUAJIT .. " " .. t.q(t.SRC .. "/tests/lua/mcode_dump.lua") ..
                              " " .. t.q(mc) .. " " .. t.q(p[2]) .. " >/dev/null")
    t.eq(code, 0, p[1] .. " ran: " .. out)
    out = sh(t.q(ORACLE) .. " --traces " .. t.q(mc) .. " " .. t.q(mc .. ".bin"))
    local n, bytes = out:match("traces (%d+) bytes (%d+)")
    t.ok(n, p[1] .. ": " .. out)
    ntr = ntr + (tonumber(n) or 0)
    totals.bytes = totals.bytes + (tonumber(bytes) or 0)
    if tonumber(bytes or 0) > 0 then
      out, code = sh(OBJDUMP .. "--adjust-vma=0 " .. t.q(mc .. ".bin") .. " | " ..
                     t.q(ORACLE) .. " --traces " .. t.q(mc))
      local r = add(out)
      t.ok(code == 0 and r.mismatches == 0 and r.insns and r.insns > 0,
           p[1] .. ": " .. out)
    end
  end
  print(string.format("  traces %d, %d bytes: %d instructions, %d mismatches, %d targets, " ..
                      "%d calls, %d jcc, %d float ops", ntr, totals.bytes, totals.insns,
                      totals.mismatches, totals.targets, totals.calls, totals.jccs, totals.flts))
  t.ok(ntr >= 100 and totals.insns >= 20000, "a large trace corpus")
end)

t.case("x64dec_library_text_matches_objdump", function()
  local luajit = sh("readlink -f \"$(command -v " .. t.q(t.LUAJIT) .. ")\"")
  luajit = luajit:gsub("%s+$", "")
  local libs = {luajit}
  local ldd = sh("ldd " .. t.q(luajit))
  for _, lib in ipairs({"libluajit", "libc.so", "libm.so"}) do
    local path = ldd:match(lib:gsub("%.", "%%.") .. "[^\n]-=> (%S+)")
    if path then libs[#libs + 1] = path end
  end
  local bytes, insns, mism = 0, 0, 0
  for i, lib in ipairs(libs) do
    local vma = sh("objdump -h " .. t.q(lib) .. " | awk '$2==\".text\"{print $4}'"):match("%x+")
    t.ok(vma, lib .. ": a .text section")
    if vma then
      local bin = dir .. "/lib" .. i .. ".bin"
      local _, c = sh("objcopy -O binary --only-section=.text " .. t.q(lib) .. " " .. t.q(bin))
      t.eq(c, 0, "objcopy " .. lib)
      local size = #(t.read(bin) or "")
      local out, code = sh(OBJDUMP .. "--adjust-vma=0x" .. vma .. " " .. t.q(bin) .. " | " ..
                           t.q(ORACLE) .. " " .. t.q(bin) .. " 0x" .. vma)
      local r = add(out)
      t.ok(code == 0 and r.mismatches == 0 and (r.insns or 0) > 1000, lib .. ": " .. out)
      print(string.format("  %s: %d bytes, %s", lib, size, out:match("insns[^\n]*") or out))
      bytes, insns, mism = bytes + size, insns + (r.insns or 0), mism + (r.mismatches or 0)
    end
  end
  print(string.format("  library text: %d bytes, %d instructions, %d mismatches", bytes, insns, mism))
  t.ok(bytes >= 2000000, "at least 2 MB of library text")
end)

t.rmdir(dir)
t.done()
