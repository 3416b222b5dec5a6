-- wrk script: PUT /v1/apps/com.example.bench/devices/{token} with a JSON body and the bench app's
-- bearer key; every request registers a token no request sent before (per run, per thread).
--
--   wrk -t2 -c64 -d20s --latency -s Benchmarks/ingest/put.lua http://127.0.0.1:38611
--
-- Tokens are 64 hex digits: 8 for the thread, 8 random per run, 48 for a per-thread counter.

local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("id", next_id)
end

local prefix
local counter = 0
local headers = {
  ["Authorization"] = "Bearer bench-ingest-key",
  ["Content-Type"] = "application/json",
}
-- The user varies with the token (one user per device, as in real traffic); the rest is fixed.
local body_tail = '","locale":"en-US","topics":["news"],'
  .. '"device":{"model":"iPhone15,2","os_version":"17.5.1","app_version":"1.0"},'
  .. '"settings":{"alert":true,"badge":true,"sound":false}}'

function init(args)
  math.randomseed(os.time() + id * 7919)
  prefix = string.format("%08x%08x", id, math.random(0, 0x7fffffff))
end

function request()
  counter = counter + 1
  local token = string.format("%s%048x", prefix, counter)
  local body = '{"user":"user-' .. prefix .. '-' .. counter .. body_tail
  return wrk.format("PUT", "/v1/apps/com.example.bench/devices/" .. token, headers, body)
end
