#!/usr/bin/python3
"""load-gen.py -- a steady stream of POST /orders for the scenarios.

    /usr/bin/python3 tests/lib/load-gen.py --url http://127.0.0.1:PORT \
        --out PREFIX [--threads 4] [--rate 60] [--keepalive] [--tag NAME] \
        [--timeout 10] [--duration SECONDS] [--idempotency-key]

Each thread sends POST /orders with a body no other request has
({"customerId": "TAG-THREAD-SEQ", "amountCents": SEQ}), so an order in the
database can be traced back to the request that made it.  --rate is the
total number of requests started per second (0 = as fast as answers come).
Without --keepalive every request is a new TCP connection with
"Connection: close", so a refused connection shows as such.  With
--keepalive each thread keeps one connection open and reuses it.  With
--idempotency-key every request carries an Idempotency-Key no other request
has ("RUN-CUSTOMER", RUN random per run), so each one takes the keyed path
and makes an order.

It runs until SIGTERM/SIGINT (or --duration) and then lets the requests
in progress end.  Output:
  PREFIX.ids    one line "ORDER_ID CUSTOMER_ID" per 201, written as it comes
  PREFIX.fail   one JSON line per failed request: t (epoch ms, when the
                request started), kind, detail, customer (its customerId),
                fresh (whether it went over a new connection)
  PREFIX.stats  JSON written at the end: sent, created (201s), failed,
                refused, reset, timeout, http (status -> count for non-201
                answers), stale (keep-alive requests sent on a connection
                the server had closed while idle, retried once on a new
                connection), first_ms/last_ms (first and last request start)
A failure is counted once, by kind: refused (connect refused), timeout,
reset (the connection broke before a whole answer), http (another status),
error (anything else).
"""
import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time

stop = threading.Event()
lock = threading.Lock()
stats = {"sent": 0, "created": 0, "failed": 0, "refused": 0, "reset": 0,
         "timeout": 0, "error": 0, "http": {}, "stale": 0,
         "first_ms": None, "last_ms": None}


def now_ms():
    return int(time.time() * 1000)


class Gen:
    def __init__(self, args):
        self.args = args
        u = args.url
        if u.startswith("http://"):
            u = u[len("http://"):]
        u = u.rstrip("/")
        host, _, port = u.rpartition(":")
        self.host, self.port = host, int(port)
        self.ids = open(args.out + ".ids", "a", buffering=1)
        self.fail = open(args.out + ".fail", "a", buffering=1)
        self.next_start = time.monotonic()
        self.run_id = os.urandom(6).hex()

    def pace(self):
        """Wait for this request's turn so that all threads together
        start --rate requests per second."""
        if self.args.rate <= 0:
            return
        with lock:
            t = self.next_start = max(self.next_start + 1.0 / self.args.rate,
                                      time.monotonic() - 1.0)
        d = t - time.monotonic()
        if d > 0:
            stop.wait(d)

    def record_fail(self, t0, kind, detail, customer, fresh):
        with lock:
            stats["failed"] += 1
            if kind.startswith("http_"):
                code = kind[5:]
                stats["http"][code] = stats["http"].get(code, 0) + 1
            else:
                stats[kind] += 1
            self.fail.write(json.dumps({"t": t0, "kind": kind,
                                        "detail": detail[:300],
                                        "customer": customer,
                                        "fresh": fresh}) + "\n")

    def connect(self):
        c = http.client.HTTPConnection(self.host, self.port,
                                       timeout=self.args.timeout)
        c.connect()
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    def one(self, conn, body, headers):
        conn.request("POST", "/orders", body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        return r, data

    def run(self, tid):
        keep = self.args.keepalive
        conn = None
        used = False		# conn has carried a whole exchange
        seq = 0
        while not stop.is_set():
            self.pace()
            if stop.is_set():
                break
            seq += 1
            customer = "%s-%d-%d" % (self.args.tag, tid, seq)
            body = json.dumps({"customerId": customer, "amountCents": seq})
            headers = {"Content-Type": "application/json"}
            if self.args.idempotency_key:
                headers["Idempotency-Key"] = '"%s-%s"' % (self.run_id, customer)
            if not keep:
                headers["Connection"] = "close"
            t0 = now_ms()
            with lock:
                stats["sent"] += 1
                if stats["first_ms"] is None:
                    stats["first_ms"] = t0
                stats["last_ms"] = t0
            fresh = conn is None
            try:
                if conn is None:
                    conn = self.connect()
                    used = False
                try:
                    r, data = self.one(conn, body, headers)
                except (http.client.RemoteDisconnected, BrokenPipeError,
                        ConnectionResetError) as e:
                    if not (keep and used):
                        raise
                    # A keep-alive connection the server closed while it
                    # was idle: nothing was answered; once more, anew.
                    with lock:
                        stats["stale"] += 1
                    conn.close()
                    conn = self.connect()
                    fresh = True
                    used = False
                    r, data = self.one(conn, body, headers)
            except ConnectionRefusedError as e:
                self.record_fail(t0, "refused", str(e), customer, fresh)
                conn = self.drop(conn)
                stop.wait(0.05)
                continue
            except socket.timeout as e:
                self.record_fail(t0, "timeout", str(e), customer, fresh)
                conn = self.drop(conn)
                continue
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError, http.client.IncompleteRead,
                    http.client.BadStatusLine) as e:
                self.record_fail(t0, "reset", "%s: %s" %
                                 (type(e).__name__, e), customer, fresh)
                conn = self.drop(conn)
                continue
            except OSError as e:
                self.record_fail(t0, "error", "%s: %s" %
                                 (type(e).__name__, e), customer, fresh)
                conn = self.drop(conn)
                stop.wait(0.05)
                continue
            used = True
            if r.status == 201:
                oid = None
                try:
                    oid = json.loads(data)["id"]
                except (ValueError, KeyError, TypeError):
                    pass
                if oid is None:
                    self.record_fail(t0, "error", "201 without an id: %r" %
                                     data[:200], customer, fresh)
                else:
                    with lock:
                        stats["created"] += 1
                    self.ids.write("%s %s\n" % (oid, customer))
            else:
                self.record_fail(t0, "http_%d" % r.status,
                                 data.decode("utf-8", "replace"), customer,
                                 fresh)
            if not keep or r.will_close:
                conn = self.drop(conn)
        self.drop(conn)

    @staticmethod
    def drop(conn):
        if conn is not None:
            conn.close()
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rate", type=float, default=60)
    ap.add_argument("--keepalive", action="store_true")
    ap.add_argument("--tag", default="load")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--duration", type=float, default=0)
    ap.add_argument("--idempotency-key", action="store_true")
    args = ap.parse_args()

    g = Gen(args)
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    threads = [threading.Thread(target=g.run, args=(i,), daemon=True)
               for i in range(1, args.threads + 1)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    while not stop.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            stop.set()
        stop.wait(0.1)
    for t in threads:
        t.join(args.timeout + 5)
    with lock:
        with open(args.out + ".stats.tmp", "w") as f:
            json.dump(stats, f)
    os.rename(args.out + ".stats.tmp", args.out + ".stats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
