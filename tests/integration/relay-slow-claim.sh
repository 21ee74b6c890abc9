#!/usr/bin/env bash
# relay-slow-claim.sh -- claims that take 1.5 s (a loaded server) and a
# webhook receiver that takes 1.7 s, four relays, lease = 4000 ms and
# webhook.timeout = 2000 ms.  A relay's mark goes out on the connection
# its claims use: a mark owed while a slow claim is in flight waits for
# it, and it can come after the lease of the rows it marks has ended;
# another relay's claim then takes the rows again and they are delivered
# twice.  A relay holds its next claim while such a claim would end after
# the lease of rows it has not marked yet.
# Asserts: the warning is logged; every row ends 'sent' after one attempt;
# the receiver got exactly one request per row, with as many distinct
# webhook-ids (before the hold: 312 requests for 200 rows).  Then claims
# slower than the lease less the timeout: nothing is published, and the
# warning names relay.lease.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
test_init
need_binaries
stack_up

webhook_receiver_start
webhook_receiver_slow 1700
# The slow claim: the real one, then a sleep while it still holds the rows.
sql "ALTER FUNCTION outbox_claim(bigint, bigint, integer, text, text[]) RENAME TO outbox_claim_fast;
CREATE FUNCTION outbox_claim(p_claim bigint, p_lease_ms bigint, p_limit integer,
    p_default text, p_skip text[])
RETURNS TABLE (id bigint, event_type text, ordering_key text, payload text,
    attempts integer, created_at timestamptz, destination text, headers text,
    replay bigint)
LANGUAGE plpgsql AS \$\$
BEGIN
	RETURN QUERY SELECT * FROM outbox_claim_fast(p_claim, p_lease_ms, p_limit,
	    p_default, p_skip);
	PERFORM pg_sleep(1.5);
END;
\$\$" >/dev/null
webhook_conf_write "$T_DIR/outbox.conf" 2000 "workers = 4" "batch_size = 32" \
	"poll_interval = 200" "lease = 4000" "max_attempts = 10"
outboxd_start "$T_DIR/outbox.conf"
webhook_drain_once 200 180

grep -m1 'holding the next claim' "$OUTBOXD_LOG" | sed 's/^/    /' || true
check "claims were held while rows at the sink had little lease left (warning logged)" \
	grep -qE 'holding the next claim until the [0-9]+ row\(s\) this relay holds are marked: their lease ends in [0-9]+ ms \(a claim took [0-9]+ ms lately, a mark [0-9]+ ms\)' "$OUTBOXD_LOG"

# A claim that alone takes longer than the lease leaves it (lease 2000 less
# webhook.timeout 1000): nothing can be published, and the warning says
# what to change rather than blaming the sink.
: >"$REC"
webhook_conf_write "$T_DIR/outbox.conf" 1000 "workers = 1" "batch_size = 32" \
	"poll_interval = 200" "lease = 2000"
outboxd_start "$T_DIR/outbox.conf"
sql "INSERT INTO outbox (event_type, ordering_key, payload) VALUES ('order.created', 'late', '{}')"
said() { grep -q 'the claim took [0-9]* ms and relay.lease leaves 1000 ms (lease less the sink.s timeout); find why claims are slow, or raise relay.lease' "$OUTBOXD_LOG"; }
wait_until 20 "the too-late warning" said || true
outboxd_stop
grep -m1 'relay.lease leaves' "$OUTBOXD_LOG" | sed 's/^/    /' || true
check "a claim slower than lease - timeout: the warning names relay.lease" said
check_eq "requests for a row whose claims always come too late" 0 "$(wc -l <"$REC")"
