-- Workload "json": a JSON encoder (recursive type dispatch, string
-- escaping with gsub and a replacement table, number formatting, sorted
-- object keys, table.concat into a buffer) run over a generated document
-- of nested objects and arrays, ~0.7 s unprofiled. Interpreted and
-- compiled code, C functions (gsub, format, sort, concat) and GC.
local format, concat, sort = string.format, table.concat, table.sort

local ESC = {['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r',
             ['\t'] = '\\t', ['\b'] = '\\b', ['\f'] = '\\f'}
local function escape_char(c)
  return ESC[c] or format("\\u%04x", c:byte())
end

local encode_value

local function encode_string(s, buf)
  buf[#buf + 1] = '"'
  buf[#buf + 1] = s:find('[%c"\\]') and s:gsub('[%c"\\]', escape_char) or s
  buf[#buf + 1] = '"'
end

local function encode_number(x, buf)
  if x == math.floor(x) and x > -1e15 and x < 1e15 then
    buf[#buf + 1] = format("%d", x)
  else
    buf[#buf + 1] = format("%.14g", x)
  end
end

local function is_array(t)
  local n = #t
  if n == 0 then return next(t) == nil end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

local function encode_table(t, buf, depth)
  if depth > 32 then error("json: nested too deeply") end
  if is_array(t) then
    buf[#buf + 1] = "["
    for i = 1, #t do
      if i > 1 then buf[#buf + 1] = "," end
      encode_value(t[i], buf, depth + 1)
    end
    buf[#buf + 1] = "]"
  else
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = tostring(k) end
    sort(keys)  -- deterministic output
    buf[#buf + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then buf[#buf + 1] = "," end
      encode_string(k, buf)
      buf[#buf + 1] = ":"
      encode_value(t[k], buf, depth + 1)
    end
    buf[#buf + 1] = "}"
  end
end

function encode_value(v, buf, depth)
  local ty = type(v)
  if ty == "string" then encode_string(v, buf)
  elseif ty == "number" then encode_number(v, buf)
  elseif ty == "boolean" then buf[#buf + 1] = v and "true" or "false"
  elseif ty == "nil" then buf[#buf + 1] = "null"
  elseif ty == "table" then encode_table(v, buf, depth)
  else error("json: cannot encode a " .. ty) end
end

local function encode(v)
  local buf = {}
  encode_value(v, buf, 0)
  return concat(buf)
end

-- A document like an API response: users with profiles, tags and events.
local function document(n)
  local users = {}
  for i = 1, n do
    local events = {}
    for j = 1, 6 do
      events[j] = {kind = j % 2 == 0 and "click" or "view", at = 1600000000 + i * 60 + j,
                   score = (i * j) % 17 / 4, path = "/item/" .. (i * 7 + j) % 500}
    end
    users[i] = {
      id = i, name = "user " .. i, active = i % 3 ~= 0,
      email = "u" .. i .. "@example.org",
      bio = "Line one\nline \"two\"\twith tab\\" .. i,
      tags = {"t" .. i % 5, "t" .. i % 7, "group-" .. i % 11},
      profile = {age = 18 + i % 60, height = 1.5 + (i % 50) / 100, city = nil,
                 langs = {"lua", i % 2 == 0 and "c" or "go"}},
      events = events,
    }
  end
  return {version = 2, count = n, users = users, next = false}
end

local doc = document(2000)
local total, sum = 0, 0
for _ = 1, 12 do
  local s = encode(doc)
  total = total + #s
  for i = 1, #s, 997 do sum = (sum + s:byte(i)) % 1000003 end
end
print("json", total, sum)
