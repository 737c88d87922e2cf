-- What every bench wrk script shares: the method and headers (BENCH_API_KEY when set), a thread
-- id and a request counter per thread (so generated IDs never repeat in a run), and the
-- machine-readable result line bench/run.mts reads (latencies in microseconds).
local M = {}

-- build(counter, tid) returns the request (wrk.format(...)).
function M.serve(method, build)
  local threads = {}
  local counter = 0
  function setup(thread)
    thread:set("tid", #threads + 1)
    table.insert(threads, thread)
  end
  function init(args)
    wrk.method = method
    if method == "POST" then wrk.headers["Content-Type"] = "application/json" end
    local key = os.getenv("BENCH_API_KEY")
    if key ~= nil and key ~= "" then wrk.headers["X-Api-Key"] = key end
  end
  function request()
    counter = counter + 1
    return build(counter, tid)
  end
  function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
      'WRK_RESULT {"requests":%d,"duration_us":%d,"non2xx":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
      summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
      latency:percentile(50), latency:percentile(99), latency.max))
  end
end

return M
