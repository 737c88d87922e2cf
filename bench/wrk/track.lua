-- wrk script for the benchmark's Track load (bench/run.mts): ~400-byte Segment-shaped bodies,
-- each with a messageId no other request of the run uses (run id, thread, counter).
-- Environment: BENCH_RUN_ID, BENCH_API_KEY (optional), BENCH_PROPERTIES (a JSON object).
local run = os.getenv("BENCH_RUN_ID") or "run"
local key = os.getenv("BENCH_API_KEY")
local properties = os.getenv("BENCH_PROPERTIES") or "{}"
local threads = {}
local counter = 0

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if key ~= nil and key ~= "" then wrk.headers["X-Api-Key"] = key end
end

function request()
  counter = counter + 1
  local id = run .. "-" .. tid .. "-" .. counter
  local body = '{"type":"track","messageId":"' .. id .. '","event":"Order Completed","userId":"user-' .. (counter % 10000) ..
    '","timestamp":"2026-01-01T10:00:00.000Z","properties":' .. properties .. '}'
  return wrk.format(nil, nil, nil, body)
end

done = require("result").done
