#!/usr/bin/env bash
# admin-strict.sh -- the admin listener frames requests as strictly as the
# orders listener (http-strict.sh), before evhttp reads them: a request
# smuggled in a body (CL 0 + CL N hiding POST /relay/pause behind an
# authorised GET /outbox) is never run, and every refusal, on a fresh or
# a kept-alive connection, after a 401 too, is the framer's status with
# a JSON body {"error", "message"} and closes the connection.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
stack_up
OB_RELAY_WORKERS=1 outbox_conf_write "$T_DIR/outbox.conf"
admin_conf "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"
ADMIN_PORT=${ADMIN_URL##*:}
wait_admin() { admin GET /outbox; [ "$HTTP_STATUS" = 200 ]; }
wait_until 20 "the admin API answers" wait_admin || true
paused() { sql "SELECT coalesce((SELECT paused FROM outbox_control WHERE id = 1), false)"; }

# raw.py PORT TOKEN CASE: sends the case's parts on one connection (a
# float between them: wait that long), reads till the server closes or
# 5 s pass; prints STATUSES CTYPE CODE CLOSED VERSION
# (tests/lib/rawhttp.py says what each is).
cat >"$T_DIR/raw.py" <<'PYEOF'
import sys
import rawhttp  # tests/lib, on PYTHONPATH
port, token, case = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
H = b"Host: outboxd\r\n"
A = b"Authorization: Bearer " + token + b"\r\n"
J = b"Content-Type: application/json\r\n"
R = b'{"all":true}'
inner = b"POST /relay/pause HTTP/1.1\r\n" + H + A + b"Content-Length: 0\r\n\r\n"
G = b"GET /outbox HTTP/1.1\r\n" + H + A + b"\r\n"
CASES = {
    "cl-0-then-cl": [b"GET /outbox HTTP/1.1\r\n" + H + A +
        b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner],
    "cl-space-colon": [b"POST /relay/resume HTTP/1.1\r\n" + H + A +
        b"Content-Length : %d\r\n\r\n" % len(inner) + inner],
    "te-cl": [b"POST /outbox/redrive HTTP/1.1\r\n" + H + A + J +
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" +
        b"%x\r\n" % len(R) + R + b"\r\n0\r\n\r\n"],
    "chunk-zz": [b"POST /outbox/redrive HTTP/1.1\r\n" + H + A + J +
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + R + b"\r\n0\r\n\r\n"],
    "http-1.2": [b"GET /outbox HTTP/1.2\r\n" + H + A + b"\r\n"],
    "long-line": [b"GET /outbox?" + b"a" * 10240 + b" HTTP/1.1\r\n" + H + A + b"\r\n"],
    "big-headers": [b"GET /outbox HTTP/1.1\r\n" + H + A +
        b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 1000) for i in range(20)) + b"\r\n"],
    "big-body": [b"POST /outbox/redrive HTTP/1.1\r\n" + H + A + J +
        b"Content-Length: 2000000\r\n\r\n" + R],
    "obs-fold": [b"GET /outbox HTTP/1.1\r\n" + H + A + b"X-A: b\r\n c\r\n\r\n"],
    "two-host": [b"GET /outbox HTTP/1.1\r\n" + H + A + b"Host: other\r\n\r\n"],
    "ka-unknown-method": [G, 1.0, b"FOO / HTTP/1.1\r\n" + H + A + b"\r\n"],
    "pipelined-401-then-smuggle": [b"GET /outbox HTTP/1.1\r\n" + H + b"\r\n" +
        b"GET /outbox HTTP/1.1\r\n" + H + A +
        b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner],
}
rawhttp.run(port, CASES[case], 5.0)
PYEOF

# refused CASE STATUSES CODE DESCRIPTION: the answers' statuses are
# STATUSES, the last one application/json with "error" CODE and a
# message, HTTP/1.1, the connection closed after it.
refused() {
	local case=$1 want=$2 code=$3 desc=$4 got st ct ec cl ver
	got=$(PYTHONPATH="$T_LIB" "$PY" "$T_DIR/raw.py" "$ADMIN_PORT" "$ADMIN_TOKEN" "$case")
	read -r st ct ec cl ver <<<"$got"
	if [ "$st" != "$want" ]; then
		fail "$desc: answers $st, expected $want ($got)"
	elif [ "$ct" != application/json ]; then
		fail "$desc: $want with Content-Type $ct, expected application/json"
	elif [ "$ec" != "$code" ]; then
		fail "$desc: $want with error '$ec', expected '$code'"
	elif [ "$cl" != 1 ]; then
		fail "$desc: $want $code but the connection stayed open"
	elif [ "$ver" != HTTP/1.1 ]; then
		fail "$desc: $want $code with status line version $ver"
	else
		pass "$desc -> $want $code, HTTP/1.1, closed"
	fi
}

check_eq "the relays are running before" f "$(paused)"
refused cl-0-then-cl 400 content_length_conflict "GET /outbox with CL 0 + CL N, POST /relay/pause in the body"
check_eq "the smuggled POST /relay/pause did not pause the relays" f "$(paused)"
admin GET /outbox
check "GET /outbox says paused false: $HTTP_BODY" jq_true '.paused == false' "$HTTP_BODY"
check_eq "no pause in the log" 0 "$(grep -ac 'publishing paused' "$OUTBOXD_LOG" || true)"
refused cl-space-colon 400 header_invalid "'Content-Length : N', a request in the body"
refused te-cl 400 content_length_conflict "Transfer-Encoding and Content-Length"
refused chunk-zz 400 chunk_invalid "chunk size zz"
refused http-1.2 505 version_not_supported "HTTP/1.2"
refused long-line 414 uri_too_long "a request line of 10 KB"
refused big-headers 431 headers_too_large "20 KB of header fields"
refused big-body 413 body_too_large "a body over the admin API's 1 MB"
refused obs-fold 400 header_invalid "obs-fold"
refused two-host 400 host_invalid "two Host fields"
refused ka-unknown-method 200,501 method_not_implemented "kept-alive: GET /outbox, then FOO / HTTP/1.1"
refused pipelined-401-then-smuggle 401,400 content_length_conflict "pipelined: a 401, then the CL 0 + CL N smuggle"
check_eq "still not paused" f "$(paused)"
check_eq "no admin worker crashed" 0 "$(grep -ac 'killed by signal' "$OUTBOXD_LOG" || true)"
admin POST /relay/pause
check_eq "an honest POST /relay/pause still works" 200 "$HTTP_STATUS"
check_eq "... and pauses" t "$(paused)"
admin POST /relay/resume
check_eq "POST /relay/resume" 200 "$HTTP_STATUS"
