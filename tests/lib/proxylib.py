"""proxylib.py -- the HTTP plumbing shared by sigv4-proxy.py and
fault-proxy.py: a threaded HTTP/1.1 server (keep-alive, Expect:
100-continue, chunked request bodies) that hands each request to a hook
and forwards what the hook lets through to one upstream emulator,
relaying the answer.  Standard library only.
"""
import http.client
import http.server
import json
import os
import socketserver
import sys
import threading
import time
import urllib.parse

HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "te", "trailer", "trailers", "transfer-encoding", "upgrade", "expect",
    "content-length",
}


def log(name, msg):
    ts = time.strftime("%H:%M:%S", time.localtime()) + ("%.3f" % (time.time() % 1))[1:]
    sys.stderr.write("%s %s[%d]: %s\n" % (ts, name, os.getpid(), msg))
    sys.stderr.flush()


def write_atomic(path, text):
    tmp = "%s.tmp.%d" % (path, threading.get_ident())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class Request:
    """One received request: method, target (path+query), headers as a
    list of (name, value) in arrival order, body bytes."""

    def __init__(self, method, target, headers, body):
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body

    def header(self, name, default=None):
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return default

    @property
    def path(self):
        return urllib.parse.urlsplit(self.target).path

    @property
    def amz_target(self):
        return self.header("X-Amz-Target", "") or ""

    @property
    def action(self):
        t = self.amz_target
        return t.split(".", 1)[1] if "." in t else (t or "-")


class Response:
    def __init__(self, status, body=b"", headers=None, reason=None):
        self.status = status
        self.body = body if isinstance(body, bytes) else body.encode("utf-8")
        self.headers = list(headers or [])
        self.reason = reason


def json_response(status, obj, content_type="application/x-amz-json-1.0"):
    return Response(status, json.dumps(obj), [("Content-Type", content_type)])


def forward(upstream, req, body=None, timeout=60.0):
    """Send req (with body replaced when given) to upstream
    ("http://host:port") and return a Response.  Raises OSError and
    http.client exceptions on transport failure."""
    u = urllib.parse.urlsplit(upstream)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        data = req.body if body is None else body
        conn.putrequest(req.method, req.target, skip_host=True,
                        skip_accept_encoding=True)
        has_host = False
        for k, v in req.headers:
            if k.lower() in HOP_BY_HOP:
                continue
            if k.lower() == "host":
                has_host = True
            conn.putheader(k, v)
        if not has_host:
            conn.putheader("Host", u.netloc)
        conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        r = conn.getresponse()
        rbody = r.read()
        hdrs = [(k, v) for k, v in r.getheaders() if k.lower() not in HOP_BY_HOP]
        return Response(r.status, rbody, hdrs, r.reason)
    finally:
        conn.close()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body go out in two writes: with Nagle on, the
    # body waits for the ACK of the head, which a keep-alive client
    # delays (40 ms a response).
    disable_nagle_algorithm = True
    server_version = "outboxd-test-proxy"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet: the hook logs
        pass

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _handle(self):
        try:
            body = self._read_body()
        except (ValueError, OSError) as e:
            self._send(Response(400, "bad request body: %s" % e))
            self.close_connection = True
            return
        # header values arrive decoded as latin-1; give back the real
        # (UTF-8) text where the bytes are UTF-8
        hdrs = []
        for k, v in self.headers.items():
            try:
                v = v.encode("latin-1").decode("utf-8")
            except (UnicodeEncodeError, UnicodeDecodeError):
                pass
            hdrs.append((k, v))
        req = Request(self.command, self.path, hdrs, body)
        # the bytes as they came (http.client decodes them as latin-1)
        req.raw_headers = [(k, v.encode("latin-1")) for k, v in self.headers.items()]
        try:
            resp = self.server.hook(req)
        except Exception as e:  # a bug in the hook must not kill the proxy
            log(self.server.name, "internal error: %r" % (e,))
            resp = json_response(500, {"__type": "ProxyInternalError", "message": repr(e)})
        self._send(resp)

    def _send(self, resp):
        self.send_response(resp.status, resp.reason)
        for k, v in resp.headers:
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(resp.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(resp.body)
        self.wfile.flush()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, name, host, port, hook):
        self.name = name
        self.hook = hook
        super().__init__((host, port), _Handler)


def serve(name, host, port, port_file, hook, banner):
    """Bind (port 0 = any free port), write the port to port_file, log
    banner, serve until SIGTERM/SIGINT."""
    import signal
    srv = Server(name, host, port, hook)
    real_port = srv.server_address[1]
    if port_file:
        write_atomic(port_file, "%d\n" % real_port)
    log(name, "listening on http://%s:%d %s" % (host, real_port, banner))

    def stop(signum, frame):
        log(name, "signal %d, stopping" % signum)
        threading.Thread(target=srv.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever(poll_interval=0.2)
    srv.server_close()
