-- Budgets of the cost gate (bench/cost/gate.lua --check, test cost_gate):
-- ljprof's own instructions (callgrind, inclusive), debugoptimized build,
-- Debian's gcc 12 and LuaJIT 2.1.0-beta3, measured on 2026-11-28.
--
-- The start figures repeat exactly from run to run: measured + 10% (and
-- within the issue's 3 M).
--
-- Per call, at the depth where the work is done (not spread over samples):
--   handler_*    the signal handler's instructions per signal it took
--   safepoint_*  the Lua hook's per safe point (completing its signals'
--                records included; the one-time symbol and snapshot-layout
--                loads taken out)
-- Each moves a little from run to run with where the signals land (in a
-- trace, in the interpreter, how many native frames) and how many signals
-- a safe point serves (4-6 under valgrind): 4-25% between the smallest
-- and the largest of eleven runs (five of the library before the start
-- cuts, whose handler and hook are the same, one after by hand, five of
-- `meson test cost_gate` in a row, on a machine shared with other jobs).
-- Budget: the largest of the eleven + 15%, rounded up. A handler doing
-- its captures twice (10.0k, 3.7k, 20.6k per signal) and a safe point
-- with a planted 20k-instruction loop (37.5k, 36.0k, 80.4k) fail every
-- figure; the per-sample budgets before (14,500, 4,000, 6,000) passed
-- both (11,960, 3,110, 4,397). The combined per-sample figure, which divided
-- the safe points' work by the timer's expiries, is printed but not
-- gated.
-- The issue's targets: per sample at depth 20 <= 8k native off, <= 15k
-- native on, the same with 20,000 functions. deepi.per_sample_* holds them
-- (the handler per signal + a whole safe point, on the interpreted leaf
-- where a safe point serves about one signal): the budget is the target.
--
-- 2026-11-29 (issue 29, second pass): the native walk's CFI rows found by
-- address range, its step over the registers with a rule only (cfi.c);
-- the live levels shared with the previous safe point taken from it, a
-- leaf's function text cached (luaframes.c). Two runs of the gate each,
-- before (9676a6e) and after: budgets lowered where the figure fell, to
-- the largest of the runs after + 15% (the file's rule for per-call
-- figures: their spread between runs reached 25%; +10% would fail on
-- drift), rounded up; the others kept.
--
-- 2026-11-29 (issue 29, third pass: the default mode's fixed cost and
-- per-sample cost; wt-cost): the record map's probe learnt in the
-- layouts' own Lua state (one state made and closed per process, not
-- two: -0.29 M), jit.vmdef's two name strings read from its text (its
-- require parsed all of its tables: -0.62 M), the probe's event windows
-- in blocks of 64 KB (one block of 0.5 MB and more, freed, raised glibc's
-- dynamic mmap threshold: the safe point's 0.4 MB name caches then came
-- from the heap and calloc zeroed them, about 0.30 M instructions at the
-- first sample of a run, 3-8k a safe point over these short runs), a
-- trace's decoded runs copied into its record map (no mutex per sample,
-- mcmap.c). Two gate runs before (a8c491e) and three after (the last two
-- on the final code; the first only without the 64 KB blocks, whose
-- per-call figures are the same code's): starts measured + 10%, the
-- per-call figures that fell the largest after + 15% (manyN: + 25%, as
-- below), rounded up; a figure a run before exceeded its budget with
-- (many20000.trace_map) re-based on all seven runs; the others kept.
--
-- 2026-11-29 (issue 29, fourth pass: the start; wt-cost): the layouts'
-- own state learns with its collector stopped, the record probe's
-- opcodes found in C, the trace memory probe's chunks cut to those the
-- trace array's growth needs (4 of 6) and loaded from a stripped dump,
-- the fast-function walk under one lock with its names in blocks, the
-- program's C names walked once per start (not also at require), the
-- J-state probe reading G in place, a recording's events kept in one
-- block with its trace (bench/cost/callgrind.lua also stopped counting
-- the record probe's callback twice). Two gate runs (5999208, fd7c5d7):
-- starts measured + 10% (the issue's 3 M is met, 2,959,386-2,975,260
-- over six LUA_PATH lengths, but not gated at 3 M: a 1% margin would
-- trip on a checkout path that moves the probes' heap layout); the
-- per-call figures, which these changes leave alone, kept.
--
-- 2026-11-29 (issue 29, the handler's native walk; wt-cfi): CFI rows kept
-- for their whole range (granules of 256 B and 4 KB, a row filed under
-- each it covers), in the form the step reads, stepped with one bounds
-- check when every rule is a saved value; CIEs kept by address; a frame in
-- the span of the one before skips the object search and check. Gate runs
-- before (284ecaf, two) and after (six: two of the final code, four of
-- code that differed only in ljp_cfi_regs' loop and find_row's inlining;
-- deepi four): the handler_native_on budgets lowered to the largest after
-- + 15%, rounded up (the rule above); the others kept.
--
-- 2026-11-29 (issue 29, the safe point on trace churn; wt-sp): no walk
-- over the trace array for a PC in a loaded object's code, the walks that
-- remain reading the array once; a record's outer native frames taken
-- from the record before (natlast, symbols.c), names interned without
-- snprintf; ljp_objects_is_self against ljprof's own segments; a level's
-- chunk name read from its prototype. Two gate runs before (284ecaf),
-- four after (manyN: seven, two of them before the last change to the
-- native names), the same hour: deep.safepoint_native_on 20,620-21,040 ->
-- 17,289-18,142, deep.safepoint_native_off 17,151-17,487 -> 15,500-16,179,
-- deepi.safepoint_native_on 8,133-8,213 -> 7,531-7,602, many2000
-- 31,736-36,089 -> 25,640-29,694, many20000 31,075-32,427 ->
-- 24,859-28,809. Lowered to the largest after + 15% (manyN: + 25%),
-- rounded up; the others kept.
--
-- 2026-11-29 (issue 29, a trace's start function and unnamed live frames
-- named at the run's end; wt-names): no walk of the globals at a safe
-- point, live levels read lately passed over (names.c). With wt-sp and
-- wt-cfi merged, three gate runs: many2000.safepoint_native_on
-- 19,174-19,774, many20000 20,560-21,618: lowered to the largest + 25%,
-- rounded up (the manyN rule above). The end-of-run search (0.14-0.17 M
-- once per run with samples) is in no gated figure: the idle runs take
-- no sample and leave nothing to name.
return {
  -- at start: loading, record(), stop() (no sample taken; no output
  -- written since the output option is the Lua writer's, bench/cost/run.lua)
  -- inline=recorded, the default since 2026-11-29 (issue 26, src/irmap.c),
  -- adds to every start the record layout's probe (run.c irmap_up: 1.75 M,
  -- ljprof's own state 0.30 M and its probe 1.45 M, once per process) and
  -- the "record" handler's own instructions per recorded bytecode (about
  -- 270; LuaJIT's dispatch of the event, about 640 more, is not ljprof's):
  -- deep 4,531,638 (2 runs), many20000 5,845,935, many2000 5,886,041
  -- measured (before: 2,679,085, 2,681,027, 2,705,181). inline=snapshots
  -- keeps the old figures. Budget: measured + 10%.
  -- Third pass: 3,654,867 (deep), 4,961,560 (many20000), 4,981,904
  -- (many2000), 3,653,010 (deepi), both runs (before: 4,547,287-4,560,779,
  -- 5,858,199-5,891,157, 5,872,013-5,911,702, 4,545,349-4,558,832). Still
  -- above the issue's 3 M: the probe's chunk parsed (0.30 M) and run
  -- (its six traces recorded and compiled, 0.45 M), beside the layouts'
  -- probes (1.6 M) and state (0.27 M) inline=snapshots also pays.
  ["deep.start"] = 3270000,              -- 2,972,295 measured (recorded;
                                         -- 3,654,867 before the fourth pass)
  ["many20000.start"] = 4362000,         -- 3,965,087 measured (recorded;
                                         -- 4,961,560 before)
  -- depth 20, a Lua leaf, 1 ms of CPU, native frames on / off
  ["deep.handler_native_on"] = 4800,      -- 3,839-4,166 measured (5,069-5,368
                                          -- before wt-cfi; 6,108-6,496 before
                                          -- the CFI rows by range)
  -- inline=recorded (the default since 2026-11-29): 31,232-31,546 (two
  -- gate runs at the merge, c. 18,200 with inline=snapshots the same hour).
  -- Per trace, the record map's derivation and the machine code's decoding
  -- are taken out (the figure trace_map, below); what remains is the
  -- first-time work of stacks the inlined frames make new (stack_of: 0.51 M
  -- against 0.20 M over the run's 41 safe points) and samples landing
  -- while a trace is recorded under the record handler (their C function
  -- named: 0.14 M). Budget: the largest + 15%.
  -- Third pass: 20,728-22,070 (three runs; before 24,681, 29,953: the
  -- name caches' zeroing above, 0.30 M over 40 safe points)
  ["deep.safepoint_native_on"] = 20900,   -- 17,289-18,142 measured (recorded;
                                          -- 20,620-21,040 before wt-sp)
  ["deep.handler_native_off"] = 2750,     -- 2,033-2,358 measured
  ["deep.safepoint_native_off"] = 18700,  -- 15,500-16,179 measured (wt-sp;
                                          -- 17,151-17,487 before it;
                                          -- 16,632-19,545 recorded before,
                                          -- 14,406 with inline=snapshots)
  -- per trace mapped (inline=recorded): ljp_irmap_derive + ljp_mcmap_build
  -- (once per trace that takes samples; the decoding from its 4th sample):
  -- 40,792-42,428 on deep's one trace, 4,759-12,294 on many's (most of
  -- their traces take fewer than 4 samples: not decoded). Budget: + 15%.
  -- Third pass (the same code): deep 42,325-42,965, many20000
  -- 11,958-14,908 over seven runs (a run before took 14,908: over 14,200)
  ["deep.trace_map_native_on"] = 49500,   -- 42,325-42,965 measured
  ["many20000.trace_map_native_on"] = 17200, -- 11,958-14,908 measured
  -- depth 20, the interpreted leaf only (a safe point serves 1.1-1.4
  -- signals): per sample = handler + safe point, at most the issue's
  -- targets; 120 calls, so that the first safe points' misses (levels,
  -- CFI rows, names) weigh a third of what they did in 40
  -- inline=recorded adds to deepi's start what it adds to deep's (its
  -- record layout's probe, 1.8 M once per process): 4,547,190 measured
  -- (2,737,897 with inline=snapshots)
  ["deepi.start"] = 3268000,              -- 2,970,815 measured (recorded;
                                          -- 3,653,010 before the fourth pass)
  -- 4,287-5,212 over seven runs (six by hand, one CI run) with the call
  -- bit armed at a tick outside the interpreter (lua_sethook's dispatch
  -- update in the handler) and the Lua frames of LuaJIT's own code in
  -- state C captured at the tick (the recorder under the record handler);
  -- 4,238-4,457 before them: the largest + 15%
  -- wt-cfi: 3,089-3,398 (four runs; the CFI row and CIE caches above)
  ["deepi.handler_native_on"] = 4000,     -- (6,098-6,158 before the third pass)
  -- native on, inline=recorded: 12,720-13,020 (8,202 with
  -- inline=snapshots the same hour): a sample that lands while one of
  -- the run's traces is recorded under the record handler (under
  -- valgrind a recording takes a larger share of the run) has a stack of
  -- its own (the recorder's native frames, the handler named
  -- "[ljprof record events]"), new to the safe point (stack_of 0.77 M
  -- against 0.46 M over 102 safe points; a C function named 0.14 M).
  -- Issue 29's 15,000 per sample native on holds with inline=snapshots
  -- (12,888), not with the default mode in this 1 s run (17,235-18,001):
  -- the budget is the measured + 10%, not the target.
  -- Third pass: 9,242-9,526 (three runs; before 10,987, 13,429: the name
  -- caches' zeroing, about 3k a safe point over 94)
  ["deepi.safepoint_native_on"] = 8800,   -- 7,531-7,602 (wt-sp; 8,133-8,213
                                          -- before it; 9,242-9,526 recorded)
  ["deepi.handler_native_off"] = 1250,    -- 1,012-1,044 (1,035-1,044 before)
  ["deepi.safepoint_native_off"] = 7400,  -- 6,353-6,375 (8,329-8,340 before)
  -- Third pass: 12,912-13,938 (three runs; before 15,177, 17,891):
  -- within the issue's target, which is the budget
  ["deepi.per_sample_native_on"] = 15000, -- 12,912-13,938 (recorded; 12,888
                                          -- with inline=snapshots before)
  ["deepi.per_sample_native_off"] = 8000, -- 7,387-7,397 (9,373-9,375 before)
  -- 2,000 and 20,000 functions, trace churn, native frames on. The safe
  -- point names a new function at most every sample here: since the
  -- searches by value are deferred after misses (names.c, 2026-11-28)
  -- five runs each gave 34,285-45,599 (2,000) and 35,190-39,470 (20,000),
  -- against 52,235-71,862 before; a safe point serves 2-7 signals, so the
  -- spread is wider than deep's: budget the largest + 25%, rounded up.
  -- A safe point with a planted loop of about 24k instructions measured
  -- 58,239 on many20000 (fails), 57,001 on many2000 (on the edge: that
  -- budget is for a naming cost grown with the program, not small drift)
  -- and 42,374 / 39,406 on deep (fail)
  ["many2000.start"] = 4384000,               -- 3,985,417 measured (recorded;
                                              -- 4,981,904 before)
  ["many2000.handler_native_on"] = 6900,      -- 5,751-5,938 measured (wt-cfi;
                                              -- 8,544-9,106 before, 10,472-
                                              -- 11,577 before the second pass)
  -- Third pass: many2000 35,506-38,591, many20000 34,002-35,943 (three
  -- runs; before 38,304, 37,639 and 38,142, 44,093)
  ["many2000.safepoint_native_on"] = 24800,   -- 19,174-19,774 measured (three
                                              -- runs, wt-names + wt-sp; 25,640-
                                              -- 29,694 with wt-sp alone,
                                              -- 35,506-38,591 before)
  ["many20000.handler_native_on"] = 6700,     -- 5,655-5,803 measured (wt-cfi;
                                              -- 8,796-8,935 before, 11,412-
                                              -- 12,221 before the second pass)
  ["many20000.safepoint_native_on"] = 27100,  -- 20,560-21,618 measured (three
                                              -- runs, wt-names + wt-sp; 24,859-
                                              -- 28,809 with wt-sp alone,
                                              -- 34,002-35,943 before)
  -- per trace event with no sample: with inline=snapshots nothing is
  -- followed per event (0-2 measured: the noise of the start's other
  -- parts; the budget was a floor of 50). inline=recorded's handler runs
  -- for every recorded bytecode, several per trace event: 1,097-1,127
  -- measured (many2000/many20000 against deep, 1,198-1,202 trace events
  -- apart; the handler's ~270 own instructions per bytecode). Budget:
  -- the largest + 10%.
  -- Fourth pass: 829 (two runs; a recording's events in one block with
  -- its trace, the buffer reused: 1,091-1,110 before)
  ["trace_event"] = 920,
  -- 2026-11-29, eighth pass: the record handler per recorded bytecode it
  -- mapped (its own instructions; LuaJIT's dispatch of the event, about
  -- 216, is not ljprof's code): 501 and 502 measured on many2000 and
  -- many20000 (1,891 and 1,859 events), 410-415 on the bench workloads
  -- with more events per recording. Budget: the largest + 10%, rounded up.
  ["many2000.record_event_native_on"] = 560,
  ["many20000.record_event_native_on"] = 560,
}
