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

-- One machine-readable line for bench/run.mts (latencies in microseconds).
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
