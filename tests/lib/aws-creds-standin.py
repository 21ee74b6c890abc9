#!/usr/bin/python3
"""aws-creds-standin.py -- a loopback stand-in for the AWS endpoints that
hand out temporary credentials, which no emulator provides.  Written from
AWS's published reference, and strict: it refuses what the real services
refuse.

    /usr/bin/python3 tests/lib/aws-creds-standin.py --valid FILE \
        [--issued FILE] [--lifetime 60] [--rotate 20] \
        [--auth-token TOKEN | --auth-token-file FILE] [--port 0] \
        [--port-file FILE] [--stats FILE]

EC2 instance metadata, IMDSv2 (EC2 User Guide, "Use the Instance Metadata
Service to access instance metadata", "Retrieve security credentials from
instance metadata"):
  PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds (1 to
    21600; missing or out of range: 400; X-Forwarded-For present: 403,
    as IMDS refuses proxied token requests) -> a session token;
  GET /latest/meta-data/... without a valid, unexpired
    X-aws-ec2-metadata-token: 401 (IMDSv1 is off, as with
    HttpTokens=required);
  GET /latest/meta-data/iam/security-credentials/ -> the role name;
  GET /latest/meta-data/iam/security-credentials/ROLE -> {"Code":
    "Success", "LastUpdated", "Type": "AWS-HMAC", "AccessKeyId",
    "SecretAccessKey", "Token", "Expiration"}; another role: 404;
  GET /latest/meta-data/placement/region -> the region.
Container credentials (ECS task role: GET the relative URI at
169.254.170.2; EKS Pod Identity and full URIs: GET the URL with the
Authorization header): GET /v2/credentials/ID (no Authorization needed,
as ECS) or GET /v1/credentials (Authorization must equal the token, read
from --auth-token-file at every request; missing: 401, wrong: 403) ->
{"AccessKeyId", "SecretAccessKey", "Token", "Expiration", "RoleArn"}.
credential_process helper: GET /__standin/process -> the Version 1 JSON
of the AWS SDKs and Tools Reference Guide (fetch it with curl from the
process command).

Credentials: a new set every --rotate seconds, each valid --lifetime
seconds; the newest is handed out.  --valid FILE lists the sets still
valid (the verifier, sigv4-verify-current.py, accepts only these) and
the ones expired, rewritten atomically at every change.  --issued FILE
(one secret a line: secret keys, session tokens) is appended to for the
secret scan.  The sets survive a restart with the same --valid file.
Control: POST /__standin/fail?status=N makes every credential answer N
(0 = normal again).
"""
import argparse
import datetime
import json
import os
import secrets
import string
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402

NAME = "aws-creds-standin"
ROLE = "outboxd-test-role"
REGION = "us-east-1"


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def text(status, body):
    return proxylib.Response(status, body.encode(), [("Content-Type", "text/plain")])


class Standin:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.tokens = {}  # IMDS session token -> expiry
        self.fail = 0
        self.sets, self.expired = [], []
        self.stats = {"issued": 0, "imds_tokens": 0, "refused": 0, "served": 0, "refusals": []}
        try:
            with open(a.valid) as f:
                old = json.load(f)
            self.sets, self.expired = old.get("valid", []), old.get("expired", [])
        except (OSError, ValueError):
            pass
        self.tick()
        threading.Thread(target=self.rotator, daemon=True).start()

    def mint(self):
        alnum = string.ascii_uppercase + string.digits
        s = {"AccessKeyId": "ASIA" + "".join(secrets.choice(alnum) for _ in range(16)),
             "SecretAccessKey": secrets.token_urlsafe(30),
             "Token": "IQoJstandin" + secrets.token_urlsafe(150),
             "Expiration": time.time() + self.a.lifetime, "Minted": time.time()}
        if self.a.issued:
            with open(self.a.issued, "a") as f:
                f.write("%s\n%s\n" % (s["SecretAccessKey"], s["Token"]))
        self.sets.append(s)
        proxylib.log(NAME, "minted %s, valid until %s" % (s["AccessKeyId"], iso(s["Expiration"])))

    def tick(self):
        with self.lock:
            now = time.time()
            keep = [s for s in self.sets if s["Expiration"] > now]
            self.expired = (self.expired + [s["AccessKeyId"] for s in self.sets if s["Expiration"] <= now])[-200:]
            self.sets = keep
            if not self.sets or now - self.sets[-1]["Minted"] >= self.a.rotate:
                self.mint()
            proxylib.write_atomic(self.a.valid, json.dumps({"valid": self.sets, "expired": self.expired}) + "\n")

    def rotator(self):
        while True:
            time.sleep(0.5)
            self.tick()

    def count(self, key, why=None):
        with self.lock:
            self.stats[key] += 1
            if why:
                self.stats["refusals"] = (self.stats["refusals"] + [why])[-20:]
                proxylib.log(NAME, "REFUSE " + why)
            if self.a.stats:
                proxylib.write_atomic(self.a.stats, json.dumps(self.stats) + "\n")

    def refuse(self, status, why):
        self.count("refused", why)
        return text(status, why)

    def current(self):
        with self.lock:
            s = dict(self.sets[-1])
        self.count("issued")
        return s

    def hook(self, req):
        u = urllib.parse.urlsplit(req.target)
        path, q = u.path, urllib.parse.parse_qs(u.query)
        if path == "/__standin/fail" and req.method == "POST":
            self.fail = int(q.get("status", ["0"])[0])
            proxylib.log(NAME, "credential answers now %s" % (self.fail or "normal"))
            return text(200, "ok\n")
        if path == "/__standin/stats":
            return proxylib.json_response(200, self.stats, "application/json")
        if path.startswith("/latest/"):
            return self.imds(req, path)
        if self.fail:
            return self.refuse(self.fail, "failing on purpose (%d)" % self.fail)
        if path == "/__standin/process" and req.method == "GET":
            s = self.current()
            return proxylib.json_response(200, {"Version": 1, "AccessKeyId": s["AccessKeyId"],
                                                "SecretAccessKey": s["SecretAccessKey"],
                                                "SessionToken": s["Token"],
                                                "Expiration": iso(s["Expiration"])}, "application/json")
        if path.startswith("/v2/credentials/") or path == "/v1/credentials":
            if req.method != "GET":
                return self.refuse(405, "container credentials: %s, only GET" % req.method)
            if path == "/v1/credentials":
                want = self.a.auth_token
                if self.a.auth_token_file:
                    with open(self.a.auth_token_file) as f:
                        want = f.read().strip()
                got = req.header("Authorization")
                if got is None:
                    return self.refuse(401, "container credentials: no Authorization header")
                if not want or got != want:
                    return self.refuse(403, "container credentials: wrong Authorization token")
            s = self.current()
            self.count("served")
            return proxylib.json_response(200, {"AccessKeyId": s["AccessKeyId"],
                                                "SecretAccessKey": s["SecretAccessKey"],
                                                "Token": s["Token"], "Expiration": iso(s["Expiration"]),
                                                "RoleArn": "arn:aws:iam::000000000000:role/" + ROLE},
                                          "application/json")
        return self.refuse(404, "no such path %s" % path)

    def imds(self, req, path):
        now = time.time()
        if path == "/latest/api/token":
            if req.method != "PUT":
                return self.refuse(405, "IMDS: %s /latest/api/token, only PUT" % req.method)
            if req.header("X-Forwarded-For") is not None:
                return self.refuse(403, "IMDS: token request through a proxy (X-Forwarded-For)")
            ttl = req.header("X-aws-ec2-metadata-token-ttl-seconds")
            if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self.refuse(400, "IMDS: X-aws-ec2-metadata-token-ttl-seconds missing or not 1..21600: %r" % ttl)
            tok = "AQAE" + secrets.token_urlsafe(40)
            with self.lock:
                self.tokens[tok] = now + int(ttl)
            self.count("imds_tokens")
            return proxylib.Response(200, tok.encode(), [("Content-Type", "text/plain"),
                                                         ("X-aws-ec2-metadata-token-ttl-seconds", ttl)])
        if req.method != "GET":
            return self.refuse(405, "IMDS: %s %s" % (req.method, path))
        tok = req.header("X-aws-ec2-metadata-token")
        with self.lock:
            exp = self.tokens.get(tok or "")
        if exp is None or exp <= now:
            return self.refuse(401, "IMDS: %s without a valid session token (IMDSv1 is off)" % path)
        if self.fail:
            return self.refuse(self.fail, "failing on purpose (%d)" % self.fail)
        if path == "/latest/meta-data/placement/region":
            return text(200, REGION)
        base = "/latest/meta-data/iam/security-credentials/"
        if path == base:
            return text(200, ROLE)
        if path == base + ROLE:
            s = self.current()
            self.count("served")
            return proxylib.json_response(200, {"Code": "Success", "LastUpdated": iso(s["Minted"]),
                                                "Type": "AWS-HMAC", "AccessKeyId": s["AccessKeyId"],
                                                "SecretAccessKey": s["SecretAccessKey"], "Token": s["Token"],
                                                "Expiration": iso(s["Expiration"])}, "text/plain")
        return self.refuse(404, "IMDS: no such path %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--valid", required=True)
    ap.add_argument("--issued", default=None)
    ap.add_argument("--lifetime", type=float, default=60.0)
    ap.add_argument("--rotate", type=float, default=20.0)
    ap.add_argument("--auth-token", default=None)
    ap.add_argument("--auth-token-file", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--stats", default=None)
    a = ap.parse_args()
    s = Standin(a)
    proxylib.serve(NAME, a.host, a.port, a.port_file, s.hook,
                   "(IMDSv2 + container credentials; lifetime %g s, rotation %g s)" % (a.lifetime, a.rotate))


if __name__ == "__main__":
    main()
