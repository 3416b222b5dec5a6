-- wrk script: the legacy GET /register with all ten parameters, as shipped iOS apps send it, for
-- the bench app (credential "none": wrk's Lua has no MD5, and the check is a few microseconds next
-- to the Redis round trips). Every request registers a new token.
--
--   wrk -t2 -c64 -d20s --latency -s Benchmarks/ingest/register.lua http://127.0.0.1:38611

local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("id", next_id)
end

local prefix
local counter = 0

function init(args)
  math.randomseed(os.time() + id * 104729)
  prefix = string.format("%08x%08x", id, math.random(0, 0x7fffffff))
end

function request()
  counter = counter + 1
  local token = string.format("%s%048x", prefix, counter)
  local path = "/register?device_token=" .. token
    .. "&device_uuid=6D5A1F3C-2B8E-4E0F-9C57-2E8B3A0D4F11"
    .. "&device_name=Bench%20iPhone&device_version=17.5.1&app_name=Bench"
    .. "&timestamp=" .. os.time() .. "000"
    .. "&push_badge=enabled&push_alert=enabled&push_sound=disabled&credential="
  return wrk.format("GET", path)
end
