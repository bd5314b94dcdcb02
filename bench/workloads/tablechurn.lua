-- Workload "tablechurn": tables used as a cache, queue and index, with
-- constant insertion and deletion (array and hash parts growing and
-- shrinking, table.insert/remove, next, many short-lived tables and
-- string keys), ~0.7 s unprofiled. Mostly compiled, with GC.
local insert, remove = table.insert, table.remove

-- A bounded cache of records keyed by string, evicted in FIFO order.
local function cache_run(n, cap)
  local cache, order, head, tail = {}, {}, 1, 0
  local hits, misses = 0, 0
  local seed = 7
  for _ = 1, n do
    seed = (seed * 16807) % 2147483647  -- Park-Miller: exact in doubles
    local key = "k" .. (seed % (cap * 3))
    local rec = cache[key]
    if rec then
      hits = hits + 1
      rec.uses = rec.uses + 1
    else
      misses = misses + 1
      cache[key] = {key = key, uses = 1, data = {seed % 97, seed % 89}}
      tail = tail + 1
      order[tail] = key
      if tail - head + 1 > cap then
        cache[order[head]] = nil
        order[head] = nil
        head = head + 1
      end
    end
  end
  return hits, misses
end

-- A work queue: push items, pop from the front with table.remove.
local function queue_run(rounds, width)
  local q, done = {}, 0
  for r = 1, rounds do
    for i = 1, width do insert(q, {r, i}) end
    while #q > width / 2 do
      local item = remove(q, 1)
      done = done + item[1] % 3 + item[2] % 5
    end
  end
  return done, #q
end

-- An index rebuilt many times: group records by a field, count with next.
local function index_run(rounds, n)
  local total = 0
  for r = 1, rounds do
    local by = {}
    for i = 1, n do
      local k = (i * r) % 37
      local g = by[k]
      if not g then g = {}; by[k] = g end
      g[#g + 1] = i
    end
    local groups = 0
    for _, g in next, by do groups = groups + 1; total = total + #g end
    total = total + groups
  end
  return total
end

local h, m = cache_run(1000000, 5000)
local d, left = queue_run(2000, 200)
local t = index_run(300, 4000)
print("tablechurn", h, m, d, left, t)
