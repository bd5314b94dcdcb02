-- Workload "richards": object-oriented dispatch in the style of the
-- Richards benchmark (an operating-system task scheduler simulation):
-- task objects of four classes sharing a base class through metatables,
-- method calls on every step, packets moved between queues, ~0.7 s
-- unprofiled. Written for ljprof's benchmarks; the counts printed are the
-- check values.

-- -- Classes ----------------------------------------------------------------

local function class(base)
  local c = {}
  c.__index = c
  if base then setmetatable(c, {__index = base}) end
  return c
end

local Packet = class()
function Packet.new(link, dest, kind)
  return setmetatable({link = link, dest = dest, kind = kind, datum = 0,
                       data = {0, 0, 0, 0}}, Packet)
end
-- Append self at the end of the queue q; returns the new queue head.
function Packet:append_to(q)
  self.link = nil
  if not q then return self end
  local p = q
  while p.link do p = p.link end
  p.link = self
  return q
end

local Task = class()
function Task:init(sched, id, pri, queue)
  self.sched, self.id, self.pri, self.queue = sched, id, pri, queue
  self.held, self.waiting = false, queue == nil
  return self
end
function Task:runnable()
  return not self.held and (not self.waiting or self.queue ~= nil)
end
-- Take the first packet of the queue (if waiting for one).
function Task:take()
  local p = self.queue
  if p and self.waiting then
    self.queue = p.link
    self.waiting = false
    return p
  end
  return nil
end
-- A packet arrives; returns true when this task should preempt the sender.
function Task:deliver(p, from)
  self.queue = p:append_to(self.queue)
  return self.pri > from.pri
end

-- Idle: releases the two devices in a pseudo-random order, counting down.
local Idle = class(Task)
function Idle:step()
  self.count = self.count - 1
  if self.count == 0 then return self.sched:hold_self(self) end
  self.seed = (self.seed * 25173 + 13849) % 65536
  return self.sched:release(self, self.seed % 2 == 0 and 5 or 6)
end

-- Worker: fills work packets with letters for handler A or B.
local Worker = class(Task)
function Worker:step(p)
  if not p then return self.sched:wait(self) end
  self.dest = self.dest == 3 and 4 or 3
  p.dest = self.dest
  p.datum = 1
  for i = 1, 4 do
    self.letter = self.letter % 26 + 1
    p.data[i] = self.letter
  end
  return self.sched:queue(self, p)
end

-- Handler: sends each letter of a work packet to its device.
local Handler = class(Task)
function Handler:step(p)
  if p then
    if p.kind == "work" then self.work = p:append_to(self.work)
    else self.dev = p:append_to(self.dev) end
  end
  local w = self.work
  if w then
    if w.datum > 4 then
      self.work = w.link
      return self.sched:queue(self, w)
    end
    local d = self.dev
    if d then
      self.dev = d.link
      d.datum = w.data[w.datum]
      w.datum = w.datum + 1
      return self.sched:queue(self, d)
    end
  end
  return self.sched:wait(self)
end

-- Device: holds a packet until released, then returns it.
local Device = class(Task)
function Device:step(p)
  if not p then
    local held = self.pending
    if not held then return self.sched:wait(self) end
    self.pending = nil
    return self.sched:queue(self, held)
  end
  self.pending = p
  self.sched.chars = self.sched.chars + p.datum
  return self.sched:hold_self(self)
end

-- -- Scheduler ---------------------------------------------------------------

local Sched = class()
local PICK = {}  -- returned by a step: let the scheduler pick the next task
local function by_priority(a, b) return a.pri > b.pri end

function Sched.new()
  return setmetatable({tasks = {}, byid = {}, queued = 0, holds = 0, chars = 0}, Sched)
end
function Sched:add(task)
  self.byid[task.id] = task
  local t = self.tasks
  t[#t + 1] = task
  table.sort(t, by_priority)
  return task
end
function Sched:wait(task) task.waiting = true; return task end
function Sched:hold_self(task)
  self.holds = self.holds + 1
  task.held = true
  return PICK
end
function Sched:release(from, id)
  local t = self.byid[id]
  t.held = false
  return t.pri > from.pri and t or from
end
function Sched:queue(from, p)
  local t = self.byid[p.dest]
  self.queued = self.queued + 1
  p.dest = from.id  -- replies go back to the sender
  if t:deliver(p, from) then return t end
  return from
end
-- The highest-priority runnable task, or PICK when none is left.
function Sched:pick()
  local tasks = self.tasks
  for i = 1, #tasks do
    if tasks[i]:runnable() then return tasks[i] end
  end
  return PICK
end
function Sched:run()
  local cur = self:pick()
  while cur ~= PICK do
    local nxt = cur:step(cur:take())
    if nxt == PICK or not nxt:runnable() then nxt = self:pick() end
    cur = nxt
  end
end

-- -- Setup ---------------------------------------------------------------------

local function new_task(cls, s, id, pri, queue)
  return s:add(setmetatable({}, cls):init(s, id, pri, queue))
end

local function simulate(count)
  local s = Sched.new()
  local idle = new_task(Idle, s, 1, 0, nil)
  idle.count, idle.seed, idle.waiting = count, 1, false
  local wq = Packet.new(nil, 2, "work")
  wq = Packet.new(wq, 2, "work")
  local w = new_task(Worker, s, 2, 1000, wq)
  w.dest, w.letter, w.waiting = 3, 0, true
  for id = 3, 4 do
    local q = Packet.new(nil, id + 2, "device")
    q = Packet.new(q, id + 2, "device")
    q = Packet.new(q, id + 2, "device")
    local h = new_task(Handler, s, id, 2000 + id, q)
    h.waiting = true
  end
  for id = 5, 6 do new_task(Device, s, id, 4000 + id, nil) end
  s:run()
  return s.queued, s.holds, s.chars
end

local q, h, c = 0, 0, 0
for _ = 1, 120 do
  local a, b, d = simulate(10000)
  q, h, c = q + a, h + b, c + d
end
print("richards", q, h, c)
