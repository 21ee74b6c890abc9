#!/usr/bin/env bash
# ddb-ceiling.sh -- dynalite's raw conditional-PutItem ceiling in the same run as B5: wrk
# (bench/ddb-put.lua, CONNS connections, DUR s) against a table of its own, created and
# deleted here.  One RESULT line (bench "ddb-ceiling").
# env: AWS_ENDPOINT_URL_DYNAMODB, CONNS (16), DUR (5), RESULTS_FILE
set -euo pipefail
source "${WL:?WL: the workload folder (peers/bench copy)}/lib.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LUA=${DDB_PUT_LUA:-$HERE/ddb-put.lua}
EP=${AWS_ENDPOINT_URL_DYNAMODB:?}
C=${CONNS:-16} D=${DUR:-5} T=ddbceiling
ddb() { curl -sS -X POST "$EP/" -H 'Content-Type: application/x-amz-json-1.0' \
  -H "X-Amz-Target: DynamoDB_20120810.$1" \
  -H 'Authorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00' \
  -H 'X-Amz-Date: 20260101T000000Z' -d "$2"; }
ddb DeleteTable "{\"TableName\":\"$T\"}" >/dev/null 2>&1 || true
for _ in $(seq 50); do ddb DescribeTable "{\"TableName\":\"$T\"}" | grep -q ResourceNotFound && break; sleep 0.2; done
ddb CreateTable "{\"TableName\":\"$T\",\"BillingMode\":\"PAY_PER_REQUEST\",\"AttributeDefinitions\":[{\"AttributeName\":\"orderId\",\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":\"orderId\",\"KeyType\":\"HASH\"}]}" >/dev/null
for _ in $(seq 100); do ddb DescribeTable "{\"TableName\":\"$T\"}" | grep -q '"ACTIVE"' && break; sleep 0.1; done
o=$(TABLE=$T wrk -t1 -c"$C" -d"${D}s" -s "$LUA" "$EP/" | sed -n 's/^WRKJSON //p')
ddb DeleteTable "{\"TableName\":\"$T\"}" >/dev/null 2>&1 || true
[ -n "$o" ] || { echo "ddb-ceiling: wrk printed no result" >&2; exit 1; }
result "$(jq -cn --argjson c "$C" --argjson o "$o" '{bench:"ddb-ceiling",impl:"wrk",client:"wrk",concurrency:$c} + $o + {per_s:($o.rps|round)}')"
