-- ddb-put.lua -- dynalite's raw ceiling for B5: conditional PutItem of a fresh item per
-- request (attribute_not_exists, as outboxd's consumer writes), the item shaped as the
-- consumer's, from wrk (C, no SDK).  Unsigned: dynalite does not verify signatures.
-- env: TABLE
local t = os.getenv("TABLE") or "ddbceiling"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-amz-json-1.0"
wrk.headers["X-Amz-Target"] = "DynamoDB_20120810.PutItem"
wrk.headers["X-Amz-Date"] = "20260101T000000Z"
wrk.headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00"
local n, tid = 0, 0
setup = function(thread) tid = tid + 1; thread:set("tid", tid) end
request = function()
  n = n + 1
  return wrk.format(nil, nil, nil, string.format(
    '{"TableName":"%s","ConditionExpression":"attribute_not_exists(orderId)","Item":{"orderId":{"S":"w%d-%d"},' ..
    '"customerId":{"S":"c42"},"amountCents":{"N":"4999"},"status":{"S":"received"},' ..
    '"createdAt":{"S":"2026-01-01T00:00:00.000Z"}}}',
    t, tid or 0, n))
end
done = function(summary, latency, requests)
  io.write(string.format('WRKJSON {"requests":%d,"duration_s":%.3f,"rps":%.1f,"p99_ms":%.3f,"non2xx":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000, summary.errors.status))
end
