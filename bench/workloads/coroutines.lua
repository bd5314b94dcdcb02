-- Workload "coroutines": a ring of coroutines passing a token (each one
-- resumes the next: a chain of producer/consumer stages), then a
-- generator -> filter -> consumer pipeline, ~0.7 s unprofiled. Samples
-- land in many different coroutine stacks; resume and yield cross
-- between them all the time.
local create, resume, yield, wrap = coroutine.create, coroutine.resume,
  coroutine.yield, coroutine.wrap

-- Ring: stage i receives a value, transforms it and hands it to stage i+1
-- (the last one yields it back to the driver).
local function ring(stages, passes)
  local co = {}
  for i = stages, 1, -1 do
    local nxt = co[i + 1]
    co[i] = create(function(v)
      while true do
        v = (v * 3 + i) % 1000003
        if nxt then
          local ok, r = resume(nxt, v)
          assert(ok, r)
          v = yield(r)
        else
          v = yield(v)
        end
      end
    end)
  end
  local v = 1
  for _ = 1, passes do
    local ok, r = resume(co[1], v)
    assert(ok, r)
    v = r
  end
  return v
end

-- Pipeline: a generator of numbers, a filter, a running-sum consumer.
local function pipeline(n)
  local gen = wrap(function()
    for i = 1, n do yield(i) end
    yield(nil)
  end)
  local filter = wrap(function()
    while true do
      local x = gen()
      if x == nil then yield(nil) return end
      if x % 3 ~= 0 then yield(x * x % 7919) end
    end
  end)
  local sum, count = 0, 0
  while true do
    local x = filter()
    if x == nil then break end
    sum, count = (sum + x) % 1000000007, count + 1
  end
  return sum, count
end

local r = ring(50, 220000)
local s, c = pipeline(6000000)
print("coroutines", r, s, c)
