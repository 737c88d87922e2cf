-- wrk script for the benchmark's Track load (bench/run.mts): ~400-byte Segment-shaped bodies,
-- each with a messageId no other request of the run uses (run id, thread, counter).
-- Environment: BENCH_RUN_ID, BENCH_API_KEY (optional), BENCH_PROPERTIES (a JSON object).
local run = os.getenv("BENCH_RUN_ID") or "run"
local properties = os.getenv("BENCH_PROPERTIES") or "{}"

require("common").serve("POST", function(counter, tid)
  local body = '{"type":"track","messageId":"' .. run .. "-" .. tid .. "-" .. counter .. '","event":"Order Completed","userId":"user-' ..
    (counter % 10000) .. '","timestamp":"2026-01-01T10:00:00.000Z","properties":' .. properties .. '}'
  return wrk.format(nil, nil, nil, body)
end)
