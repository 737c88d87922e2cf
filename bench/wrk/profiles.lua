-- wrk script for the benchmark's Profiles reads (bench/identify-bench.mts): GET the profiles of
-- user-1 … user-N in turn. Environment: BENCH_API_KEY (optional), BENCH_USERS.
local users = tonumber(os.getenv("BENCH_USERS") or "1")

require("common").serve("GET", function(counter)
  return wrk.format(nil, wrk.path .. "user-" .. ((counter % users) + 1))
end)
