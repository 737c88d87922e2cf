-- wrk script for the benchmark's Profiles reads (bench/identify-bench.mts): GET the profiles of
-- user-1 … user-N in turn. Environment: BENCH_API_KEY (optional), BENCH_USERS.
local key = os.getenv("BENCH_API_KEY")
local users = tonumber(os.getenv("BENCH_USERS") or "1")
local counter = 0

function init(args)
  wrk.method = "GET"
  if key ~= nil and key ~= "" then wrk.headers["X-Api-Key"] = key end
end

function request()
  counter = counter + 1
  return wrk.format(nil, wrk.path .. "user-" .. ((counter % users) + 1))
end

done = require("result").done
