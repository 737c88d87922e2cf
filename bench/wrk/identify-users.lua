-- wrk script for the soak's memory scenario (bench/soak.mts, SOAK_SCENARIO=identify-users): every
-- call is a user never seen before (run id, thread, counter), with four traits and an email, so
-- every call creates a profile the gateway's cache then holds until its budget evicts it.
-- Environment: BENCH_RUN_ID, BENCH_API_KEY.
local run = os.getenv("BENCH_RUN_ID") or "run"

require("common").serve("POST", function(counter, tid)
  local user = run .. '-' .. tid .. '-' .. counter
  local body = '{"type":"identify","userId":"' .. user .. '","traits":{"name":"User ' .. counter .. '","plan":"p' .. (counter % 7) ..
    '","visits":' .. counter .. ',"email":"' .. user .. '@shop.io"}}'
  return wrk.format(nil, nil, nil, body)
end)
