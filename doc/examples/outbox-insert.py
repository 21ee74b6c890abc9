#!/usr/bin/python3
# An event written with psycopg2 in the transaction of the change it
# announces (outbox(7)), to the destination "billing" of outbox.conf.
#   DATABASE_URL=postgresql://app@db.example.com/shop python3 outbox-insert.py
import os

import psycopg2
from psycopg2.extras import Json

conn = psycopg2.connect(os.environ["DATABASE_URL"])
with conn:  # one transaction: committed here, rolled back on an exception
    with conn.cursor() as cur:
        cur.execute("UPDATE invoices SET paid_at = now() WHERE id = %s",
                    ("inv-1002",))
        cur.execute(
            "INSERT INTO outbox (event_type, ordering_key, payload,"
            " destination, headers) VALUES (%s, %s, %s, %s, %s)"
            " RETURNING id",
            ("invoice.paid", "inv-1002",
             Json({"invoiceId": "inv-1002", "amountCents": 1250}),
             "billing",
             Json({"traceparent":
                   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                   "tenant": "acme"})))
        print("outbox row", cur.fetchone()[0])
conn.close()
