# pubsub-lib.sh -- what the Pub/Sub scenarios (pubsub.sh, pubsub-adc.sh)
# share; sourced after common.sh.

# pubsub_key -- a 2048-bit RSA test key made now: $T_DIR/sa.pem and its
# public half $T_DIR/sa.pub (the stand-in's --pubkey).
pubsub_key() {
	command -v openssl >/dev/null || die "openssl is needed (test key, RS256)"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T_DIR/sa.pem" 2>/dev/null ||
		die "openssl genpkey failed"
	openssl pkey -in "$T_DIR/sa.pem" -pubout -out "$T_DIR/sa.pub" 2>/dev/null ||
		die "openssl pkey failed"
}

# pubsub_pg_up -- PostgreSQL alone (no SQS or DynamoDB emulator: a
# scenario with Pub/Sub destinations only starts in a third of
# stack_up's time), the schema applied; DATABASE_URL, HTTP_PORT and
# OUTBOXD_URL set, psql's PG* exported.
pubsub_pg_up() {
	local port
	port=$("$T_LIB/free-port")
	on_exit "'$T_LIB/pg-down.sh' '$T_DIR/pg' >/dev/null"
	add_log "$T_DIR/pg/pg.log"
	"$T_LIB/pg-up.sh" "$T_DIR/pg" "$port" >/dev/null || die "pg-up.sh failed"
	export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
	sql 'CREATE DATABASE outboxd' >/dev/null
	export PGDATABASE=outboxd
	psql -X -q -v ON_ERROR_STOP=1 -f "$T_ROOT/sql/schema.sql" >/dev/null || die "schema"
	DATABASE_URL=postgresql://postgres@127.0.0.1:$port/outboxd
	HTTP_PORT=$("$T_LIB/free-port")
	OUTBOXD_URL=http://127.0.0.1:$HTTP_PORT
}

# pubsub_conf FILE ENDPOINT -- with stack_up's stack, its file
# (outbox_conf_write, OB_* as the caller sets them; no consumers); after
# pubsub_pg_up, a file of its own without AWS (default destination
# audit); short relay backoff, Pub/Sub at ENDPOINT and two destinations:
# orders (ordering) and audit.
pubsub_conf() {
	if [ -n "${QUEUE_URL:-}" ]; then
		OB_CONSUMER_WORKERS=0 outbox_conf_write "$1"
	else
		cat >"$1" <<CONF
database = "$DATABASE_URL"
log_level = "info"
shutdown_timeout = 5000
http { listen = "127.0.0.1:$HTTP_PORT" workers = ${OB_HTTP_WORKERS:-1} }
relay {
	workers = 2
	poll_interval = ${OB_POLL_INTERVAL:-200}
	default_destination = "audit"
}
consumer { workers = 0 }
CONF
	fi
	sed -i "s/^relay {/relay {\n\tbackoff_base = 200\n\tbackoff_max = 1000\n\tmax_attempts = 1000/" "$1"
	cat >>"$1" <<CONF

pubsub { endpoint_url = "$2" }

destination orders {
	sink = "pubsub"
	project = "test-proj"
	topic = "orders"
	ordering = true
	timeout = 3000
}

destination audit {
	sink = "pubsub"
	project = "test-proj"
	topic = "audit"
	timeout = 3000
}
CONF
}
