-- An event written in the transaction of the change it announces
-- (outbox(7)): both commit, or neither does.
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f outbox-insert.sql
BEGIN;
UPDATE invoices SET paid_at = now() WHERE id = 'inv-1001';
INSERT INTO outbox (event_type, ordering_key, payload, headers)
VALUES ('invoice.paid', 'inv-1001',
    '{"invoiceId": "inv-1001", "amountCents": 4999}',
    '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "tenant": "acme"}');
COMMIT;
