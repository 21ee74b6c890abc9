#!/usr/bin/env bash
# relay-handoff.sh -- relay.handoff: an order after a quiet spell is written
# already claimed by its HTTP worker and handed to relay 1 over a local
# socket (src/handoff.c).  Webhook sink (the receiver records every request),
# 2 relays, relay.lease 3000 ms, webhook.timeout 1000 ms.
# Asserts, each phase with every row published exactly once (one request
# per row, distinct webhook-ids, all 'sent'):
#   1. orders 50 ms apart are all handed off: outboxd_handoff_rows_total
#      counts them and each row's claim was set by its own insert
#      (first_claimed_at = created_at); a burst of 200 concurrent orders
#      is delivered once each too, and not all of it is handed off;
#   2. paused: orders are written unclaimed, nothing is published or
#      handed off; after resume all are published;
#   3. relay 1 stopped (SIGSTOP) for longer than the lease while 250 orders
#      come: the socket fills (outboxd_handoff_failures_total > 0, "could not
#      hand" logged), relay 2 publishes every row after its lease, and relay
#      1, continued, drops what it finds too late ("too late to publish");
#   4. relay 1 killed (SIGKILL): rows handed over while it was down are read
#      by the relay 1 the master starts (the socket outlives it): all sent
#      well within the lease;
#   5. relay 1's PostgreSQL backend stopped (SIGSTOP) for longer than the
#      lease while orders come: at most 2 rows published twice (relay 1
#      takes no handed-off row while a statement hangs; it took every one
#      before, 116 duplicates in a trial);
#   6. reloaded with handoff = false: no more handoffs, rows are claimed by
#      the relays (first_claimed_at after created_at);
#   7. a SIGTERM to relay 1 alone is no stop of outboxd: the relay 1 the
#      master starts takes handed-off rows again;
#      stopped (SIGTERM to the master) with handed-off rows nobody will read:
#      relay 1 gives back those still in its socket (its backend hung when the
#      stop came); an HTTP worker held (SIGSTOP) across the stop while its
#      order commits (a trigger holds it 1.5 s) finds the socket shut and
#      gives the row back itself; each is left pending and unclaimed (it was
#      left claimed until its lease), and is published once after the
#      restart.
. "$(dirname "$0")/../lib/common.sh"
. "$T_LIB/relay-lib.sh"
. "$T_LIB/ops.sh"
test_init
need_binaries
stack_up
webhook_receiver_start

LEASE=3000
conf() { # HANDOFF
	webhook_conf_write "$T_DIR/outbox.conf" 1000 "workers = 2" "lease = $LEASE" \
		"poll_interval = 500" "handoff = $1"
}
conf true
outboxd_start "$T_DIR/outbox.conf"

# post_spaced PREFIX N SECONDS -- N orders one after the other, SECONDS apart
post_spaced() {
	local i
	for i in $(seq 1 "$2"); do
		curl -sS -o /dev/null -w '%{http_code}\n' --max-time 10 \
			-H 'Content-Type: application/json' \
			--data-binary "{\"customerId\":\"$1-$i\",\"amountCents\":$i}" \
			"$OUTBOXD_URL/orders" || echo 000
		sleep "$3"
	done >>"$T_DIR/codes"
}
rows() { sql "SELECT count(*) FROM outbox WHERE $1"; }
all_sent() { [ "$(rows "status <> 'sent'")" = 0 ] && [ "$(rows true)" = "$1" ]; }
# once N WHAT -- every one of the N rows sent, one request each (DUPS more:
# the ones phase 5 allows), N webhook-ids
DUPS=0
once() {
	wait_until 30 "all $1 rows sent" all_sent "$1" || true
	sleep 1	# a duplicate would come within the webhook timeout
	check_eq "$2: rows sent" "$1" "$(rows "status = 'sent'")"
	check_eq "$2: requests the receiver got (one per row)" $(($1 + DUPS)) "$(wc -l <"$REC")"
	check_eq "$2: distinct webhook-ids" "$1" \
		"$(jq -r '.headers["webhook-id"]' "$REC" | sort -u | wc -l)"
}
metric() { scrape "$T_DIR/m" && sample "$T_DIR/m" "$1"; }
# relay1_backend -- the pid of relay 1's PostgreSQL backend
relay1_backend() {
	local r1 ports bpid
	r1=$(relay_pids | awk '$1 == 1 { print $2 }')
	ports=$(ss -tnpH state established | awk -v p="pid=$r1," 'index($0, p) { n = split($3, a, ":"); print a[n] }' | paste -sd,)
	bpid=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'outboxd relay'
		AND client_port IN (${ports:-0})")
	[ -n "$bpid" ] || die "no PostgreSQL backend of relay 1 (ports $ports)"
	echo "$bpid"
}
reloads() { [ "$(grep -c 'msg="reload done: generation' "$OUTBOXD_LOG")" -ge "$1" ]; }

say "1. orders 50 ms apart, then a burst"
post_spaced a 60 0.05
once 60 "spaced orders"
check_eq "handed-off rows (outboxd_handoff_rows_total)" 60 "$(metric outboxd_handoff_rows_total)"
check_eq "rows claimed by their own insert (first_claimed_at = created_at)" 60 \
	"$(rows "first_claimed_at = created_at")"
check_eq "handoff failures" 0 "$(metric outboxd_handoff_failures_total)"
seq 1 200 | xargs -P 16 -I{} curl -sS -o /dev/null -w '%{http_code}\n' --max-time 10 \
	-H 'Content-Type: application/json' --data-binary '{"customerId":"b-{}","amountCents":1}' \
	"$OUTBOXD_URL/orders" >>"$T_DIR/codes"
once 260 "after a burst of 200"
ho=$(metric outboxd_handoff_rows_total)
check "some of the burst claimed by the relays, not handed off ($ho of 260 handed off)" \
	[ "$ho" -lt 260 ]
check_eq "burst rows claimed by a relay or their insert (claim cleared, sent)" 0 \
	"$(rows "status = 'sent' AND (claim IS NOT NULL OR first_claimed_at IS NULL)")"

say "2. paused"
"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" pause >/dev/null || fail "outboxctl pause"
post_spaced p 5 0.05
sleep 1.5
check_eq "paused: rows written unclaimed" 5 "$(rows "status = 'pending' AND claim IS NULL AND first_claimed_at IS NULL")"
check_eq "paused: nothing published" 260 "$(wc -l <"$REC")"
check_eq "paused: nothing handed off" "$ho" "$(metric outboxd_handoff_rows_total)"
"$T_ROOT/outboxctl" -c "$T_DIR/outbox.conf" resume >/dev/null || fail "outboxctl resume"
once 265 "after resume"

say "3. relay 1 stopped for longer than the lease"
r1=$(relay_pids | awk '$1 == 1 { print $2 }')
[ -n "$r1" ] || die "no relay 1"
kill -STOP "$r1"
t0=$(now_ms)
# 10 ms apart: each order after the NOTIFY window has closed, so each is
# handed off (back to back, a fast machine answers within the window)
post_spaced s 250 0.01
waited=$(($(now_ms) - t0))
hf=$(metric outboxd_handoff_failures_total)
check "the socket filled: handoff failures counted ($hf)" [ "$hf" -gt 0 ]
check "\"could not hand\" logged" grep -q 'could not hand outbox row' "$OUTBOXD_LOG"
# relay 2 takes them when their lease ends; relay 1 stays stopped past that
wait_until 30 "relay 2 publishes the stopped relay's rows" all_sent 515 || true
[ $waited -gt $((LEASE + 1000)) ] || sleep $(((LEASE + 1000 - waited) / 1000 + 1))
kill -CONT "$r1"
once 515 "relay 1 stopped"
check_eq "handed-off rows published before their lease ended" 0 \
	"$(rows "payload->>'customerId' LIKE 's-%' AND first_claimed_at = created_at
		AND sent_at - created_at < interval '$LEASE ms'")"
wait_until 10 "\"too late to publish\" logged by relay 1" \
	grep -q 'relay.1.*too late to publish' "$OUTBOXD_LOG" || true
check "relay 1, continued, dropped the rows it got too late" \
	grep -q 'relay.1.*too late to publish' "$OUTBOXD_LOG"

say "4. relay 1 killed"
r1=$(relay_pids | awk '$1 == 1 { print $2 }')
ho=$(metric outboxd_handoff_rows_total)
kill -KILL "$r1"
post_spaced k 10 0.05
once 525 "relay 1 killed"
check_eq "rows handed over while relay 1 was down, published within the lease" 10 \
	"$(rows "payload->>'customerId' LIKE 'k-%' AND sent_at - created_at < interval '$LEASE ms'")"
ho2=$(metric outboxd_handoff_rows_total)
check "the new relay 1 took them ($ho2 handed off, $ho before)" [ "$ho2" -ge $((ho + 10)) ]

say "5. relay 1's PostgreSQL backend hangs for longer than the lease"
# Orders keep coming while relay 1 cannot mark what it publishes: it must
# not take handed-off rows then (a claim would not get them either), or
# relay 2 publishes them again when their lease ends.
bpid=$(relay1_backend)
post_spaced h 100 0.05 &
poster=$!
sleep 1
kill -STOP "$bpid"
sleep $(((LEASE + 3000) / 1000))
kill -CONT "$bpid"
wait "$poster"
wait_until 30 "all 625 rows sent" all_sent 625 || true
sleep 1
# At most the row relay 1 held when the backend stopped (its mark waited:
# the same with claims) and the first one handed over after it (relay 1
# cannot see the hang before its next statement) may go out twice.
DUPS=$(($(wc -l <"$REC") - 625))
check "backend hung: at most 2 rows published twice ($DUPS)" [ "$DUPS" -le 2 ]
check_eq "backend hung: distinct webhook-ids" 625 \
	"$(jq -r '.headers["webhook-id"]' "$REC" | sort -u | wc -l)"
check_eq "backend hung: rows sent" 625 "$(rows "status = 'sent'")"

say "6. reloaded with handoff = false"
conf false
kill -HUP "$(proc_pid "$OUTBOXD_PIDFILE")"
wait_until 20 "reload done" reloads 1 || true
sleep 2
ho=$(metric outboxd_handoff_rows_total)
post_spaced f 20 0.05
once 645 "handoff off"
check_eq "no more handoffs" "$ho" "$(metric outboxd_handoff_rows_total)"
check_eq "rows claimed by the relays (first_claimed_at after created_at)" 20 \
	"$(rows "payload->>'customerId' LIKE 'f-%' AND first_claimed_at > created_at")"

say "7. stopped with handed-off rows nobody will read"
conf true
kill -HUP "$(proc_pid "$OUTBOXD_PIDFILE")"
wait_until 20 "second reload done" reloads 2 || true
sleep 2
r1=$(relay_pids | awk '$1 == 1 { print $2 }')
kill -TERM "$r1"
new_r1() { relay_pids | awk -v old="$r1" '$1 == 1 && $2 != old { f = 1 } END { exit !f }'; }
wait_until 20 "a new relay 1" new_r1 || true
sleep 1
ho=$(metric outboxd_handoff_rows_total)
post_spaced t 5 0.05
once 650 "relay 1 stopped alone"
check_eq "relay 1 stopped alone: the new relay 1 took the handed-off rows" $((ho + 5)) \
	"$(metric outboxd_handoff_rows_total)"
check_eq "relay 1 stopped alone: nothing given back" 0 "$(grep -c 'gave back' "$OUTBOXD_LOG" || true)"
# (a) Relay 1's backend hangs: its next poll claim (poll_interval 500 ms)
# waits, so it reads no handed-off row; three orders wait in the socket.
bpid=$(relay1_backend)
kill -STOP "$bpid"
sleep 1
post_spaced s 3 0.05
kill -TERM "$(proc_pid "$OUTBOXD_PIDFILE")"
sleep 0.5
kill -CONT "$bpid"
wait_until 20 "outboxd exited" outboxd_gone || true
check "relay 1 gave back the 3 rows in its socket (log)" \
	grep -q 'gave back 3 handed-off row(s) at the stop' "$OUTBOXD_LOG"
check_eq "relay 1's handed-off rows: pending and unclaimed after the stop" 3 \
	"$(rows "payload->>'customerId' LIKE 's-%' AND status = 'pending' AND claim IS NULL")"
outboxd_stop
# (b) An order written claimed for relay 1 whose commit its HTTP worker
# handles only after relay 1 has left: the worker is held across the stop,
# and may handle the commit before its own stop signal.
sql "CREATE FUNCTION slow_order() RETURNS trigger LANGUAGE plpgsql AS \$\$
	BEGIN IF NEW.customer_id LIKE 'slow-%' THEN PERFORM pg_sleep(1.5); END IF;
	RETURN NEW; END \$\$;
	CREATE TRIGGER slow_order BEFORE INSERT ON orders FOR EACH ROW
	EXECUTE FUNCTION slow_order()" >/dev/null
outboxd_start "$T_DIR/outbox.conf"
wait_until 20 "the given-back rows published after the restart" all_sent 653 || true
sleep 1
post_spaced slow 1 0 &
poster=$!
sleep 0.5
hpid=$(ps -e -o pid=,pgid=,args= | awk -v g="$(proc_pid "$OUTBOXD_PIDFILE")" \
	'$2 == g && $3 == "outboxd:" && $4 == "http" { print $1 }')
[ -n "$hpid" ] || die "no HTTP worker"
kill -STOP "$hpid"
kill -TERM "$(proc_pid "$OUTBOXD_PIDFILE")"
no_relays() { [ -z "$(relay_pids)" ]; }
wait_until 10 "the relays exited" no_relays || true
sleep 1.2	# the order commits meanwhile
kill -CONT "$hpid"
wait "$poster"
wait_until 20 "outboxd exited" outboxd_gone || true
check "the HTTP worker gave back the row relay 1 was gone for (log)" \
	grep -q 'gave back outbox row [0-9]*: outboxd is stopping' "$OUTBOXD_LOG"
check_eq "that row: handed off (first_claimed_at = created_at), pending and unclaimed" 1 \
	"$(rows "payload->>'customerId' LIKE 'slow-%' AND first_claimed_at = created_at
		AND status = 'pending' AND claim IS NULL")"
outboxd_stop
sql "DROP TRIGGER slow_order ON orders" >/dev/null
outboxd_start "$T_DIR/outbox.conf"
once 654 "after the stops"

check_eq "every POST answered 201" "201x654" \
	"$(sort "$T_DIR/codes" | uniq -c | awk '{ printf "%s%sx%s", s, $2, $1; s = " " }')"
check_eq "rows failed" 0 "$(rows "status = 'failed'")"
outboxd_stop
