#!/usr/bin/env bash
# db-latin1.sh -- outboxd on a database whose encoding is LATIN1 (an older
# cluster), started with PGCLIENTENCODING=LATIN1 in its environment.  Every
# session asks for UTF-8 (client_encoding, after the conninfo), so the
# server converts both ways and what outboxd puts in JSON is UTF-8.
# Asserts: an order for "café" is stored as a 4-character LATIN1 'café',
# read back, published and fulfilled as "café"; one with a character
# LATIN1 lacks is refused 422; a trigger's LATIN1 message, DETAIL and HINT
# reach the client and the log as UTF-8 (it is the first refusal, which
# each HTTP worker logs whatever its rate limit); every body and the log
# are valid UTF-8.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

sql "CREATE DATABASE latin ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
LATIN_URL=${DATABASE_URL%/*}/latin
PGCLIENTENCODING=UTF8 psql -X -v ON_ERROR_STOP=1 -q "$LATIN_URL" -f "$T_ROOT/sql/schema.sql" >/dev/null ||
	die "schema on the LATIN1 database"
# Our own reads ask for UTF-8 too: 'café' below is UTF-8 text.
lsql() { PGCLIENTENCODING=UTF8 psql -X -v ON_ERROR_STOP=1 -qAt "$LATIN_URL" -c "$1"; }
check_eq "the database's encoding" LATIN1 "$(lsql "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = 'latin'")"

DATABASE_URL=$LATIN_URL OB_RELAY_WORKERS=1 outbox_conf_write "$T_DIR/outbox.conf"
PGCLIENTENCODING=LATIN1 outboxd_start "$T_DIR/outbox.conf"

utf8_ok() { python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$1" 2>/dev/null; }

post_order "café" 450
check_eq "an order for café: HTTP status" 201 "$HTTP_STATUS"
check "  ... its body is valid UTF-8 with customer_id \"café\"" \
	eval 'utf8_ok "$T_DIR/http.body" && jq_true ".customer_id == \"café\"" "$HTTP_BODY"'
id=$(jq -r .id <<<"$HTTP_BODY")
check_eq "  ... stored as LATIN1 'café' (4 characters, 4 bytes)" "1 4 4" \
	"$(lsql "SELECT count(*), min(length(customer_id)), min(octet_length(convert_to(customer_id, 'LATIN1'))) FROM orders WHERE customer_id = 'café'" | tr '|' ' ')"
http GET "/orders/$id"
check "  ... read back as \"café\"" jq_true '.customer_id == "café"' "$HTTP_BODY"
check_eq "  ... its outbox payload says café" "café" \
	"$(lsql "SELECT payload->>'customerId' FROM outbox WHERE ordering_key = '$id'")"
echo "$id" >"$T_DIR/ids"
wait_fulfilled 30 "$T_DIR/ids" || true
check_eq "  ... fulfilled with customerId café" "café" \
	"$(ddb_scan_all "$DDB_ENDPOINT" "$DDB_TABLE" | jq -r --arg id "$id" '.[] | select(.orderId.S == $id) | .customerId.S')"

lsql "CREATE FUNCTION latin_refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION 'refusé' USING DETAIL = 'détail', HINT = 'réessayez'; END \$\$;
CREATE TRIGGER latin_refuse BEFORE INSERT ON orders
FOR EACH ROW WHEN (NEW.customer_id = 'refused') EXECUTE FUNCTION latin_refuse();"
post_order refused 2
check_eq "a trigger's refusal in LATIN1: HTTP status" 422 "$HTTP_STATUS"
check "  ... message, detail and hint arrive as UTF-8" \
	eval 'utf8_ok "$T_DIR/http.body" && jq_true ".message == \"the database refused the order: refusé\" and .detail == \"détail\" and .hint == \"réessayez\"" "$HTTP_BODY"'
post_order "snow ☃" 1
check_eq "an order with a character LATIN1 lacks: HTTP status" 422 "$HTTP_STATUS"
check "  ... order_refused, valid UTF-8 JSON" \
	eval 'utf8_ok "$T_DIR/http.body" && jq_true ".error == \"order_refused\"" "$HTTP_BODY"'
check_eq "  ... and no row" 0 "$(lsql "SELECT count(*) FROM orders WHERE customer_id LIKE 'snow%'")"

outboxd_stop
check "outboxd's log is valid UTF-8" utf8_ok "$OUTBOXD_LOG"
check "  ... and has the refusal" grep -q 'order refused: refusé (SQLSTATE P0001) DETAIL: détail HINT: réessayez' "$OUTBOXD_LOG"
