-- wrk script for B1 with keys: b1-post.lua's requests, each with an Idempotency-Key no other
-- request has, so every request makes a new order through the keyed path (outboxd(8), HTTP
-- API) and the run measures what a key costs.  The key is "b1-RUN-THREAD-N": RUN is random
-- per wrk invocation (the warm-up and the measured run must not share keys, or the second
-- would replay the first's orders and write nothing), THREAD the wrk thread, N its request.
-- Prints the same "WRKJSON " summary line as b1-post.lua.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

-- setup() runs in wrk's main Lua state; thread:set() makes "run" and "tid" globals of each
-- thread's own state, which request() reads (so they must not be locals of this file).
local threads = 0
local run_id = nil
setup = function(thread)
  if run_id == nil then
    local f = assert(io.open("/dev/urandom", "rb"))
    local b = f:read(8)
    f:close()
    run_id = (b:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  end
  threads = threads + 1
  thread:set("run", run_id)
  thread:set("tid", threads)
end

local n = 0
request = function()
  n = n + 1
  local body = string.format('{"customerId":"c%d","amountCents":%d}', n % 1000, 100 + n % 10000)
  return wrk.format(nil, nil, { ["Idempotency-Key"] = string.format('"b1-%s-%d-%d"', run, tid, n) }, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_s":%.3f,"rps":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"non2xx":%d,"err_connect":%d,"err_read":%d,"err_write":%d,"err_timeout":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, e.status, e.connect, e.read, e.write, e.timeout))
end
