#!/usr/bin/env bash
# config-check.sh -- `outboxd -t` accepts a good configuration ("configuration
# OK", exit 0, no database needed) and refuses bad ones with a non-zero
# exit and FILE:LINE pointing at the mistake; outboxd refuses to start on a
# database without the schema and says to apply sql/schema.sql; the schema
# file can be applied twice.
. "$(dirname "$0")/../lib/common.sh"
test_init
need_binaries
OUTBOXD=$T_ROOT/outboxd

# base configuration: line numbers below matter
base() {
	cat <<EOF
# config-check base configuration
database = "$1"
http {
	listen = "127.0.0.1:$2"
	workers = 2
	max_body_size = 65536
}
relay {
	workers = 1
	batch_size = 10
}
consumer {
	workers = 1
	wait_time = 2
}
aws {
	region = "us-east-1"
	access_key_id = "AKIDCONFIGCHECK"
	secret_access_key = "config-check-secret"
}
sqs {
	queue_url = "http://127.0.0.1:9/000000000000/order-events"
}
dynamodb {
	table = "fulfillments"
}
EOF
}
PORT=$("$T_LIB/free-port")
# nothing listens on port 9 of loopback: -t must not need the database
base "postgresql://postgres@127.0.0.1:9/none" "$PORT" >"$T_DIR/good.conf"

# run_t FILE -- outboxd -t -c FILE; sets RC and OUT (stdout+stderr)
run_t() {
	RC=0
	OUT=$(timeout 20 "$OUTBOXD" -t -c "$1" 2>&1) || RC=$?
}

# refused -- the last run exited by itself with a non-zero status
refused() { [ "$RC" != 0 ] && [ "$RC" != 124 ]; }

run_t "$T_DIR/good.conf"
check_eq "good file: exit status" 0 "$RC"
check "good file: prints \"configuration OK\" (got: ${OUT:0:200})" grep -q 'configuration OK' <<<"$OUT"

run_t "$T_DIR/nonexistent.conf"
check "missing file: non-zero exit ($RC)" [ "$RC" != 0 ]
check "missing file: names the file (got: ${OUT:0:200})" grep -qF "$T_DIR/nonexistent.conf" <<<"$OUT"

# bad CASE LINE SED -- a copy of the good file with SED applied must be
# refused, with FILE:LINE (LINE empty: only FILE) in the output
bad() {
	local name=$1 line=$2 expr=$3 f=$T_DIR/bad-$1.conf
	sed "$expr" "$T_DIR/good.conf" >"$f"
	run_t "$f"
	check "$name: refused, non-zero exit ($RC)" refused
	if [ -n "$line" ]; then
		check "$name: message has $f:$line (got: ${OUT:0:300})" grep -qF "$f:$line:" <<<"$OUT"
	else
		check "$name: message names the file (got: ${OUT:0:300})" grep -qF "$f" <<<"$OUT"
	fi
}
bad unknown-key 6 '6s/.*/\tmax_body_sise = 65536/'
bad unterminated-string 17 '17s/.*/\tregion = "us-east-1/'
bad workers-not-a-number 9 '9s/.*/\tworkers = "x"/'
bad http-workers-out-of-range 5 '5s/.*/\tworkers = 65/'
bad missing-database "" '2d'
check "missing database: message says database (got: ${OUT:0:300})" grep -qi 'database' <<<"$OUT"

# the shipped etc/outbox.conf is valid; its AWS settings come from the
# standard environment variables it documents
RC=0
OUT=$(AWS_REGION=eu-west-1 AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=env-secret \
	timeout 20 "$OUTBOXD" -t -c "$T_ROOT/etc/outbox.conf" 2>&1) || RC=$?
check_eq "shipped etc/outbox.conf (+ AWS_* env): exit status" 0 "$RC"
check "shipped etc/outbox.conf: \"configuration OK\" (got: ${OUT:0:200})" grep -q 'configuration OK' <<<"$OUT"

# Shared config files that are no regular file, or too large: refused at
# once (a FIFO blocked -t, /dev/zero ate the memory), naming the file.
mkdir -p "$T_DIR/cfgdir"; mkfifo "$T_DIR/cfgfifo"; truncate -s 2M "$T_DIR/cfgbig"
for f in "cfgdir:Is a directory" "cfgfifo:not a regular file" "cfgbig:larger than 1 MiB"; do
	RC=0
	OUT=$(env -u AWS_ACCESS_KEY_ID AWS_REGION=eu-west-1 AWS_PROFILE=x AWS_CONFIG_FILE="$T_DIR/${f%%:*}" \
		AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true \
		timeout 10 "$OUTBOXD" -t -c "$T_ROOT/etc/outbox.conf" 2>&1) || RC=$?
	check "AWS_CONFIG_FILE=${f%%:*}: refused at once (exit $RC): ${OUT:0:200}" \
		bash -c '[ "$1" = 78 ] && grep -qF "cannot read the shared config file $2: $3" <<<"$4"' _ "$RC" "$T_DIR/${f%%:*}" "${f#*:}" "$OUT"
done

# A region goes into endpoint host names (sqs.REGION.amazonaws.com): one
# that is no region name could name another host; refused, not shown.
for r in 'evil.example/x?' 'us east 1' 'x@127.0.0.1:9/' 'US-EAST-1' "$(printf 'r%.0s' $(seq 40))"; do
	RC=0
	OUT=$(env -u AWS_DEFAULT_REGION AWS_REGION="$r" AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=env-secret \
		AWS_EC2_METADATA_DISABLED=true timeout 20 "$OUTBOXD" -t -c "$T_ROOT/etc/outbox.conf" 2>&1) || RC=$?
	check "AWS_REGION='${r:0:20}' refused (exit $RC), naming where it came from, not its value: ${OUT:0:160}" \
		bash -c '[ "$1" = 78 ] && grep -q "the region from AWS_REGION is not a region name" <<<"$2" && ! grep -qF -- "$3" <<<"$2"' _ "$RC" "$OUT" "$r"
done

# ---- database without the schema ---------------------------------------------
PGP=$("$T_LIB/free-port")
on_exit "'$T_LIB/pg-down.sh' '$T_DIR/pg' >/dev/null"
add_log "$T_DIR/pg/pg.log"
"$T_LIB/pg-up.sh" "$T_DIR/pg" "$PGP" >/dev/null || die "pg-up.sh failed"
export PGHOST=127.0.0.1 PGPORT=$PGP PGUSER=postgres PGDATABASE=postgres
sql 'CREATE DATABASE noschema' >/dev/null
sql 'CREATE DATABASE twice' >/dev/null

base "postgresql://postgres@127.0.0.1:$PGP/noschema" "$("$T_LIB/free-port")" >"$T_DIR/noschema.conf"
RC=0
OUT=$(timeout 20 "$OUTBOXD" -c "$T_DIR/noschema.conf" 2>&1) || RC=$?
check "no schema: outboxd exits by itself, non-zero (exit $RC; 124 = still running after 20 s)" refused
check_eq "no schema: exit status 78 (EX_CONFIG, as debian/README.Debian says)" 78 "$RC"
check "no schema: message mentions sql/schema.sql (got: $(tail -c 300 <<<"$OUT"))" grep -q 'sql/schema.sql' <<<"$OUT"

RC=0
PGDATABASE=twice psql -X -q -v ON_ERROR_STOP=1 -f "$T_ROOT/sql/schema.sql" >/dev/null 2>"$T_DIR/s1.err" || RC=$?
check_eq "sql/schema.sql applies on an empty database" 0 "$RC"
RC=0
PGDATABASE=twice psql -X -q -v ON_ERROR_STOP=1 -f "$T_ROOT/sql/schema.sql" >/dev/null 2>"$T_DIR/s2.err" || RC=$?
check_eq "sql/schema.sql applies a second time (idempotent)" 0 "$RC"
[ "$RC" = 0 ] || say "second apply: $(head -3 "$T_DIR/s2.err")"

base "postgresql://postgres@127.0.0.1:$PGP/twice" "$PORT" >"$T_DIR/twice.conf"
run_t "$T_DIR/twice.conf"
check_eq "-t with a reachable database and the schema: exit status" 0 "$RC"
