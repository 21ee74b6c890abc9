#!/usr/bin/env bash
# json-strict.sh -- POST /orders reads JSON as RFC 8259 has it and nothing
# laxer (issue 25, item 7): raw control bytes in strings, 01 / 1. / 1.e2,
# a form feed as whitespace, unpaired surrogates, bytes that are not UTF-8
# and trailing text are 400 malformed_json; a member named twice (also
# when escaped differently) is 400 duplicate_member; an amountCents that a
# double would round (4999.0000000000001, 1e-400) is refused, never
# stored; a blank customerId (spaces, zero-width characters) is
# customer_id_empty.  Nothing is written for any of them, a valid order
# still answers 201 and is stored exactly, and the admin API's redrive
# body is read as strictly.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
stack_up
OB_RELAY_WORKERS=1 outbox_conf_write "$T_DIR/outbox.conf"
admin_conf "$T_DIR/outbox.conf"
outboxd_start "$T_DIR/outbox.conf"

counts() { sql "SELECT (SELECT count(*) FROM orders) || '/' || (SELECT count(*) FROM outbox)"; }

# refused CODE DESCRIPTION PRINTF-FORMAT -- POST the bytes printf makes of
# the format (so \r, \f, \x01 are the raw bytes) and expect 400 CODE, a
# JSON error body and no row written.
n=0
refused() {
	local want=$1 desc=$2 before after got
	n=$((n + 1))
	printf "$3" >"$T_DIR/body.$n"
	before=$(counts)
	http POST /orders -H 'Content-Type: application/json' --data-binary @"$T_DIR/body.$n"
	after=$(counts)
	got=$(jq -r '.error' <<<"$HTTP_BODY" 2>/dev/null || true)
	if [ "$HTTP_STATUS" != 400 ]; then
		fail "$desc: status $HTTP_STATUS, expected 400 (body: ${HTTP_BODY:0:200})"
	elif [ "$got" != "$want" ]; then
		fail "$desc: error '$got', expected '$want' (body: ${HTTP_BODY:0:200})"
	elif ! jq -e '.message | type == "string" and length > 0' <<<"$HTTP_BODY" >/dev/null 2>&1; then
		fail "$desc: no message in ${HTTP_BODY:0:200}"
	elif [ "$before" != "$after" ]; then
		fail "$desc: refused but rows were written (orders/outbox $before -> $after)"
	else
		pass "$desc -> 400 $want, nothing written"
	fi
}
B='{"customerId":"%s","amountCents":%s}'

# grammar: RFC 8259 exactly
refused malformed_json "CR LF inside customerId (header injection shape)" \
	'{"customerId":"x\r\ninjected=1","amountCents":1}'
refused malformed_json "raw TAB inside customerId" '{"customerId":"a\tb","amountCents":1}'
refused malformed_json "raw 0x01 inside another member" '{"note":"\x01","customerId":"c","amountCents":1}'
refused malformed_json "amountCents 01 (leading zero)" "$(printf "$B" c 01)"
refused malformed_json "amountCents 1. (no fraction digit)" "$(printf "$B" c 1.)"
refused malformed_json "amountCents 1.e2" "$(printf "$B" c 1.e2)"
refused malformed_json "form feed between tokens" '{"customerId":"c",\f"amountCents":1}'
refused malformed_json "lone high surrogate \\ud83d" '{"customerId":"\\ud83d","amountCents":1}'
refused malformed_json "reversed surrogate pair" '{"customerId":"\\ude00\\ud83d","amountCents":1}'
refused malformed_json "overlong UTF-8 (C0 AF) in another member" '{"x":"\xc0\xaf","customerId":"c","amountCents":1}'
refused malformed_json "an escape JSON does not have (\\x41)" '{"customerId":"\\x41","amountCents":1}'
refused malformed_json "text after the object" '{"customerId":"c","amountCents":1} {}'
refused malformed_json "a byte order mark before the object" '\xef\xbb\xbf{"customerId":"c","amountCents":1}'
refused customer_id_invalid "overlong UTF-8 inside customerId keeps its code" '{"customerId":"\xe0\x80\xaf","amountCents":1}'

# repeated member names: JavaScript and Python keep the last, cJSON the first
refused duplicate_member "customerId twice" '{"customerId":"alice","customerId":"mallory","amountCents":1}'
refused duplicate_member "amountCents twice" '{"customerId":"c","amountCents":1,"amountCents":100000}'
refused duplicate_member "customerId twice, once escaped (customer\\u0049d)" \
	'{"customerId":"alice","customer\\u0049d":"mallory","amountCents":1}'
refused duplicate_member "a repeated name in a nested object" '{"customerId":"c","amountCents":1,"m":{"k":1,"k":2}}'

# amountCents exactly from its digits, never through a double
refused amount_cents_not_integer "amountCents 4999.0000000000001 (a double says 4999)" "$(printf "$B" c 4999.0000000000001)"
refused amount_cents_not_integer "amountCents 1e-400 (a double says 0)" "$(printf "$B" c 1e-400)"
refused amount_cents_negative "amountCents -1" "$(printf "$B" c -1)"
refused amount_cents_not_integer "amountCents 4999.0 (whole, but not an integer token)" "$(printf "$B" c 4999.0)"
refused amount_cents_not_integer "amountCents 1e3 (whole, but not an integer token)" "$(printf "$B" c 1e3)"
refused amount_cents_negative "amountCents -0 (a minus sign)" "$(printf "$B" c -0)"
refused amount_cents_too_large "amountCents 9007199254740992 (2^53)" "$(printf "$B" c 9007199254740992)"
refused amount_cents_too_large "amountCents 99999999999999999999999" "$(printf "$B" c 99999999999999999999999)"

# blank customerIds
refused customer_id_empty "customerId of spaces only" "$(printf "$B" '   ' 1)"
refused customer_id_empty "customerId of zero-width characters only (\\u200b\\u2060\\ufeff)" \
	"$(printf "$B" '\\u200b\\u2060\\ufeff' 1)"
refused customer_id_empty "customerId of raw NO-BREAK SPACE and IDEOGRAPHIC SPACE" "$(printf "$B" '\xc2\xa0\xe3\x80\x80' 1)"

check_eq "no row written by any refused request (orders/outbox)" "0/0" "$(counts)"
check_eq "no HTTP worker crashed" 0 "$(grep -ac 'killed by signal' "$OUTBOXD_LOG")"

# valid bodies are answered as before
post_order "c-strict" 4999
check_eq "a valid order still answers 201" 201 "$HTTP_STATUS"
check "... with the order in the body" jq_true '.customer_id == "c-strict" and .amount_cents == 4999' "$HTTP_BODY"
http POST /orders -H 'Content-Type: application/json' --data-binary \
	' {"customer\u0049d" : "c-escaped\u00e9" ,"amountCents":9007199254740991, "note":{"a":[1,2.5e3,null]}} '
check_eq "escaped names, whitespace and extra members: 201" 201 "$HTTP_STATUS"
check_eq "... stored exactly (2^53-1, the unescaped id)" "c-escaped$(printf '\xc3\xa9')|9007199254740991" \
	"$(sql "SELECT customer_id || '|' || amount_cents FROM orders WHERE amount_cents = 9007199254740991")"
check_eq "two orders, two outbox rows" "2/2" "$(counts)"

# the admin API's redrive body goes through the same checker
admin POST /outbox/redrive --data-binary '{"event_type":"a","event_type":"b"}'
check_eq "admin redrive with a repeated name: 400" 400 "$HTTP_STATUS"
check "... bad_request saying the name is repeated" \
	jq_true '.error == "bad_request" and (.message | test("twice"))' "$HTTP_BODY"
printf '{"event_type":"order.created\r\n"}' >"$T_DIR/admin.bad"
admin POST /outbox/redrive --data-binary @"$T_DIR/admin.bad"
check_eq "admin redrive with a raw CR LF in a string: 400" 400 "$HTTP_STATUS"
admin POST /outbox/redrive --data-binary '{"event_type":"no.such.event"}'
check_eq "a valid admin redrive still answers 200" 200 "$HTTP_STATUS"
