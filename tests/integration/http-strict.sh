#!/usr/bin/env bash
# http-strict.sh -- requests are framed as RFC 9112 says, before evhttp
# reads them (issue 25 items 2, 5, 6): a smuggled request is never
# answered nor written; every refusal, on a fresh or a kept-alive
# connection, is the right status with a JSON body {"error", "message"}
# and closes the connection; a chunk extension is accepted; pipelined
# good requests are all answered.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
stack_up
MAX=2048
OB_MAX_BODY_SIZE=$MAX OB_RELAY_WORKERS=1 outbox_conf_write "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

orders() { sql "SELECT count(*) FROM orders"; }

# raw.py PORT CASE: sends the case's parts on one connection (a float
# between them: wait that long, or for the answers so far), reads till
# the server closes or 5 s pass; prints STATUSES CTYPE CODE CLOSED
# VERSION (tests/lib/rawhttp.py says what each is).
cat >"$T_DIR/raw.py" <<'PYEOF'
import sys
import rawhttp  # tests/lib, on PYTHONPATH
port, case = int(sys.argv[1]), sys.argv[2]
H = b"Host: outboxd\r\n"
J = b"Content-Type: application/json\r\n"
def order(c):
    return ('{"customerId":"%s","amountCents":499}' % c).encode()
def post(c, cl=None):
    b = order(c)
    return (b"POST /orders HTTP/1.1\r\n" + H + J +
            b"Content-Length: %d\r\n\r\n" % (len(b) if cl is None else cl) + b)
def chunked(c, pre=b"", ext=b"", size=None):
    # one chunk: pre, its size in hex (or size), ext, then the order
    b = order(c)
    size = b"%x" % len(b) if size is None else size
    return (b"POST /orders HTTP/1.1\r\n" + H + J +
            b"Transfer-Encoding: chunked\r\n\r\n" + pre + size + ext +
            b"\r\n" + b + b"\r\n0\r\n\r\n")
G = b"GET /healthz HTTP/1.1\r\n" + H + b"\r\n"
inner = post("smuggled")
CASES = {
    "cl-0-then-cl": [b"POST /orders HTTP/1.1\r\n" + H +
        b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner],
    "cl-space-colon": [b"POST /orders HTTP/1.1\r\n" + H +
        b"Content-Length : %d\r\n\r\n" % len(inner) + inner],
    "cl-plus": [b"POST /orders HTTP/1.1\r\n" + H + J +
        b"Content-Length: +37\r\n\r\n" + order("plus") + inner],
    "chunk-0x": [chunked("hex", pre=b"0x") + inner],
    "chunk-space": [chunked("space", pre=b" ") + inner],
    "obs-fold": [b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: b\r\n c\r\n\r\n"],
    "nul-in-value": [b"GET /healthz HTTP/1.1\r\n" + H + b"X-A: b\x00c\r\n\r\n"],
    "two-host": [b"GET /healthz HTTP/1.1\r\n" + H + b"Host: other\r\n\r\n"],
    "http-1.2": [b"GET /healthz HTTP/1.2\r\n" + H + b"\r\n"],
    "http-2.0": [b"GET /healthz HTTP/2.0\r\n" + H + b"\r\n"],
    "long-line": [b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + H + b"\r\n"],
    "big-headers": [b"GET /healthz HTTP/1.1\r\n" + H +
        b"".join(b"X-F%d: %s\r\n" % (i, b"v" * 1000) for i in range(20)) + b"\r\n"],
    "chunk-zz": [b"POST /orders HTTP/1.1\r\n" + H + J +
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n" + order("zz") + b"\r\n0\r\n\r\n"],
    "chunk-minus": [b"POST /orders HTTP/1.1\r\n" + H + J +
        b"Transfer-Encoding: chunked\r\n\r\n-1\r\n" + order("minus") + b"\r\n0\r\n\r\n"],
    "chunk-small": [chunked("small", size=b"5")],
    "chunk-ext": [chunked("chunk-ext", ext=b";a=b")],
    # the extension in two reads: "32;a", then "=b" and the rest
    "chunk-ext-split": [chunked("chunk-ext-split", ext=b";a=b")[:104], 0.3,
        chunked("chunk-ext-split", ext=b";a=b")[104:]],
    "ka-unknown-method": [G, 1.0, b"FOO / HTTP/1.1\r\n" + H + b"\r\n"],
    "ka-garbage": [G, 1.0, b"garbage\r\n\r\n"],
    "ka-100k-body": [G, 1.0, b"POST /orders HTTP/1.1\r\n" + H + J +
        b"Content-Length: 102400\r\n\r\n" + b"x" * 102400],
    "ka-wrong-length": [G, 1.0, post("wrong", 10)],
    "pipelined-wrong-length": [G + post("pipe", 10)],
    "ka-smuggle": [post("ka-first"), 1.0, b"POST /orders HTTP/1.1\r\n" + H +
        b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner],
    "ka-empty-line": [G, 1.0, b"\r\n" + G],
    "ka-expect": [G, 1.0, b"POST /orders HTTP/1.1\r\n" + H + J +
        b"Expect: something\r\nContent-Length: 37\r\n\r\n" + order("expect")],
    "pipelined-posts": [post("p1") + post("p2") + post("p3")],
}
rawhttp.run(port, CASES[case], 5.0 if case != "pipelined-posts" else 3.0)
PYEOF

# refused CASE STATUSES CODE DESCRIPTION [ROWS]: the answers' statuses are
# STATUSES, the last one application/json with "error" CODE and a
# message, the connection closed after it, and ROWS (default 0) orders
# written.
refused() {
	local case=$1 want=$2 code=$3 desc=$4 rows=${5:-0} before after got
	before=$(orders)
	got=$(PYTHONPATH="$T_LIB" "$PY" "$T_DIR/raw.py" "$HTTP_PORT" "$case")
	after=$(orders)
	read -r st ct ec cl _ <<<"$got"
	if [ "$st" != "$want" ]; then
		fail "$desc: answers $st, expected $want ($got)"
	elif [ "$ct" != application/json ]; then
		fail "$desc: $want with Content-Type $ct, expected application/json"
	elif [ "$ec" != "$code" ]; then
		fail "$desc: $want with error '$ec', expected '$code'"
	elif [ "$cl" != 1 ]; then
		fail "$desc: $want $code but the connection stayed open"
	elif [ $((after - before)) != "$rows" ]; then
		fail "$desc: $want $code but $((after - before)) orders written, expected $rows"
	else
		pass "$desc -> $want $code, closed, $rows orders written"
	fi
}

# item 2: request smuggling and lenient framing
refused cl-0-then-cl 400 content_length_conflict "Content-Length: 0 then 124, a request in the body"
refused cl-space-colon 400 header_invalid "'Content-Length : 124', a request in the body"
refused cl-plus 400 content_length_invalid "Content-Length: +37"
refused chunk-0x 400 chunk_invalid "chunk size with a 0x prefix"
refused chunk-space 400 chunk_invalid "chunk size after a space"
refused obs-fold 400 header_invalid "obs-fold"
refused nul-in-value 400 header_invalid "NUL in a header value"
refused two-host 400 host_invalid "two Host fields"
refused http-1.2 505 version_not_supported "HTTP/1.2"
refused http-2.0 505 version_not_supported "HTTP/2.0"
refused ka-smuggle 201,400 content_length_conflict "kept-alive: an order, then CL 0 + CL 124 smuggling" 1
check_eq "no order of the smuggled requests was written" 0 \
	"$(sql "SELECT count(*) FROM orders WHERE customer_id = 'smuggled'")"
# a 505 says HTTP/1.1, whatever the client spoke
v=$("$PY" - "$HTTP_PORT" <<'PYEOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5)
s.sendall(b"GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n")
print(s.recv(64).split(b" ")[0].decode())
PYEOF
)
check_eq "the 505's status line is HTTP/1.1" HTTP/1.1 "$v"

# item 6: statuses of the limits and chunk sizes; extensions accepted
refused long-line 414 uri_too_long "a request line of 9 KB"
refused big-headers 431 headers_too_large "20 KB of header fields"
refused chunk-zz 400 chunk_invalid "chunk size zz"
refused chunk-minus 400 chunk_invalid "chunk size -1"
refused chunk-small 400 chunk_invalid "a chunk shorter than its data"
for c in chunk-ext chunk-ext-split; do
	before=$(orders)
	got=$(PYTHONPATH="$T_LIB" "$PY" "$T_DIR/raw.py" "$HTTP_PORT" "$c")
	check_eq "$c: chunked order with a chunk extension (';a=b') answered 201" 201 "${got%% *}"
	check_eq "$c: ... and written" 1 "$(sql "SELECT count(*) FROM orders WHERE customer_id = '$c'")"
	check_eq "$c: ... once" $((before + 1)) "$(orders)"
done

# item 5: JSON on kept-alive connections too
refused ka-unknown-method 200,501 method_not_implemented "kept-alive: FOO / HTTP/1.1"
refused ka-garbage 200,400 bad_request "kept-alive: garbage"
refused ka-100k-body 200,413 body_too_large "kept-alive: a 100 KB body"
refused ka-wrong-length 200,400,400 bad_request "kept-alive: a Content-Length shorter than the body"
refused pipelined-wrong-length 200,400,400 bad_request "pipelined: a Content-Length shorter than the body"
# pages evhttp still answers itself, replaced on a kept-alive connection
refused ka-empty-line 200,400 bad_request "kept-alive: an empty line before the request"
refused ka-expect 200,417 expectation_failed "kept-alive: Expect other than 100-continue"

# pipelined good requests are all answered
before=$(orders)
got=$(PYTHONPATH="$T_LIB" "$PY" "$T_DIR/raw.py" "$HTTP_PORT" pipelined-posts)
check_eq "three pipelined POST /orders in one write: three 201s" 201,201,201 "${got%% *}"
check_eq "... three orders written" $((before + 3)) "$(orders)"
check_eq "no HTTP worker crashed" 0 "$(grep -ac 'killed by signal' "$OUTBOXD_LOG" || true)"
post_order "after-strict" 1
check_eq "POST /orders still answers afterwards" 201 "$HTTP_STATUS"
