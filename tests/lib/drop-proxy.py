#!/usr/bin/env python3
"""drop-proxy.py -- the client's side of a commit-then-crash
(tests/integration/idempotency.sh): an HTTP/1.1 proxy in front of outboxd
that forwards every request and relays every answer, except the answer to
the first --drop POSTs that carry an Idempotency-Key.  Those go to outboxd
in full, outboxd answers (so its transaction has committed), and then the
proxy closes the client's connection without a byte of the answer: the
client cannot tell a crash after the commit from one before it.

  drop-proxy.py --upstream http://127.0.0.1:PORT [--drop N]
                --port 0 --port-file FILE --stats FILE

Stats (JSON, rewritten after each request): forwarded, dropped, and
dropped_status, the status codes outboxd gave the dropped answers.
Standard library and proxylib.py only.
"""
import argparse
import http.server
import json
import socket
import socketserver
import threading

import proxylib


class Dropped(BaseException):
    """The hook's way to say: answer nothing, close the connection (a
    BaseException: proxylib answers 500 to any Exception of a hook)."""


class Handler(proxylib._Handler):
    def _handle(self):
        try:
            super()._handle()
        except Dropped:
            # Not a byte of the answer: the client sees the connection
            # end (curl: "Empty reply from server").
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, hook):
        self.name = "drop-proxy"
        self.hook = hook
        super().__init__(addr, Handler)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--drop", type=int, default=1)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--stats")
    a = ap.parse_args()
    lock = threading.Lock()
    st = {"forwarded": 0, "dropped": 0, "dropped_status": []}

    def save():
        if a.stats:
            proxylib.write_atomic(a.stats, json.dumps(st))

    def hook(req):
        resp = proxylib.forward(a.upstream, req, timeout=30.0)
        with lock:
            st["forwarded"] += 1
            drop = (req.method == "POST" and
                    req.header("Idempotency-Key") is not None and
                    st["dropped"] < a.drop)
            if drop:
                st["dropped"] += 1
                st["dropped_status"].append(resp.status)
            save()
        proxylib.log("drop-proxy", "%s %s -> %d%s" % (
            req.method, req.target, resp.status,
            " (answer dropped)" if drop else ""))
        if drop:
            raise Dropped()
        return resp

    save()
    srv = Server(("127.0.0.1", a.port), hook)
    if a.port_file:
        proxylib.write_atomic(a.port_file, "%d\n" % srv.server_address[1])
    proxylib.log("drop-proxy", "listening on 127.0.0.1:%d, upstream %s, "
                 "dropping %d keyed answer(s)" % (srv.server_address[1],
                                                   a.upstream, a.drop))
    import signal

    def stop(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()


if __name__ == "__main__":
    main()
