-- wrk script for the benchmark's Identify load (bench/identify-bench.mts): Segment-shaped calls,
-- a new messageId each, four traits and a timestamp, over 10,000 users.
-- Environment: BENCH_RUN_ID, BENCH_API_KEY (optional), BENCH_TIMESTAMP.
local run = os.getenv("BENCH_RUN_ID") or "run"
local timestamp = os.getenv("BENCH_TIMESTAMP") or "2026-01-01T10:00:00.000Z"

require("common").serve("POST", function(counter, tid)
  local user = counter % 10000
  local body = '{"type":"identify","messageId":"' .. run .. '-' .. tid .. '-' .. counter .. '","userId":"user-' .. user ..
    '","timestamp":"' .. timestamp .. '","traits":{"name":"User ' .. user .. '","plan":"p' .. (counter % 7) ..
    '","visits":' .. counter .. ',"email":"user' .. user .. '@shop.io"}}'
  return wrk.format(nil, nil, nil, body)
end)
