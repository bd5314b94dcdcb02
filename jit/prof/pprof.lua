----------------------------------------------------------------------------
-- jit.prof.pprof: ljprof's profile as a pprof file (.pb.gz), for
-- `go tool pprof`, `pprof -http` and anything else that reads
-- google/pprof's proto/profile.proto.
--
-- render(p, meta) -> gzip-compressed profile.proto bytes, from p of
-- jit.prof.model.collect() and meta = {clock=, interval_us=, program=,
-- samples=, dropped=}. encode(p, meta) gives the protobuf bytes unzipped,
-- gzip(data) the gzip stream.
--
-- Format rules (profile.proto):
--   string_table[0] is "" (pprof rejects a profile otherwise); every
--     string field is an index into string_table. Strings are UTF-8
--     (proto3's rule): bytes of names that are not become U+FFFD
--     (model.utf8, as in SVG and speedscope).
--   sample_type = [samples/count, cpu/nanoseconds] for clocks cpu and
--     itimer, [samples/count, wall/nanoseconds] for wall and thread;
--     period_type is the second type, period = interval_us * 1000 (ns);
--     default_sample_type is the time type.
--   One Sample per aggregated entry: location_id leaf first (p's stacks
--     are outermost first, so they are reversed), value = [count,
--     count * period] (a count is in timer ticks), string labels
--     "vmstate" (Compiled, Interpreted, C code, Garbage Collector, JIT
--     Compiler), "thread" (meta.thread, the profiled thread's name, or
--     "main"), "zone" (when set), the sample's own labels (ljprof.label,
--     by key), and the number labels "thread_id" (meta.thread_id) and
--     "state" (meta.state: which Lua state of the process, when known). So
--     `go tool pprof -tags` lists them and -tagfocus=endpoint=/api keeps
--     one request kind.
--     A sample without a Lua stack gets one pseudo-location, function
--     "[<VM state>]" (e.g. "[Garbage Collector]"): pprof keeps a sample
--     without locations in the total but shows it in no view (not even
--     -raw or -traces), so its time would be unaccounted for.
--   One Function per function: Lua functions by (file, first line, name),
--     with name = the name qualified with the end of its file's path and
--     its first line (model.pprof_name: "run (luacheck/main.lua:120)",
--     "luacheck/main.lua:120" without a name; go tool pprof merges
--     functions by name, and a profile's names stay the same whatever
--     else it holds), system_name = the bare -jp "f" label (the name, or
--     chunk:linedefined), filename = the chunk's full path, start_line =
--     linedefined when known (0 when an old profile only knows the
--     name); C functions and builtins by name, with an empty filename and
--     no lines.
--   One Location per (function, line), with a single Line{function_id,
--     line} (no line for C frames), no address, and mapping_id 1: the one
--     Mapping, filename = meta.program, with has_functions, has_filenames
--     and has_line_numbers set, so pprof knows the profile is symbolized
--     (it neither looks for a binary nor warns about a missing one).
--   time_nanos = meta.created (Unix seconds: when the run started) and
--     duration_nanos = meta.duration_ns (start to stop, wall time) when
--     present; without them (a raw profile of an older ljprof)
--     duration_nanos is the estimate (meta.samples or the total) * period.
--     comment holds program, clock and dropped ticks. Zero values are
--     left out, as proto3 does.
--
-- Encoder: written here in Lua (varints, length-delimited fields, packed
-- repeated integers). profile.proto needs a few small messages and two
-- wire types, so a hand encoder is some 60 lines with no dependency, where
-- a protobuf library would need a C module or a .proto compiler at run
-- time. Numbers are doubles: integers are exact up to 2^53 (far above any
-- count or nanosecond total here; larger values raise an error rather
-- than being written wrong), negative int64 values are written as 64-bit
-- two's complement (10 bytes) from a high/low 32-bit split, and
-- time_nanos, which is above 2^53, is built from such a split exactly.
--
-- gzip: real DEFLATE through zlib's deflate() via the FFI (libz.so.1,
-- present on practically every system) when it loads, raw (no zlib header
-- or trailer), fed the encoding part by part (never whole in memory), in
-- a gzip header, CRC-32 and ISIZE; otherwise
-- (no FFI, no libz, any zlib error) a valid gzip stream of DEFLATE stored
-- blocks (uncompressed, at most 65535 bytes each). The CRC-32 is always
-- computed here (table-driven, with the `bit` library). mtime is 0, so the
-- output is a function of the profile only.
----------------------------------------------------------------------------

local bit = require("bit")
local model = require("jit.prof.model")

local band, bxor, bnot = bit.band, bit.bxor, bit.bnot
local rshift = bit.rshift
local char, byte, concat = string.char, string.byte, table.concat
local floor = math.floor

local M = {}

----------------------------------------------------------------------------
-- Protobuf encoding.

local TWO32 = 4294967296
local TWO53 = 9007199254740992

-- A base-128 varint of the 64-bit value hi * 2^32 + lo (0 <= hi, lo < 2^32).
local function varint64(hi, lo)
  local t, k = {}, 0
  while hi > 0 or lo >= 128 do
    k = k + 1
    t[k] = lo % 128 + 128
    lo = floor(lo / 128) + (hi % 128) * 33554432   -- 2^25: hi's low 7 bits
    hi = floor(hi / 128)
  end
  t[k + 1] = lo
  return char(unpack(t, 1, k + 1))
end

-- A base-128 varint of integer n (int64/uint64 wire form). Those of the
-- numbers below 2^20 are kept once made: location and string ids repeat
-- in every sample, and a profile of tens of thousands of stacks made
-- millions of them (garbage that a write at lua_close, where LuaJIT runs
-- no collection, keeps to the end).
local vcache = {}
local function varint(n)
  if n >= 0 and n < 128 and n == floor(n) then return char(n) end
  local c = vcache[n]
  if c then return c end
  if n ~= floor(n) or n >= TWO53 or n <= -TWO53 then
    error("pprof: " .. tostring(n) .. " is not an integer exactly representable", 2)
  end
  local lo = n % TWO32                       -- n = hi * 2^32 + lo, lo >= 0
  c = varint64(((n - lo) / TWO32) % TWO32, lo)   -- two's complement when n < 0
  if n > 0 and n < 1048576 then vcache[n] = c end
  return c
end

-- The varint of Unix time t (seconds, >= 0, before 2106) in nanoseconds,
-- which is above 2^53: t * 10^9 = floor(t) * 1953125 * 2^9 + fraction,
-- where floor(t) * 1953125 < 2^53 is exact.
local function varint_ns(t)
  local s = floor(t)
  local m = s * 1953125
  local frac = floor((t - s) * 1e9 + 0.5)
  local lo = (m % 8388608) * 512 + frac      -- 2^23 * 2^9 = 2^32
  local hi = floor(m / 8388608) + floor(lo / TWO32)
  return varint64(hi, lo % TWO32)
end
M.varint_ns = varint_ns
M.varint = varint

local VARINT, LEN = 0, 2

local function key(field, wiretype) return varint(field * 8 + wiretype) end

-- Field writers append to buffer b; zero and empty values are left out.
local function put_int(b, field, n)
  if n ~= 0 then b[#b + 1] = key(field, VARINT); b[#b + 1] = varint(n) end
end

local function put_bytes(b, field, s)
  b[#b + 1] = key(field, LEN); b[#b + 1] = varint(#s); b[#b + 1] = s
end

local function put_packed(b, field, list)
  if #list == 0 then return end
  local t = {}
  for i = 1, #list do t[i] = varint(list[i]) end
  put_bytes(b, field, concat(t))
end

----------------------------------------------------------------------------
-- gzip.

local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
  end
  crc_table[i] = c
end

-- CRC-32 (IEEE 802.3, as gzip uses) of string s, as a number in [0, 2^32).
function M.crc32(s, prev)
  local c = bnot(prev or 0)
  for i = 1, #s do
    c = bxor(rshift(c, 8), crc_table[band(bxor(c, byte(s, i)), 255)])
  end
  c = bnot(c)
  return c % TWO32
end

local function le32(n)
  n = n % TWO32
  return char(n % 256, floor(n / 256) % 256, floor(n / 65536) % 256, floor(n / 16777216))
end

-- DEFLATE stream of stored blocks.
local function deflate_stored(data)
  local out, n, pos = {}, #data, 1
  repeat
    local len = math.min(65535, n - pos + 1)
    local final = pos + len > n
    local nlen = 65535 - len
    out[#out + 1] = char(final and 1 or 0, len % 256, floor(len / 256),
                         nlen % 256, floor(nlen / 256))
    out[#out + 1] = data:sub(pos, pos + len - 1)
    pos = pos + len
  until final
  return concat(out)
end

-- zlib through the FFI, or nil. Loaded once.
local zlib
local function load_zlib()
  if zlib ~= nil then return zlib or nil end
  zlib = false
  local ok, ffi = pcall(require, "ffi")
  if not ok then return nil end
  -- One declaration per pcall: another module may have declared some.
  -- zlib.h's z_stream (the same layout on every platform LuaJIT runs on)
  pcall(ffi.cdef, [[typedef struct ljp_z_stream {
    const uint8_t *next_in; unsigned int avail_in; unsigned long total_in;
    uint8_t *next_out; unsigned int avail_out; unsigned long total_out;
    const char *msg; void *state; void *zalloc; void *zfree; void *opaque;
    int data_type; unsigned long adler; unsigned long reserved;
  } ljp_z_stream;]])
  pcall(ffi.cdef, "const char *zlibVersion(void);")
  pcall(ffi.cdef, "int deflateInit2_(ljp_z_stream *strm, int level, int method, "
    .. "int windowBits, int memLevel, int strategy, const char *version, int stream_size);")
  pcall(ffi.cdef, "int deflate(ljp_z_stream *strm, int flush);")
  pcall(ffi.cdef, "int deflateEnd(ljp_z_stream *strm);")
  for _, name in ipairs({"z", "libz.so.1", "libz.so"}) do
    local lok, lib = pcall(ffi.load, name)
    if lok and pcall(function() return lib.deflateInit2_ and lib.deflate and
                                       lib.deflateEnd and lib.zlibVersion end) then
      zlib = {ffi = ffi, lib = lib}
      break
    end
  end
  return zlib or nil
end

-- Raw DEFLATE of the concatenation of parts (a list of strings) by
-- zlib's deflate, part by part into 64 KB of output at a time, or nil.
-- (level 6, window 15, memLevel 8: what compress2 would make)
local function deflate_zlib_parts(parts)
  local z = load_zlib()
  if not z then return nil end
  local ffi, lib = z.ffi, z.lib
  local st = ffi.new("ljp_z_stream")
  if lib.deflateInit2_(st, 6, 8, -15, 8, 0, lib.zlibVersion(),
                       ffi.sizeof("ljp_z_stream")) ~= 0 then
    return nil
  end
  local OUT = 65536
  local buf = ffi.new("uint8_t[?]", OUT)
  local out = {}
  local ok, res = pcall(function()
    local n = #parts
    for i = 1, n do
      local s = parts[i]
      st.next_in, st.avail_in = s, #s
      local flush = i == n and 4 or 0     -- Z_FINISH on the last part
      repeat
        st.next_out, st.avail_out = buf, OUT
        local rc = lib.deflate(st, flush)
        if rc ~= 0 and rc ~= 1 and rc ~= -5 then return nil end  -- OK, END, BUF
        local got = OUT - st.avail_out
        if got > 0 then out[#out + 1] = ffi.string(buf, got) end
      until st.avail_out ~= 0 and (flush == 0 or rc == 1)
      st.next_in = nil
    end
    if n == 0 then return nil end
    return concat(out)
  end)
  lib.deflateEnd(st)
  return ok and res or nil
end

-- gzip stream of the concatenation of parts (a list of strings): DEFLATE
-- by zlib when available, stored blocks when not or when stored is true.
-- Returns the stream and "deflate"/"stored".
local function gzip_parts(parts, stored)
  local body = not stored and deflate_zlib_parts(parts)
  local method = body and "deflate" or "stored"
  local crc, size = 0, 0
  for i = 1, #parts do
    crc = M.crc32(parts[i], crc)
    size = size + #parts[i]
  end
  body = body or deflate_stored(concat(parts))
  -- ID1 ID2 CM=8 FLG=0 MTIME=0 XFL=0 OS=255 (unknown)
  return "\31\139\8\0\0\0\0\0\0\255" .. body .. le32(crc) .. le32(size), method
end

-- gzip stream of data (gzip_parts of one string).
function M.gzip(data, stored)
  return gzip_parts({data}, stored)
end

function M.zlib_available() return load_zlib() ~= nil end

----------------------------------------------------------------------------
-- The profile.

local TIME_TYPE = {cpu = "cpu", itimer = "cpu", wall = "wall", thread = "wall"}

-- Protobuf bytes of profile.proto's Profile (not compressed), as a list
-- of strings: every 3072 fields are joined into one as they are made (a
-- table entry and a string per field of every sample, kept to the end,
-- took more memory than the profile's model).
local function encode_parts(p, meta)
  meta = meta or {}
  local interval_us = tonumber(meta.interval_us)
  assert(interval_us and interval_us > 0,
    "pprof: meta.interval_us (the sampling interval) is required")
  local period = floor(interval_us * 1000 + 0.5)
  local clock = tostring(meta.clock or "cpu")
  local ttype = TIME_TYPE[clock] or "cpu"

  local strings, sindex = {""}, {[""] = 0}
  -- proto3 strings must be UTF-8 (protoc and other strict readers reject
  -- the message otherwise): chunk names are bytes, cleaned here.
  local function str(s)
    s = model.utf8(s or "")
    local i = sindex[s]
    if not i then
      i = #strings
      strings[i + 1] = s
      sindex[s] = i
    end
    return i
  end

  local function value_type(t, u)
    local b = {}
    put_int(b, 1, str(t)); put_int(b, 2, str(u))
    return concat(b)
  end

  local out, folded = {}, 0
  local function fold()   -- out[folded + 1 ..] joined into one string
    local n = #out
    if n - folded >= 3072 then
      local joined = concat(out, "", folded + 1, n)
      for i = n, folded + 2, -1 do out[i] = nil end
      folded = folded + 1
      out[folded] = joined
    end
  end
  put_bytes(out, 1, value_type("samples", "count"))
  put_bytes(out, 1, value_type(ttype, "nanoseconds"))

  -- Functions and locations, created as samples use them.
  local functions, locations = {}, {}
  local fn_of, loc_of = {}, {}          -- key -> id
  local frame_loc = {}                  -- p's frame id -> location id

  local function function_id(fr)
    local k
    if fr.lua then
      k = "L\0" .. tostring(fr.file) .. "\0" .. tostring(fr.linedefined) .. "\0" ..
          tostring(fr.name)
    else
      k = "C\0" .. tostring(fr.name)
    end
    local id = fn_of[k]
    if id then return id end
    id = #functions + 1
    fn_of[k] = id
    local b = {}
    put_int(b, 1, id)
    put_int(b, 2, str(model.pprof_name(fr)))
    put_int(b, 3, str(model.label(fr, "f")))
    if fr.lua then
      put_int(b, 4, str(fr.file))       -- str(nil) is ""
      put_int(b, 5, tonumber(fr.linedefined) or 0)
    end
    functions[id] = concat(b)
    return id
  end

  -- The location of (function fnid, line) under key k.
  local function location(k, fnid, line)
    local lid = loc_of[k]
    if lid then return lid end
    lid = #locations + 1
    loc_of[k] = lid
    local ln = {}
    put_int(ln, 1, fnid)
    put_int(ln, 2, line)
    local b = {}
    put_int(b, 1, lid)
    put_int(b, 2, 1)                    -- the one Mapping
    put_bytes(b, 4, concat(ln))
    locations[lid] = concat(b)
    return lid
  end

  local function location_id(fid)
    local lid = frame_loc[fid]
    if lid then return lid end
    local fr = p.frames[fid]
    local fnid = function_id(fr)
    local line = fr.lua and tonumber(fr.line) or 0
    if line < 0 then line = 0 end
    lid = location(fnid .. ":" .. line, fnid, line)
    frame_loc[fid] = lid
    return lid
  end

  -- The pseudo-location of samples without a Lua stack: "[<VM state>]".
  local function stackless_id(state)
    local k = "S\0" .. state
    if loc_of[k] then return loc_of[k] end
    local fnid = #functions + 1
    local b = {}
    put_int(b, 1, fnid)
    put_int(b, 2, str("[" .. state .. "]"))
    put_int(b, 3, str("[" .. state .. "]"))
    functions[fnid] = concat(b)
    return location(k, fnid, 0)
  end

  local k_vmstate, k_thread, k_zone = str("vmstate"), str("thread"), str("zone")
  local thread = str(meta.thread or "main")
  -- a number label, as thread_id: -tagfocus=state=2 means state 2 (a
  -- string label "2" is read by pprof as a numeric range and matched
  -- nothing)
  -- (a number label must be an integer: a raw profile may say anything)
  local function id_of(v)
    v = tonumber(v)
    return v and v >= 1 and v < 2147483648 and v == floor(v) and v or nil
  end
  local state_n = id_of(meta.state)
  local k_state = state_n and str("state")
  local thread_id = id_of(meta.thread_id)
  local k_tid = thread_id and str("thread_id")
  -- A sample's Label fields, each encoded once per (key, value): the
  -- same few repeat in every sample.
  local lcache = {}
  local function encoded(k, field, v)
    local byk = lcache[field * 4294967296 + k]
    if not byk then byk = {} lcache[field * 4294967296 + k] = byk end
    local e = byk[v]
    if not e then
      local l, f = {}, {}
      put_int(l, 1, k); put_int(l, field, v)
      put_bytes(f, 3, concat(l))
      e = concat(f)
      byk[v] = e
    end
    return e
  end
  local function label(b, k, v) b[#b + 1] = encoded(k, 2, v) end
  local function num_label(b, k, n) b[#b + 1] = encoded(k, 3, n) end
  -- A sample's own labels, by key (interned once per distinct set).
  local user_cache = {}
  local function user_labels(b, labels)
    if not labels then return end
    local lk = model.labels_key(labels)
    local list = user_cache[lk]
    if not list then
      local keys = {}
      for k2 in pairs(labels) do keys[#keys + 1] = tostring(k2) end
      table.sort(keys)
      list = {}
      for i, k2 in ipairs(keys) do list[i] = {str(k2), str(labels[k2])} end
      user_cache[lk] = list
    end
    for _, kv in ipairs(list) do label(b, kv[1], kv[2]) end
  end

  local total = 0
  -- (one buffer for every sample's ids and one for its fields: a profile
  -- of many stacks made two tables per sample, garbage to the end of a
  -- write at lua_close)
  local ids, b = {}, {}
  for _, s in ipairs(p.samples) do
    local n = #s.stack
    for i = 1, n do ids[i] = varint(location_id(s.stack[n + 1 - i])) end   -- leaf first
    local state = model.VMNAMES[s.vmstate] or tostring(s.vmstate or "?")
    if n == 0 then
      ids[1] = varint(stackless_id(state))
      n = 1
    end
    for i = #b, 1, -1 do b[i] = nil end
    put_bytes(b, 1, concat(ids, "", 1, n))
    put_bytes(b, 2, varint(s.count) .. varint(s.count * period))
    label(b, k_vmstate, str(state))
    label(b, k_thread, thread)
    if k_state then num_label(b, k_state, state_n) end
    if s.zone and s.zone ~= "" then label(b, k_zone, str(s.zone)) end
    user_labels(b, s.labels)
    if k_tid then num_label(b, k_tid, thread_id) end
    put_bytes(out, 2, concat(b))
    fold()
    total = total + s.count
  end
  -- One Mapping for the program, marked symbolized (functions, file
  -- names, lines): pprof then neither looks for a binary nor warns.
  local mapping = {}
  put_int(mapping, 1, 1)
  put_int(mapping, 5, str(meta.program or "luajit"))
  put_int(mapping, 7, 1); put_int(mapping, 8, 1); put_int(mapping, 9, 1)
  put_bytes(out, 3, concat(mapping))
  for _, l in ipairs(locations) do put_bytes(out, 4, l) fold() end
  for _, f in ipairs(functions) do put_bytes(out, 5, f) fold() end

  -- Strings used below are interned before the table is written.
  local comments = {
    str("ljprof: " .. tostring(meta.program or "?")),
    str(string.format("clock %s, interval %g us", clock, interval_us)),
    str(string.format("ticks %.0f, dropped %.0f", tonumber(meta.samples) or total,
                      tonumber(meta.dropped) or 0)),
  }
  local ptype = value_type(ttype, "nanoseconds")
  local default_type = str(ttype)

  for i = 1, #strings do put_bytes(out, 6, strings[i]) fold() end
  local created = tonumber(meta.created)
  if created and created > 0 and created < TWO32 then
    out[#out + 1] = key(9, VARINT); out[#out + 1] = varint_ns(created)
  end
  local duration = tonumber(meta.duration_ns)
  if not (duration and duration >= 0 and duration < TWO53) then
    duration = (tonumber(meta.samples) or total) * period
  end
  put_int(out, 10, floor(duration))
  put_bytes(out, 11, ptype)
  put_int(out, 12, period)
  put_packed(out, 13, comments)
  put_int(out, 14, default_type)
  return out
end

-- Protobuf bytes of profile.proto's Profile (not compressed).
function M.encode(p, meta)
  return concat(encode_parts(p, meta))
end

-- The pprof file: gzip-compressed profile.proto bytes, compressed part by
-- part (the encoding whole, and a buffer of its size for compress2, were
-- most of the peak of writing 74,000 distinct stacks).
function M.render(p, meta)
  return (gzip_parts(encode_parts(p, meta)))
end

return M
