#!/usr/bin/python3
"""webhook-receiver.py -- a webhook endpoint for tests: records every
request and checks its Standard Webhooks signature with its own code
(hmac/hashlib/base64, nothing shared with outboxd), and answers a scripted
sequence of statuses.

    /usr/bin/python3 tests/lib/webhook-receiver.py --secret-file FILE \
        --record FILE.jsonl [--port 0] [--port-file FILE] [--stats FILE]

--secret-file holds the webhook secret (as in webhook.secret): after a
"whsec_" prefix the key is base64, otherwise the text's UTF-8 bytes.

Every request but /__control is appended to --record as one JSON line:
    {"n", "t" (unix time, float, at arrival), "method", "path",
     "headers" {lower-case name: value}, "header_list" [[name as sent,
     base64 of the value's bytes as sent], ...] in arrival order, "body"
     (text, UTF-8, errors replaced), "body_b64", "body_sha256", "sig_ok" (bool), "sig_error"
     (why not, or null), "ts_skew" (s between webhook-timestamp and
     arrival, or null), "status" (what was answered)}

Control (never recorded):
    POST /__control {"script": [ANSWER...], "default": ANSWER}
        replaces the script: the next requests get the ANSWERs in turn,
        then every later request gets "default" (the default default is
        {"status": 200}).  ANSWER = {"status": 500, "headers": {"Retry-After":
        "1"}, "body": "text", "delay_ms": 0}; a bare number is a status.
    GET  /__control    the script left, the default and the stats.
Stats (--stats, and GET /__control): requests, by_status, sig_bad.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402

NAME = "webhook-receiver"
TOLERANCE = 300  # s, as the Standard Webhooks reference libraries


def secret_key(text):
    if text.startswith("whsec_"):
        return base64.b64decode(text[len("whsec_"):], validate=True)
    return text.encode("utf-8")


def verify(key, req, now):
    """(ok, why, skew): the Standard Webhooks check of one request."""
    msg_id = req.header("webhook-id")
    ts = req.header("webhook-timestamp")
    sigs = req.header("webhook-signature")
    if not msg_id or not ts or not sigs:
        return False, "missing webhook-id, webhook-timestamp or webhook-signature", None
    try:
        skew = now - int(ts)
    except ValueError:
        return False, "webhook-timestamp %r is not an integer" % ts, None
    signed = msg_id.encode() + b"." + ts.encode() + b"." + req.body
    want = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    # a space-separated list of "version,signature"
    for s in sigs.split(" "):
        version, _, value = s.partition(",")
        if version == "v1" and hmac.compare_digest(value, want):
            if abs(skew) > TOLERANCE:
                return False, "timestamp %s s away from now" % round(skew), skew
            return True, None, skew
    return False, "no v1 signature matches", skew


def answer_of(a):
    if isinstance(a, int):
        return {"status": a}
    return dict(a)


class Receiver:
    def __init__(self, args):
        self.a = args
        with open(args.secret_file, encoding="utf-8") as f:
            self.key = secret_key(f.read().strip())
        self.lock = threading.Lock()
        self.script = []
        self.default = {"status": 200}
        self.stats = {"requests": 0, "by_status": {}, "sig_bad": 0}
        self.n = 0

    def state(self):
        return {"script": self.script, "default": self.default, "stats": self.stats}

    def write_stats(self):
        if self.a.stats:
            proxylib.write_atomic(self.a.stats, json.dumps(self.state(), indent=1) + "\n")

    def control(self, req):
        if req.method == "POST":
            try:
                c = json.loads(req.body or b"{}")
                script = [answer_of(x) for x in c.get("script", [])]
                default = answer_of(c.get("default", {"status": 200}))
            except (ValueError, TypeError, AttributeError) as e:
                return proxylib.Response(400, "bad control body: %s\n" % e)
            with self.lock:
                self.script = script
                self.default = default
                self.write_stats()
            proxylib.log(NAME, "script %s then %s" % (script, default))
        with self.lock:
            return proxylib.json_response(200, self.state(), "application/json")

    def hook(self, req):
        if req.path == "/__control":
            return self.control(req)
        now = time.time()
        ok, why, skew = verify(self.key, req, now)
        with self.lock:
            ans = self.script.pop(0) if self.script else dict(self.default)
            self.n += 1
            n = self.n
            status = int(ans.get("status", 200))
            rec = {
                "n": n, "t": now, "method": req.method, "path": req.target,
                "headers": {k.lower(): v for k, v in req.headers},
                "header_list": [[k, base64.b64encode(v).decode()]
                                for k, v in req.raw_headers],
                "body": req.body.decode("utf-8", "replace"),
                "body_b64": base64.b64encode(req.body).decode(),
                "body_sha256": hashlib.sha256(req.body).hexdigest(),
                "sig_ok": ok, "sig_error": why, "ts_skew": skew,
                "status": status,
            }
            with open(self.a.record, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            self.stats["requests"] += 1
            k = str(status)
            self.stats["by_status"][k] = self.stats["by_status"].get(k, 0) + 1
            if not ok:
                self.stats["sig_bad"] += 1
            self.write_stats()
        proxylib.log(NAME, "#%d %s %s id=%s -> %d%s" % (
            n, req.method, req.target, req.header("webhook-id"), status,
            "" if ok else " (signature: %s)" % why))
        if ans.get("delay_ms"):
            time.sleep(ans["delay_ms"] / 1000.0)
        hdrs = list((ans.get("headers") or {}).items())
        hdrs.append(("Content-Type", "text/plain; charset=utf-8"))
        return proxylib.Response(status, ans.get("body", ""), hdrs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--secret-file", required=True)
    ap.add_argument("--record", required=True, help="JSON-lines file of requests")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port (see --port-file)")
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--stats", default=None)
    a = ap.parse_args()
    r = Receiver(a)
    open(a.record, "a").close()
    r.write_stats()
    proxylib.serve(NAME, a.host, a.port, a.port_file, r.hook, "(webhook receiver)")


if __name__ == "__main__":
    main()
