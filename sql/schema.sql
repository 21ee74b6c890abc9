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
	sent_at		timestamptz,
	last_error	text
);

-- The relay's claim scans pending rows in id order; a partial index keeps
-- that scan small however many sent rows the table holds.
CREATE INDEX IF NOT EXISTS outbox_pending_idx
	ON outbox (id) WHERE status = 'pending';

-- A queue table: updated and deleted constantly, so vacuum it often.
ALTER TABLE outbox SET (
	fillfactor = 90,
	autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_analyze_scale_factor = 0.05,
	autovacuum_vacuum_cost_delay = 0
);

-- Wake the relays: one payload-free NOTIFY per inserting statement (not
-- per row).  It is only a hint; relays also poll, and scan after every
-- (re)connect because notifications are lost while nobody listens.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('outbox_new', '');
	RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
	FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

COMMIT;
