-- QA repro (cosmetic): when the startup tick lands in ljprof's own work, the text
-- report's "Hot but interpreted" section lists "[ljprof]" as a hot interpreted
-- function, with "(why its traces aborted: run with /aborts=on)".
--
--   for i in 1 2 3 4; do luajit -jprof=fi1 tests/qa_repros/ljprof_hot_interpreted.lua; done
--
-- Seen in about half the runs (2026-11-29): " 3%  [ljprof]  (why its traces aborted: ...)".
local function burn(n) local x = 0 for i = 1, n do x = x + (i % 7) * 0.5 end return x end
local s = 0
for _ = 1, 30 do s = s + burn(1e6) end
print(s)
