-- outboxd schema.  Idempotent: applying it again changes nothing.
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f sql/schema.sql
-- Needs PostgreSQL 13 or later (gen_random_uuid() is built in).

BEGIN;

-- The business table the HTTP API writes.
CREATE TABLE IF NOT EXISTS orders (
	id		uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	customer_id	text NOT NULL,
	amount_cents	bigint NOT NULL CHECK (amount_cents >= 0),
	created_at	timestamptz NOT NULL DEFAULT now()
);

-- The outbox: one row per event, written in the same transaction as the
-- business change, published by the relays.
--   status		pending -> sent, or failed (dead letter)
--   ordering_key	events with the same key keep their order
--   available_at	not before this time: a claim's lease or a backoff
--   claim		token of the relay holding the row; every state change
--			checks it, so an expired claim cannot overwrite
--   first_claimed_at	set when a relay first took the row: from then on it
--			is its key's head and holds the key's later rows back
--   sent_at		when the broker's acknowledgement reached the relay
--			(the relay host's clock)
CREATE TABLE IF NOT EXISTS outbox (
	id		bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_type	text NOT NULL,
	ordering_key	text NOT NULL,
	payload		jsonb NOT NULL,
	status		text NOT NULL DEFAULT 'pending'
			CHECK (status IN ('pending', 'sent', 'failed')),
	attempts	integer NOT NULL DEFAULT 0,
	created_at	timestamptz NOT NULL DEFAULT now(),
	available_at	timestamptz NOT NULL DEFAULT now(),
	claim		bigint,
	first_claimed_at timestamptz,
	sent_at		timestamptz,
	last_error	text
);

-- Columns added after the first release (no-ops on a fresh database).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS first_claimed_at timestamptz;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS commit_seq bigint;
-- Where the row goes (a destination NAME {} of outbox.conf; NULL = the
-- relays' relay.default_destination) and the headers it carries there (a
-- JSON object of strings: SQS and SNS message attributes, webhook request
-- headers).  See outbox(7).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS destination text;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS headers jsonb;
-- Names quoted in the checks' messages: JSON's quoting, with DEL and
-- the C1 controls escaped too (to_json() leaves them raw, and U+009B
-- starts a terminal's control sequence), at most p_max characters and
-- "..." after.
CREATE OR REPLACE FUNCTION outbox_quoted(p_text text, p_max integer)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT string_agg(CASE WHEN t.c ~ '[\x7f-\x9f]'
		THEN '\u' || lpad(to_hex(ascii(t.c)), 4, '0') ELSE t.c END, ''
		ORDER BY t.n) ||
	    CASE WHEN length(p_text) > p_max THEN '...' ELSE '' END
	FROM regexp_split_to_table(to_json(left(p_text, p_max))::text, '')
	    WITH ORDINALITY AS t(c, n)
$$;

-- A destination is a name outbox.conf can give one (conf_dest_check.c:
-- 1 to 64 of A-Z a-z 0-9 _ . -): any other text can never be delivered,
-- and an empty event_type would be sent without its EventType attribute
-- (SQS and SNS refuse an empty value), which a consumer of a shared queue
-- needs to tell events apart.  Both are refused at the INSERT, in the
-- writer's transaction.  A trigger, not a CHECK constraint: PostgreSQL's
-- error for a CHECK shows the whole failing row, headers and payload
-- included, to the client and in the server's log.  The WHEN clause is
-- tested on the row, so a good row calls no function.  Rows of an
-- existing database are not checked (a bad destination fails at its
-- claim, as before, naming the destination).
CREATE OR REPLACE FUNCTION outbox_check_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.event_type = '' THEN
		RAISE EXCEPTION USING ERRCODE = 'check_violation',
		    MESSAGE = 'outbox.event_type: is empty (it becomes the '
			'EventType attribute, which SQS and SNS refuse empty)',
		    DETAIL = format('outbox row id %s', NEW.id),
		    HINT = 'The columns are in outbox(7).',
		    TABLE = 'outbox', COLUMN = 'event_type';
	END IF;
	RAISE EXCEPTION USING ERRCODE = 'check_violation',
	    MESSAGE = format('outbox.destination: %s is not a destination '
		'name (1 to 64 of A-Z a-z 0-9 _ . -)',
		outbox_quoted(NEW.destination, 64)),
	    DETAIL = format('outbox row id %s, event_type %s', NEW.id,
		coalesce(outbox_quoted(NEW.event_type, 64), 'NULL')),
	    HINT = 'The rule is in outbox(7), destination.',
	    TABLE = 'outbox', COLUMN = 'destination';
END;
$$;

DROP TRIGGER IF EXISTS outbox_check_row ON outbox;
CREATE TRIGGER outbox_check_row
	BEFORE INSERT OR UPDATE OF destination, event_type ON outbox
	FOR EACH ROW
	WHEN (NEW.destination !~ '^[A-Za-z0-9_.-]{1,64}$'
	    OR NEW.event_type = '')
	EXECUTE FUNCTION outbox_check_row();
-- The CHECK constraint that did this before.
ALTER TABLE outbox DROP CONSTRAINT IF EXISTS outbox_destination_name;
-- The replay (outbox_replays.id) that put a sent row back to pending;
-- NULL: a live row.  Kept once the row is sent again, for audit, until
-- another replay takes the row or retention deletes it.  The relay marks
-- the message of a row that has one (Outbox-Replay: the id).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS replay bigint;
-- A pending row held behind its key's head while that head is failed or
-- waits out a backoff: left out of outbox_ready_idx, so the claims do not
-- step over a hot key's whole backlog one row at a time.  Set by the
-- relay that records the head's failure, at a row's INSERT behind its
-- own transaction's (outbox_hold_run()) and at its commit behind a held
-- or failed row (outbox_stamp()); cleared for the next row in order by
-- the mark that sends the head (so a hot key drains one ready
-- row at a time), for all of them by a redrive, and by retention's pass
-- for rows whose head is gone.  The row stays 'pending' for everything
-- else.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS held boolean NOT NULL
	DEFAULT false;

-- The rules a row's headers must keep (outbox(7), HEADERS), checked when
-- the row is written, so that the application that wrote it hears of a
-- mistake at once, in its own transaction, and not a relay later with a
-- dead-lettered row.  Each header becomes an SQS or SNS message attribute
-- of type String and a webhook request header, so the rules are the
-- union of theirs:
--   - SQS and SNS take 10 attributes a message; outboxd sets EventType on
--     every message and Outbox-Replay on a replayed one (outboxctl(8),
--     replay): at most 8 headers, so that a replay of any row still fits;
--   - SQS and SNS attribute names: 1 to 256 of [A-Za-z0-9_.-], no "..",
--     not starting or ending with ".", not starting with "AWS." or
--     "Amazon." in any case (reserved by AWS);
--   - HTTP field names are case-insensitive: two names that differ only in
--     case would be one header;
--   - names outboxd or HTTP itself sets (EventType, the Standard Webhooks
--     headers, hop-by-hop and framing headers, authentication) would let
--     a row forge a signature or change how the request is delivered;
--   - values: a string of 1 to 4096 bytes (SQS and SNS refuse an empty
--     one), no control character but tab (CR and LF would end the header
--     line; jsonb cannot hold NUL), no U+FFFE or U+FFFF (outside SQS's
--     character set), no space or tab at either end (HTTP drops them, so
--     the webhook would not get the value the row holds);
--   - names and values together at most 8192 bytes, well inside the
--     header section a web server accepts (nginx: 8 KiB a line).
-- A value outside these rules that SQS or SNS refuses would fail the
-- whole batch it is in, again on every retry.  The relays check the same
-- rules (sink_headers_check() in src/sink.c) for rows written before this
-- trigger existed or while it was disabled.
--
-- A CHECK constraint cannot say which rule a row broke; the trigger says
-- it in the message (SQLSTATE 23514, check_violation, as a CHECK would).
-- Rows without headers (outboxd's own order.created rows) never call it:
-- the WHEN clause is tested on the row, without a function call.  It runs
-- on INSERT and on an UPDATE that sets headers; rows already in the table
-- are not checked when this file is applied.
CREATE OR REPLACE FUNCTION outbox_check_headers() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	v_name	text;
	v_value	jsonb;
	v_text	text;
	v_lower	text[] := '{}';
	v_names	text[] := '{}';
	v_q	text;
	v_i	integer;
	v_total	bigint := 0;
	v_why	text;
BEGIN
	IF jsonb_typeof(NEW.headers) = 'null' THEN
		v_why := 'must be SQL NULL or a JSON object, not JSON null';
	ELSIF jsonb_typeof(NEW.headers) <> 'object' THEN
		v_why := format('must be NULL or a JSON object, not %s %s',
		    CASE WHEN jsonb_typeof(NEW.headers) = 'array' THEN 'an'
		    ELSE 'a' END, jsonb_typeof(NEW.headers));
	ELSIF (SELECT count(*) FROM jsonb_object_keys(NEW.headers)) > 8 THEN
		v_why := format('%s headers, at most 8 (SQS and SNS take 10 '
		    'message attributes; EventType is one, Outbox-Replay on a '
		    'replay another)',
		    (SELECT count(*) FROM jsonb_object_keys(NEW.headers)));
	END IF;

	FOR v_name, v_value IN SELECT e.key, e.value
	    FROM jsonb_each(CASE WHEN v_why IS NULL THEN NEW.headers END) e
	LOOP
		v_q := outbox_quoted(v_name, 64);
		IF length(v_name) = 0 THEN
			v_why := 'header name "" is empty';
		ELSIF length(v_name) > 256 THEN
			v_why := format('header name %s has %s characters, '
			    'at most 256', v_q, length(v_name));
		ELSIF v_name !~ '^[-_.0-9A-Za-z]+$' THEN
			v_why := format('header name %s may hold only letters, '
			    'digits, "_", "-" and "."', v_q);
		ELSIF lower(v_name) LIKE 'aws.%'
		    OR lower(v_name) LIKE 'amazon.%' THEN
			v_why := format('header name %s starts with "AWS." or '
			    '"Amazon.", which AWS reserves', v_q);
		ELSIF strpos(v_name, '..') > 0 THEN
			v_why := format('header name %s has two periods in a '
			    'row', v_q);
		ELSIF left(v_name, 1) = '.' OR right(v_name, 1) = '.' THEN
			v_why := format('header name %s starts or ends with '
			    '"."', v_q);
		ELSIF lower(v_name) IN ('eventtype', 'content-type',
		    'user-agent', 'webhook-id', 'webhook-timestamp',
		    'webhook-signature', 'x-outbox-event-type',
		    'outbox-replay') THEN
			v_why := format('header %s is reserved (set by outboxd)',
			    v_q);
		ELSIF lower(v_name) IN ('authorization', 'proxy-authorization',
		    'cookie', 'set-cookie') THEN
			v_why := format('header %s is reserved (authentication)',
			    v_q);
		ELSIF lower(v_name) IN ('connection', 'keep-alive', 'te',
		    'trailer', 'transfer-encoding', 'upgrade')
		    OR lower(v_name) LIKE 'proxy-%' THEN
			v_why := format('header %s is reserved (hop-by-hop)',
			    v_q);
		ELSIF lower(v_name) IN ('host', 'content-length',
		    'content-encoding', 'expect') THEN
			v_why := format('header %s is reserved (HTTP framing)',
			    v_q);
		ELSIF lower(v_name) = ANY (v_lower) THEN
			v_i := array_position(v_lower, lower(v_name));
			v_why := format('headers %s and %s differ only in case '
			    '(HTTP header names are case-insensitive)',
			    outbox_quoted(v_names[v_i], 64), v_q);
		ELSIF jsonb_typeof(v_value) <> 'string' THEN
			v_why := format('header %s is %s, not a string', v_q,
			    CASE jsonb_typeof(v_value)
			    WHEN 'null' THEN 'JSON null'
			    WHEN 'array' THEN 'an array'
			    WHEN 'object' THEN 'an object'
			    ELSE 'a ' || jsonb_typeof(v_value) END);
		ELSE
			v_text := v_value #>> '{}';
			IF v_text = '' THEN
				v_why := format('header %s is empty (SQS and SNS '
				    'refuse an empty value)', v_q);
			ELSIF octet_length(v_text) > 4096 THEN
				v_why := format('header %s has a value of %s '
				    'bytes, at most 4096', v_q,
				    octet_length(v_text));
			-- Control characters, C0 (but tab), DEL and C1: in
			-- UTF-8 and LATIN1 databases alike these escapes are
			-- the code points.
			ELSIF v_text ~ '[\x01-\x08\x0a-\x1f\x7f-\x9f]' THEN
				v_why := format('header %s has a control '
				    'character in its value (only tab is '
				    'allowed)', v_q);
			ELSIF getdatabaseencoding() = 'UTF8'
			    AND v_text ~ '[\ufffe\uffff]' THEN
				v_why := format('header %s has U+FFFE or U+FFFF '
				    'in its value', v_q);
			ELSIF v_text ~ '^[ \t]|[ \t]$' THEN
				v_why := format('header %s has a space or tab at '
				    'the start or end of its value (HTTP would '
				    'drop it)', v_q);
			END IF;
			v_total := v_total + octet_length(v_name) +
			    octet_length(v_text);
		END IF;
		EXIT WHEN v_why IS NOT NULL;
		v_lower := v_lower || lower(v_name);
		v_names := v_names || v_name;
	END LOOP;

	IF v_why IS NULL AND v_total > 8192 THEN
		v_why := format('%s bytes of header names and values, at most '
		    '8192', v_total);
	END IF;
	IF v_why IS NOT NULL THEN
		RAISE EXCEPTION USING ERRCODE = 'check_violation',
		    MESSAGE = 'outbox.headers: ' || v_why,
		    DETAIL = format('outbox row id %s, event_type %s', NEW.id,
			coalesce(outbox_quoted(NEW.event_type, 64), 'NULL')),
		    HINT = 'The rules are in outbox(7), HEADERS.',
		    TABLE = 'outbox', COLUMN = 'headers';
	END IF;
	RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS outbox_check_headers ON outbox;
CREATE TRIGGER outbox_check_headers
	BEFORE INSERT OR UPDATE OF headers ON outbox
	FOR EACH ROW
	WHEN (NEW.headers IS NOT NULL)
	EXECUTE FUNCTION outbox_check_headers();

-- Commit order per key.  An id (or created_at) is taken at insert time, but
-- a row becomes visible at commit, and two transactions writing one key can
-- commit in the other order.  At commit, a deferred trigger takes a lock on
-- the row's key (held until the commit has ended) and stamps the row from a
-- sequence: for one key, stamp order is commit order.  Writers of one key
-- wait for each other only for the instant of their commits.
--
-- One lock per key: a transaction that writes tens of thousands of keys at
-- once can fill PostgreSQL's lock table (see CAVEATS in outboxd(8)).  Locks
-- on buckets of keys would cap that, but let writers of different keys
-- deadlock when their buckets come in the opposite order.
--
-- Sessions that set outboxd.stamp = off skip it: outboxd's HTTP workers do,
-- because an order.created event's key is the order's own new id, which no
-- other row can share.  Rows without a stamp sort first, by id.
CREATE SEQUENCE IF NOT EXISTS outbox_commit_seq;

--
-- A row is also held (outbox.held) from the start
--   - behind the transaction's own previous row when that was of the same
--     key and destination: outbox_hold_run() sets held at the INSERT, and
--     the stamp keeps it.  A transaction that writes a backlog for one key
--     (a batch job, an import) puts only its first row in the claims'
--     index, and no claim steps over the rest one by one.  That row is
--     seen by nobody until this commit, so the mark that sends it, which
--     releases the next held row, is certain to see this one.  It must
--     exist: an INSERT that ran the trigger may not have written its row
--     (ON CONFLICT DO NOTHING, or a later BEFORE trigger that returned
--     NULL), and nothing would release the rows held behind it;
--   - by the stamp, behind a held or a failed row of its key and destination, stamped
--     (so ahead of this row, the newest, in the claims' order; this
--     transaction's later rows, held at their INSERT by outbox_hold_run()
--     and not stamped yet, are behind it): the key is hot (its head failed
--     or backs off), and rows that keep coming join the held ones instead
--     of being stepped over by every claim.  That row is locked (FOR
--     SHARE) first, so that whatever releases, redrives or deletes it
--     waits for this commit and then sees this row held behind it, and
--     nothing releases this one before it; a row being changed right now
--     (SKIP LOCKED) leaves this row unheld.
-- The lookup reads outbox_held_idx, which has only the held and failed
-- rows: a fresh key costs one probe of a nearly empty index, never a
-- walk of its key's unsent rows.  The second rule is left out for
-- writers in REPEATABLE READ or SERIALIZABLE: their lock on a row
-- released since their snapshot would fail their commit.
-- Nothing is held that no mark or redrive would release, but for rows
-- whose row ahead is deleted or re-keyed (by hand, or by the transaction
-- that wrote them): the retention pass of relay 1, a minute apart,
-- releases those.  A row left unheld is only stepped over, which is
-- slower, never out of order (outbox_claim()'s NOT EXISTS keeps the
-- order either way).
--
-- Sequential scans are off for the function: a session's plans for its
-- two statements are made once, and a plan made while outbox was empty
-- (just created, or truncated and vacuumed: the planner then knows it is
-- empty) reads the whole table at every stamp, so that a stream of
-- one-row transactions costs more for each row than the last.
CREATE OR REPLACE FUNCTION outbox_stamp() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
	v_held	boolean := NEW.held;	-- outbox_hold_run()'s answer
	v_id	bigint;
BEGIN
	PERFORM pg_advisory_xact_lock(2027, hashtext(NEW.ordering_key));
	-- In REPEATABLE READ or SERIALIZABLE, a lock on a row released since
	-- the transaction's snapshot would fail the writer's commit (could
	-- not serialize).
	IF NOT v_held AND
	    current_setting('transaction_isolation') = 'read committed' THEN
		SELECT p.id INTO v_id FROM outbox p
		WHERE (p.held OR p.status = 'failed')
		  AND p.ordering_key = NEW.ordering_key
		  AND coalesce(p.commit_seq, 0) > 0
		  AND p.destination IS NOT DISTINCT FROM NEW.destination
		LIMIT 1;
		IF v_id IS NOT NULL THEN
			PERFORM 1 FROM outbox p WHERE p.id = v_id
			  AND (p.held OR p.status = 'failed')
			FOR SHARE SKIP LOCKED;
			v_held := FOUND;
		END IF;
	END IF;
	UPDATE outbox SET commit_seq = nextval('outbox_commit_seq'),
	    held = v_held
	WHERE id = NEW.id;
	RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS outbox_stamp ON outbox;
CREATE CONSTRAINT TRIGGER outbox_stamp AFTER INSERT ON outbox
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW
	WHEN (coalesce(current_setting('outboxd.stamp', true), 'on') <> 'off')
	EXECUTE FUNCTION outbox_stamp();

-- The first rule above (see outbox_stamp()), at the INSERT: a backlog's
-- rows go straight into outbox_held_idx.  Held only at the commit, each
-- would have left a dead entry in outbox_ready_idx that every claim steps
-- over until a vacuum (100,000 of them: the first claim 77 ms, the next
-- ones ~1.5 ms more each).  outboxd.insert_last keeps the id of the run's
-- first row, then its key and destination, unambiguously (an id has no
-- '/', a destination no ':').  The second row of a run is held only if
-- that row was written (earlier rows of the same INSERT are visible to its
-- BEFORE trigger), is not sent, and is not stamped: its transaction's own,
-- not another's that has the id (which an INSERT with OVERRIDING SYSTEM
-- VALUE and ON CONFLICT DO NOTHING can meet).  Once found, the id is
-- dropped from the setting and the run's later rows are held with no
-- lookup.
CREATE OR REPLACE FUNCTION outbox_hold_run() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	v_me	text := length(NEW.ordering_key) || ':' || NEW.ordering_key ||
		    coalesce(NEW.destination, '');
	v_last	text := current_setting('outboxd.insert_last', true);
	v_at	integer := strpos(v_last, '/');
BEGIN
	IF v_at = 1 AND substr(v_last, 2) = v_me THEN
		NEW.held := true;	-- the run's first row was found
	ELSIF v_at > 1 AND substr(v_last, v_at + 1) = v_me THEN
		NEW.held := EXISTS (SELECT 1 FROM outbox p
		    WHERE p.id = left(v_last, v_at - 1)::bigint
		      AND p.status <> 'sent' AND p.commit_seq IS NULL);
		IF NEW.held THEN
			PERFORM set_config('outboxd.insert_last',
			    substr(v_last, v_at), true);
		END IF;
	END IF;
	IF NOT NEW.held THEN
		PERFORM set_config('outboxd.insert_last', NEW.id || '/' || v_me,
		    true);
	END IF;
	RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS outbox_hold_run ON outbox;
CREATE TRIGGER outbox_hold_run BEFORE INSERT ON outbox
	FOR EACH ROW
	WHEN (coalesce(current_setting('outboxd.stamp', true), 'on') <> 'off')
	EXECUTE FUNCTION outbox_hold_run();

-- The relay's claim scans pending rows in id order; a partial index keeps
-- that scan small however many sent rows the table holds.
CREATE INDEX IF NOT EXISTS outbox_pending_idx
	ON outbox (id) WHERE status = 'pending';

-- The claims scan the rows they may take, pending and not held, in id
-- order.
CREATE INDEX IF NOT EXISTS outbox_ready_idx
	ON outbox (id) WHERE status = 'pending' AND NOT held;

-- A claim that leaves some destinations reads each of the others on its
-- own (outbox_claim()); the named ones through this index.  Rows without
-- a destination (POST /orders' own) are not in it and cost it nothing.
-- (outbox_pending_dest_idx of earlier releases also held the held rows.)
DROP INDEX IF EXISTS outbox_pending_dest_idx;
CREATE INDEX IF NOT EXISTS outbox_ready_dest_idx
	ON outbox (destination, id)
	WHERE status = 'pending' AND NOT held AND destination IS NOT NULL;

-- The held rows of a key in the claims' order, to release the next one
-- when its head is sent (and, for retention, those whose head is gone);
-- and the failed ones, so that outbox_stamp() finds whether a key is hot
-- with one probe.  (Earlier releases had the held rows only.)
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_index i
	    WHERE i.indexrelid = to_regclass('outbox_held_idx')
	      AND pg_get_expr(i.indpred, i.indrelid) NOT LIKE '%failed%') THEN
		DROP INDEX outbox_held_idx;
	END IF;
END;
$$;
CREATE INDEX IF NOT EXISTS outbox_held_idx
	ON outbox (ordering_key, (coalesce(commit_seq, 0)), id)
	WHERE held OR status = 'failed';

-- Per-key ordering looks up a row's unsent siblings.
CREATE INDEX IF NOT EXISTS outbox_key_idx
	ON outbox (ordering_key, id) WHERE status <> 'sent';

-- Retention (relay.retention) finds the sent rows that are due, oldest
-- first, and stops where they end.  Without it each pass, once a minute,
-- read the whole table to find them: 1,000,000 sent rows none of which
-- was due, 254 ms and 266 MB a pass; with it, 0.1 ms.  On an existing
-- large outbox it is built inside this file's transaction, which locks
-- outbox against reads and writes until it commits (about 0.6 s per
-- million rows); to avoid that, create it first, outside a transaction:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_sent_idx
--       ON outbox (sent_at) WHERE status = 'sent';
CREATE INDEX IF NOT EXISTS outbox_sent_idx
	ON outbox (sent_at) WHERE status = 'sent';

-- A queue table: updated and deleted constantly, so vacuum it often.  Each
-- row is updated twice: claimed (claim, available_at, first_claimed_at: no
-- index covers them) and then marked sent.  Half of each page is left free
-- so that the claim's update stays on the row's page as a HOT update, with
-- no new entry in any index (the mark cannot be HOT: status is in the
-- partial indexes' predicates).  20,000 rows to SQS, one relay: the
-- server's CPU per row fell from 73 to 62 us against fillfactor 90.
ALTER TABLE outbox SET (
	fillfactor = 50,
	autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_analyze_scale_factor = 0.05,
	autovacuum_vacuum_cost_delay = 0
);

-- Wake the relays: one payload-free NOTIFY per inserting statement (not
-- per row).  It is only a hint; relays also poll, and scan after every
-- (re)connect because notifications are lost while nobody listens.
--
-- A transaction that queued a NOTIFY takes a database-wide lock at commit,
-- which serialises every such commit.  outboxd's HTTP workers therefore
-- set outboxd.notify = off on their sessions, so the trigger skips their
-- inserts, and send one NOTIFY per few milliseconds themselves after the
-- commit; every other writer of the outbox is woken for by the trigger.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('outbox_new', '');
	RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
	FOR EACH STATEMENT
	WHEN (coalesce(current_setting('outboxd.notify', true), 'on') <> 'off')
	EXECUTE FUNCTION outbox_notify();

-- Operator switches shared by every relay on every host.
CREATE TABLE IF NOT EXISTS outbox_control (
	id		integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
	paused		boolean NOT NULL DEFAULT false,
	paused_at	timestamptz
);
INSERT INTO outbox_control (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- relay.mode = "wal": the position each slot was confirmed to, kept by
-- the streaming relay about every second.  PostgreSQL before 17 does not
-- always save a logical slot's confirmed position at a clean shutdown, so
-- after a server restart the slot can stream transactions already done
-- again; the relay skips those up to here.
CREATE TABLE IF NOT EXISTS outbox_wal_confirmed (
	slot		text PRIMARY KEY,
	lsn		pg_lsn NOT NULL,
	updated_at	timestamptz NOT NULL DEFAULT now()
);

-- Destinations an operator paused (outboxctl pause DESTINATION): no relay
-- claims their rows until they are resumed.
CREATE TABLE IF NOT EXISTS outbox_paused_destinations (
	destination	text PRIMARY KEY,
	paused_at	timestamptz NOT NULL DEFAULT now()
);

-- outbox_claim(claim, lease_ms, limit): take up to limit rows, at most
-- one per ordering key (the key's head), mark them with claim and hide
-- them from other relays for lease_ms.  Called in its own transaction.
--
-- Order per key: a row is its key's head when no other unsent row of the
-- key is in progress (claimed, backing off or failed) and, among rows not
-- yet taken, it committed first (the lowest commit_seq, see outbox_stamp()).
-- Both conditions are one NOT EXISTS, so one probe of outbox_key_idx a row.
-- A transaction that commits late is published after the rows that
-- committed before it, never skipped: there is no "last id seen".
--
-- Relays claiming at the same time take different keys: step 1 takes a
-- transaction-level advisory lock on each candidate's key and skips keys
-- another relay holds; step 2 claims the candidates under row locks.
-- The scan must walk outbox_ready_idx in id order and stop at the
-- limit, whatever the statistics say: right after a backlog lands (a
-- broker outage, a bulk insert) they still describe a small table, and the
-- planner then reads every pending row with a bitmap scan, runs the NOT
-- EXISTS probe for each and sorts them all: 20,000 pending rows, 100 to
-- 300 ms a claim until the next ANALYZE (B2 ran at half speed for its
-- first second).  Sorts and bitmap scans are therefore switched off for
-- the function's statements, which leaves the ordered index scan.
-- Sequential scans are off too: on a small table (a quiet outbox after
-- retention, or a new one) the planner read all of outbox to find step
-- 2's rows by ctid instead of a TID scan, ~1 ms of a ~1.4 ms claim of one
-- row among 2,000.  JIT is off because a plan that still holds a disabled
-- node costs over jit_above_cost and would be compiled on every call.
-- With the other plans ruled out, a generic plan is the same plan as a
-- custom one, without planning both statements again on every call (about
-- 0.15 ms of a one-row claim).
--
-- Destinations: a key's order is kept within one destination (the
-- column as written: NULL and the default's name are two), so a
-- destination that is down holds back only its own rows.  p_default
-- names the destination of rows whose column is NULL; the rows of every
-- destination in p_skip (one the calling relay has enough of in hand)
-- and of every paused destination are left for a later claim.
--
-- outbox_claim(bigint, bigint, integer) of earlier releases, without
-- destinations, is left in place for their relays during an upgrade.
--
-- The result gained the replay column after the first release with
-- destinations; a function's result cannot be changed in place, so the
-- old one is dropped first (this file runs in one transaction: no claim
-- sees it missing).  Relays of that release name the columns they read
-- and go on working with this one.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = 'outbox_claim'
	    AND p.pronargs = 5 AND NOT ('replay' = ANY (p.proargnames))) THEN
		DROP FUNCTION outbox_claim(bigint, bigint, integer, text, text[]);
	END IF;
END;
$$;
CREATE OR REPLACE FUNCTION outbox_claim(p_claim bigint, p_lease_ms bigint,
    p_limit integer, p_default text, p_skip text[])
RETURNS TABLE (id bigint, event_type text, ordering_key text, payload text,
    attempts integer, created_at timestamptz, destination text,
    headers text, replay bigint)
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	v_rows	tid[] := '{}';
	v_row	tid;
	v_key	text;
	v_skip	text[];
	v_want	integer;
	v_window	integer;
	v_got	integer := 0;
	v_n	integer;
	v_round	integer := 0;
BEGIN
	IF (SELECT c.paused FROM outbox_control c WHERE c.id = 1) THEN
		RETURN;
	END IF;
	v_skip := coalesce(p_skip, '{}') || ARRAY(
	    SELECT p.destination FROM outbox_paused_destinations p);

	-- Rounds: step 1 reads with the snapshot of its own start, so a
	-- candidate another relay claimed and committed meanwhile is lost at
	-- step 2 (its lease is no longer due).  A claim that came back short
	-- for that reason alone would tell the relay the backlog is gone, and
	-- it would wait for its next poll: with four relays claiming at once,
	-- about half their claims came back short or empty while thousands of
	-- rows were due.  So when step 2 lost candidates the scan runs again
	-- (a new statement, a new snapshot) for the rest, up to five rounds.
	-- This transaction's own advisory locks and claims carry over: its
	-- claimed rows are no longer due, so no round takes a row twice.
	LOOP
		v_rows := '{}';
		v_want := p_limit - v_got;
		v_window := v_want + 1000;
		-- Step 1: heads in id order.  A key another relay is claiming right
		-- now (its advisory lock is taken) is skipped and the scan goes on,
		-- so relays claiming at the same moment take different rows.  The
		-- scan reads at most 1,000 heads more than it wants: room to step
		-- over what other relays are claiming at that instant (three
		-- claims of the default 100, and the heads of claims that
		-- committed after this scan's snapshot), whatever this claim's own
		-- limit.  A window of 4 x the limit was too small for a relay
		-- topping up its last 20 rows of room: the others' 300 locked
		-- heads filled it, the claim came back empty and the relay
		-- waited for its poll with a backlog due.  Skipping a head costs a
		-- probe and a lock attempt; free heads end the scan early.
		--
		-- The plan must not depend on the statistics: right after a backlog
		-- lands (a broker outage, a bulk insert) they still describe a small
		-- table, and a planner that turns NOT EXISTS into a join may then scan
		-- all of outbox_key_idx for every row.  OFFSET 0 keeps the NOT EXISTS
		-- a subplan, which always probes outbox_key_idx with the row's key.
		IF cardinality(v_skip) = 0 THEN
			FOR v_row, v_key IN
				SELECT o.ctid, o.ordering_key FROM outbox o
				WHERE o.status = 'pending' AND NOT o.held
				  AND o.available_at <= now()
				  AND NOT EXISTS (SELECT 1 FROM outbox s
					WHERE s.ordering_key = o.ordering_key
					  AND s.id <> o.id AND s.status <> 'sent'
					  AND s.destination IS NOT DISTINCT FROM o.destination
					  AND (s.status = 'failed' OR
					    s.first_claimed_at IS NOT NULL OR
					    (o.first_claimed_at IS NULL AND
					    (coalesce(s.commit_seq, 0), s.id) <
					    (coalesce(o.commit_seq, 0), o.id)))
					OFFSET 0)
				ORDER BY o.id
				LIMIT v_window
			LOOP
				CONTINUE WHEN NOT pg_try_advisory_xact_lock(2026,
				    hashtext(v_key));
				v_rows := v_rows || v_row;
				EXIT WHEN cardinality(v_rows) >= v_want;
			END LOOP;
		ELSE
			-- Some destinations are left (paused, or the relay has its
			-- fill of them): their rows are not read at all, however many
			-- are due, so that one slow destination's backlog cannot make
			-- every claim slow.  Each destination that is taken is read on
			-- its own in id order -- the named ones through
			-- outbox_ready_dest_idx, found with a skip scan of it, the
			-- rows without one through outbox_ready_idx -- and the heads
			-- of all of them are merged in id order.
			FOR v_row, v_key IN
				WITH RECURSIVE d(name) AS (
					(SELECT o.destination FROM outbox o
					WHERE o.status = 'pending' AND NOT o.held
					  AND o.destination IS NOT NULL
					ORDER BY o.destination LIMIT 1)
					UNION ALL
					SELECT (SELECT o.destination FROM outbox o
						WHERE o.status = 'pending' AND NOT o.held
						  AND o.destination > d.name
						ORDER BY o.destination LIMIT 1)
					FROM d WHERE d.name IS NOT NULL),
				t(name) AS (
					SELECT d.name FROM d WHERE d.name IS NOT NULL
					  AND d.name <> ALL (v_skip))
				SELECT c.ctid, c.ordering_key FROM (
					SELECT x.ctid, x.ordering_key, x.id
					FROM t CROSS JOIN LATERAL (
					SELECT o.ctid, o.ordering_key, o.id FROM outbox o
					WHERE o.status = 'pending' AND NOT o.held
					  AND o.destination = t.name
					  AND o.available_at <= now()
					  AND NOT EXISTS (SELECT 1 FROM outbox s
						WHERE s.ordering_key = o.ordering_key
						  AND s.id <> o.id AND s.status <> 'sent'
						  AND s.destination IS NOT DISTINCT FROM
						    o.destination
						  AND (s.status = 'failed' OR
						    s.first_claimed_at IS NOT NULL OR
						    (o.first_claimed_at IS NULL AND
						    (coalesce(s.commit_seq, 0), s.id) <
						    (coalesce(o.commit_seq, 0), o.id)))
						OFFSET 0)
					ORDER BY o.id
					LIMIT v_window) x
					UNION ALL
					(SELECT o.ctid, o.ordering_key, o.id FROM outbox o
					WHERE (p_default IS NULL OR
					    p_default <> ALL (v_skip))
					  AND o.status = 'pending' AND NOT o.held
					  AND o.destination IS NULL
					  AND o.available_at <= now()
					  AND NOT EXISTS (SELECT 1 FROM outbox s
						WHERE s.ordering_key = o.ordering_key
						  AND s.id <> o.id AND s.status <> 'sent'
						  AND s.destination IS NOT DISTINCT FROM
						    o.destination
						  AND (s.status = 'failed' OR
						    s.first_claimed_at IS NOT NULL OR
						    (o.first_claimed_at IS NULL AND
						    (coalesce(s.commit_seq, 0), s.id) <
						    (coalesce(o.commit_seq, 0), o.id)))
						OFFSET 0)
					ORDER BY o.id
					LIMIT v_window)) c
				ORDER BY c.id
				LIMIT v_window
			LOOP
				CONTINUE WHEN NOT pg_try_advisory_xact_lock(2026,
				    hashtext(v_key));
				v_rows := v_rows || v_row;
				EXIT WHEN cardinality(v_rows) >= v_want;
			END LOOP;
		END IF;

		EXIT WHEN cardinality(v_rows) = 0;

		-- Step 2: claim the candidates that are still pending and due.  A
		-- candidate is still its key's head unless it changed itself since
		-- step 1's snapshot: a key's head changes only when the head is
		-- claimed, sent or failed (later commits sort after it, see
		-- outbox_stamp()), and the row lock (SKIP LOCKED, and the re-check of
		-- a row another relay has just updated) sees exactly that.
		--
		-- The candidates are found again by their ctid, with a TID scan whatever
		-- the statistics say: when they still say "nothing is pending" (a
		-- backlog that landed after the last ANALYZE) the planner took a partial
		-- index that looked empty and scanned all of it for an id list, 40 ms a
		-- claim of 100.  coalesce() keeps the status test from matching the
		-- partial indexes' predicates, which leaves them out of the choice.
		--
		-- created_at is returned for the publish latency metric.
		RETURN QUERY
		UPDATE outbox o
		SET claim = p_claim,
		    available_at = now() + p_lease_ms * interval '1 millisecond',
		    first_claimed_at = coalesce(o.first_claimed_at, now())
		WHERE o.ctid = ANY (ARRAY(
			SELECT c.ctid FROM outbox c
			WHERE c.ctid = ANY (v_rows)
			  AND coalesce(c.status, '') = 'pending'
			  AND NOT coalesce(c.held, false)
			  AND c.available_at <= now()
			FOR UPDATE SKIP LOCKED))
		RETURNING o.id, o.event_type, o.ordering_key, o.payload::text,
		    o.attempts, o.created_at, o.destination, o.headers::text, o.replay;
		GET DIAGNOSTICS v_n = ROW_COUNT;
		v_got := v_got + v_n;
		v_round := v_round + 1;
		EXIT WHEN v_n = cardinality(v_rows) OR v_got >= p_limit OR
		    v_round >= 5;
	END LOOP;
END;
$$;

-- Replays (outboxctl(8), REPLAY): one row per request to publish sent
-- rows again.  The filter is kept as given (NULL: not filtered on); at
-- least one part of it is set.  Times are half-open: from <= t < to.
--   default_destination	the requester's relay.default_destination:
--			a row whose destination is NULL is that one's
--   requested_by, requested_at	who asked (outboxctl: user@host; the
--			admin API: its peer) and when
--   last_id		the highest outbox id at the request; with
--			requested_at it fixes the selection: rows sent
--			after the request are not part of it
--   total		rows the filter selected at the request (the dry
--			run's count)
--   next_id		how far the job has gone: every row with an id up
--			to it has been considered
--   done		rows put back to pending so far; less than total
--			when some were deleted, or not 'sent' any more,
--			by the time the job reached them
--   stepped_at		the job's last step: the rate is kept across every
--			relay 1 of every host from it
--   finished_at, cancelled	when the job was over, and whether an
--			operator ended it
CREATE TABLE IF NOT EXISTS outbox_replays (
	id		bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_type	text,
	ordering_key	text,
	destination	text,
	created_from	timestamptz,
	created_to	timestamptz,
	sent_from	timestamptz,
	sent_to		timestamptz,
	default_destination text,
	requested_by	text NOT NULL,
	requested_at	timestamptz NOT NULL DEFAULT now(),
	last_id		bigint NOT NULL,
	total		bigint NOT NULL,
	next_id		bigint NOT NULL DEFAULT 0,
	done		bigint NOT NULL DEFAULT 0,
	stepped_at	timestamptz NOT NULL DEFAULT now(),
	finished_at	timestamptz,
	cancelled	boolean NOT NULL DEFAULT false,
	CONSTRAINT outbox_replays_filter CHECK (event_type IS NOT NULL OR
	    ordering_key IS NOT NULL OR destination IS NOT NULL OR
	    created_from IS NOT NULL OR created_to IS NOT NULL OR
	    sent_from IS NOT NULL OR sent_to IS NOT NULL)
);

-- The job finds the replays still under way; the progress of one counts
-- its rows not sent yet.  Live rows (replay NULL) have no entry.
CREATE INDEX IF NOT EXISTS outbox_replays_open_idx
	ON outbox_replays (id) WHERE finished_at IS NULL;
CREATE INDEX IF NOT EXISTS outbox_replay_idx
	ON outbox (replay) WHERE replay IS NOT NULL AND status <> 'sent';

-- outbox_replay_step(rate): one step of the oldest replay under way, run
-- by relay 1's replay job (src/replay_job.c) a few times a second.  It
-- puts back to pending at most rate rows a second since the last step
-- (of any host), and none while 2 s worth of its rows still wait
-- unsent (a slow or paused destination), in id order, from the rows
-- with an id above next_id and up to 50,000 ids further: each step
-- reads a bounded range of the primary key, however sparse the
-- selection.  A row goes back as a redriven one does, and more: status
-- pending, available now, no claim, attempts 0, no last_error,
-- first_claimed_at NULL (it is no key's head yet) and replay set.  It
-- keeps its id, payload, headers and commit_seq, so it sorts where it
-- was among its key's rows: replayed rows go out in their original
-- order, and a live row of the key written later waits behind them.
-- sent_at keeps the first publish until the row is marked sent again.
-- The filter here must select what replay.c's count selects.
-- Answers the replay's id, the rows moved and whether it is over; no
-- row when none is under way.  Wakes the relays when it moved rows.
CREATE OR REPLACE FUNCTION outbox_replay_step(p_rate integer)
RETURNS TABLE (replay bigint, moved integer, finished boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	r	outbox_replays%ROWTYPE;
	v_budget integer;
	v_wait	integer;
	v_to	bigint;
	v_n	integer;
	v_sel	integer;
	v_last	bigint;
BEGIN
	SELECT * INTO r FROM outbox_replays x WHERE x.finished_at IS NULL
	ORDER BY x.id LIMIT 1 FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	v_budget := least(floor(p_rate * extract(epoch FROM
	    clock_timestamp() - r.stepped_at)), p_rate)::integer;
	SELECT count(*) INTO v_wait FROM (SELECT 1 FROM outbox w
	    WHERE w.replay = r.id AND w.status = 'pending'
	    LIMIT 2 * p_rate) w;
	v_budget := least(v_budget, 2 * p_rate - v_wait);
	IF v_budget < 1 THEN
		RETURN QUERY SELECT r.id, 0, false;
		RETURN;
	END IF;
	v_to := least(r.next_id + 50000, r.last_id);
	WITH s AS (
		SELECT o.id FROM outbox o
		WHERE o.id > r.next_id AND o.id <= v_to
		  AND o.status = 'sent' AND o.sent_at <= r.requested_at
		  AND (r.event_type IS NULL OR o.event_type = r.event_type)
		  AND (r.ordering_key IS NULL OR
		    o.ordering_key = r.ordering_key)
		  AND (r.destination IS NULL OR coalesce(o.destination,
		    r.default_destination) = r.destination)
		  AND (r.created_from IS NULL OR o.created_at >= r.created_from)
		  AND (r.created_to IS NULL OR o.created_at < r.created_to)
		  AND (r.sent_from IS NULL OR o.sent_at >= r.sent_from)
		  AND (r.sent_to IS NULL OR o.sent_at < r.sent_to)
		ORDER BY o.id LIMIT v_budget FOR UPDATE),
	u AS (
		UPDATE outbox o SET status = 'pending', available_at = now(),
		    claim = NULL, first_claimed_at = NULL, attempts = 0,
		    last_error = NULL, replay = r.id
		FROM s WHERE o.id = s.id AND o.status = 'sent'
		RETURNING o.id)
	SELECT (SELECT count(*) FROM s), (SELECT max(s.id) FROM s),
	    (SELECT count(*) FROM u) INTO v_sel, v_last, v_n;
	IF v_sel < v_budget THEN
		v_last := v_to;		-- the window is exhausted
	END IF;
	UPDATE outbox_replays x SET next_id = v_last, done = x.done + v_n,
	    stepped_at = clock_timestamp(),
	    finished_at = CASE WHEN v_last >= r.last_id THEN clock_timestamp()
	    END
	WHERE x.id = r.id;
	IF v_n > 0 THEN
		PERFORM pg_notify('outbox_new', '');
	END IF;
	RETURN QUERY SELECT r.id, v_n, v_last >= r.last_id;
END;
$$;

-- Idempotency-Key on POST /orders (outboxd(8), HTTP API): one row per key,
-- written in the same transaction as the order it made, so a client that
-- never saw its 201 (a crash after the commit) and retries finds it.
--   key		the key as the client sent it (the sf-string unescaped)
--   fingerprint	SHA-256 of the order's fields as parsed: customerId's
--			UTF-8 bytes, a NUL byte, amountCents in decimal
--   order_id		the order the key made (no foreign key: an order
--			deleted later answers a retry 404, and the orders
--			table keeps its deletes free of a lookup here)
--   created_at	the key is honoured until created_at +
--			http.idempotency_ttl; then a new order may take it,
--			and relay 1's retention deletes the row
-- The primary key decides between two requests that carry one key at the
-- same moment: one makes the order, the other answers 409 or, once the
-- first has committed, its order.
CREATE TABLE IF NOT EXISTS outbox_idempotency_keys (
	key		text PRIMARY KEY,
	fingerprint	bytea NOT NULL,
	order_id	uuid NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT now()
);

-- Retention finds expired keys oldest first, in small batches.
CREATE INDEX IF NOT EXISTS outbox_idempotency_keys_created_idx
	ON outbox_idempotency_keys (created_at);

COMMIT;
