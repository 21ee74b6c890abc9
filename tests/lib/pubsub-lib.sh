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

# pubsub_conf FILE ENDPOINT -- the stack's file (outbox_conf_write, OB_*
# as the caller sets them; no consumers), short relay backoff, Pub/Sub
# at ENDPOINT and two destinations: orders (ordering) and audit.
pubsub_conf() {
	OB_CONSUMER_WORKERS=0 outbox_conf_write "$1"
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
