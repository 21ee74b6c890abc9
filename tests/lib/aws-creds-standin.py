#!/usr/bin/python3
"""aws-creds-standin.py -- a loopback stand-in for the AWS endpoints that
hand out temporary credentials, which no emulator provides.  Written from
AWS's published reference, and strict: it refuses what the real services
refuse.

    /usr/bin/python3 tests/lib/aws-creds-standin.py --valid FILE \
        [--issued FILE] [--lifetime 60] [--rotate 20] \
        [--auth-token TOKEN | --auth-token-file FILE] [--port 0] \
        [--port-file FILE] [--stats FILE] [--region us-east-1] \
        [--role-arn ARN ... [--web-identity-token-file FILE] \
        [--source-key AKID:SECRET] [--external-id ID]]

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
  GET /latest/meta-data/placement/region -> --region (counted,
    imds_region).
Container credentials (ECS task role: GET the relative URI at
169.254.170.2; EKS Pod Identity and full URIs: GET the URL with the
Authorization header): GET /v2/credentials/ID (no Authorization needed,
as ECS) or GET /v1/credentials (Authorization must equal the token, read
from --auth-token-file at every request; missing: 401, wrong: 403) ->
{"AccessKeyId", "SecretAccessKey", "Token", "Expiration", "RoleArn"}.
AWS STS (AWS STS API reference: AssumeRole, AssumeRoleWithWebIdentity,
Common Errors; query protocol, API version 2011-06-15), with --role-arn:
  POST / (application/x-www-form-urlencoded) with Action (else 400
    InvalidAction), Version 2011-06-15 (missing: 400 MissingParameter;
    another: 400 InvalidAction), RoleArn (20..2048 characters, else 400
    ValidationError; not --role-arn: 403 AccessDenied), RoleSessionName
    (2..64 of [\w+=,.@-], else 400 ValidationError), DurationSeconds
    (900..43200 if present, else 400 ValidationError; counted by value,
    sts_durations; the credentials still live --lifetime);  --role-arn
    may be given more than once: each is a role that exists (calls
    counted by role, sts_roles);
  AssumeRoleWithWebIdentity: WebIdentityToken (4..20000 characters, else
    400 ValidationError; not the content of --web-identity-token-file,
    read at each request: 400 InvalidIdentityToken); no signature needed
    (a signed one is counted, sts_signed);
  AssumeRole: SigV4 (service sts, region --region) by --source-key
    AKID:SECRET or by a set this stand-in handed out and still valid,
    with its session token (a role chain, credential_source: counted,
    sts_chained), checked by sigv4-proxy.py's botocore verifier (none:
    403 MissingAuthenticationToken; another key or a bad signature: 403
    InvalidClientTokenId / SignatureDoesNotMatch); ExternalId (2..1224 of
    [\w+=,.@:/-] if present, else 400 ValidationError; not
    --external-id when that is set: 403 AccessDenied);
  -> ACTIONResponse/ACTIONResult/Credentials/{AccessKeyId,
    SecretAccessKey, SessionToken, Expiration} and AssumedRoleUser;
    errors as ErrorResponse/Error/{Type, Code, Message}.
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
import re
import types
import urllib.parse
from xml.sax.saxutils import escape

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402
import querylib  # noqa: E402

NAME = "aws-creds-standin"
ROLE = "outboxd-test-role"
REGION = "us-east-1"
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
SESSION_RE = re.compile(r"[\w+=,.@-]{2,64}\Z")
EXTID_RE = re.compile(r"[\w+=,.@:/-]{2,1224}\Z")
_sigv4 = None


_sigv4_lock = threading.Lock()


def sigv4_module():
    # Loaded once, under a lock: requests run on threads, and a module
    # published before it has run is half a module.
    global _sigv4
    with _sigv4_lock:
        if _sigv4 is None:
            import importlib.util
            spec = importlib.util.spec_from_file_location(
                "sigv4_proxy", os.path.join(os.path.dirname(os.path.abspath(__file__)), "sigv4-proxy.py"))
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)
            _sigv4 = m
    return _sigv4


def sts_error(status, code, message, sender=True):
    body = ('<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message>'
            '</Error><RequestId>%s</RequestId></ErrorResponse>' % (
                STS_NS, "Sender" if sender else "Receiver", escape(code), escape(message),
                secrets.token_hex(16)))
    return proxylib.Response(status, body.encode(), [("Content-Type", "text/xml")])


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
        self.stats = {"issued": 0, "imds_tokens": 0, "refused": 0, "served": 0, "refusals": [],
                      "sts_calls": 0, "sts_signed": 0, "sts_errors": {}, "sts_chained": 0,
                      "sts_roles": {}, "sts_durations": {}, "imds_region": 0}
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
        if path == "/" and self.a.role_arn:
            return self.sts(req)
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

    def sts_refuse(self, status, code, message):
        with self.lock:
            self.stats["sts_errors"][code] = self.stats["sts_errors"].get(code, 0) + 1
        self.count("refused", "STS %s: %s" % (code, message))
        return sts_error(status, code, message)

    def sts(self, req):
        if req.method != "POST" or not querylib.is_query(req):
            return self.sts_refuse(400, "InvalidAction", "STS: only a POST form is served here")
        f = dict(querylib.form(req))
        self.count("sts_calls")
        action, version = f.get("Action"), f.get("Version")
        if action not in ("AssumeRole", "AssumeRoleWithWebIdentity"):
            return self.sts_refuse(400, "InvalidAction", "Could not find operation %s for version %s"
                                   % (action, version))
        if version is None:
            return self.sts_refuse(400, "MissingParameter", "The request must contain the parameter Version")
        if version != "2011-06-15":
            return self.sts_refuse(400, "InvalidAction", "Could not find operation %s for version %s"
                                   % (action, version))
        for k in ["RoleArn", "RoleSessionName"] + (["WebIdentityToken"] if action != "AssumeRole" else []):
            if k not in f:
                return self.sts_refuse(400, "MissingParameter",
                                       "The request must contain the parameter %s" % k)
        arn, name = f["RoleArn"], f["RoleSessionName"]
        if not 20 <= len(arn) <= 2048:
            return self.sts_refuse(400, "ValidationError", "1 validation error detected: Value at 'roleArn' "
                                   "failed to satisfy constraint: Member must have length between 20 and 2048")
        if not SESSION_RE.match(name):
            return self.sts_refuse(400, "ValidationError", "1 validation error detected: Value '%s' at "
                                   "'roleSessionName' failed to satisfy constraint: Member must satisfy "
                                   "regular expression pattern: [\\w+=,.@-]* and length 2..64" % name[:80])
        if "DurationSeconds" in f and not (f["DurationSeconds"].isdigit() and
                                           900 <= int(f["DurationSeconds"]) <= 43200):
            return self.sts_refuse(400, "ValidationError", "1 validation error detected: Value at "
                                   "'durationSeconds' failed to satisfy constraint: 900..43200")
        if req.header("Authorization") is not None:
            self.count("sts_signed")
        with self.lock:
            self.stats["sts_roles"][arn] = self.stats["sts_roles"].get(arn, 0) + 1
            if "DurationSeconds" in f:
                d = self.stats["sts_durations"]
                d[f["DurationSeconds"]] = d.get(f["DurationSeconds"], 0) + 1
        if action == "AssumeRoleWithWebIdentity":
            tok = f["WebIdentityToken"]
            if not 4 <= len(tok) <= 20000:
                return self.sts_refuse(400, "ValidationError", "1 validation error detected: Value at "
                                       "'webIdentityToken' failed to satisfy constraint: length 4..20000")
            with open(self.a.web_identity_token_file) as fh:
                want = fh.read().strip()
            if tok != want:
                return self.sts_refuse(400, "InvalidIdentityToken",
                                       "The web identity token that was passed could not be validated by AWS")
        else:
            if req.header("Authorization") is None:
                return self.sts_refuse(403, "MissingAuthenticationToken", "Request is missing Authentication Token")
            akid, secret = self.a.source_key.split(":", 1)
            token = None
            v = sigv4_module()
            m = v.AUTH_RE.match(req.header("Authorization").strip())
            with self.lock:
                issued = [x for x in self.sets if m and x["AccessKeyId"] == m.group(1)
                          and x["Expiration"] > time.time()]
            if issued:
                akid, secret, token = issued[0]["AccessKeyId"], issued[0]["SecretAccessKey"], issued[0]["Token"]
            a = types.SimpleNamespace(access_key=akid, secret=secret, token=token, region=self.a.region,
                                      service="sts", max_skew=300)
            try:
                v.Verifier.verify(types.SimpleNamespace(a=a), req)
            except v.Reject as r:
                code = "InvalidClientTokenId" if r.kind == "UnrecognizedClientException" else \
                    "MissingAuthenticationToken" if r.kind.startswith("Missing") else "SignatureDoesNotMatch"
                return self.sts_refuse(403, code, "The request signature we calculated does not match "
                                       "the signature you provided" if code == "SignatureDoesNotMatch" else
                                       "The security token included in the request is invalid")
            if issued:
                self.count("sts_chained")
            ext = f.get("ExternalId")
            if ext is not None and not EXTID_RE.match(ext):
                return self.sts_refuse(400, "ValidationError", "1 validation error detected: Value at "
                                       "'externalId' failed to satisfy constraint")
            if self.a.external_id and ext != self.a.external_id:
                return self.sts_refuse(403, "AccessDenied", "User: arn:aws:iam::000000000000:user/source is "
                                       "not authorized to perform: sts:AssumeRole on resource: %s" % arn)
        if arn not in self.a.role_arn:
            return self.sts_refuse(403, "AccessDenied", "Not authorized to perform sts:%s on %s" % (action, arn))
        if self.fail:
            return self.sts_refuse(self.fail, "InternalFailure", "failing on purpose (%d)" % self.fail)
        s = self.current()
        self.count("served")
        role = arn.rsplit("/", 1)[-1]
        body = ('<%sResponse xmlns="%s"><%sResult><AssumedRoleUser><Arn>arn:aws:sts::000000000000:'
                'assumed-role/%s/%s</Arn><AssumedRoleId>AROA000000000000EXAMPLE:%s</AssumedRoleId>'
                '</AssumedRoleUser><Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s'
                '</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration>'
                '</Credentials></%sResult><ResponseMetadata><RequestId>%s</RequestId>'
                '</ResponseMetadata></%sResponse>' % (
                    action, STS_NS, action, escape(role), escape(name), escape(name), s["AccessKeyId"],
                    escape(s["SecretAccessKey"]), escape(s["Token"]), iso(s["Expiration"]), action,
                    secrets.token_hex(16), action))
        return proxylib.Response(200, body.encode(), [("Content-Type", "text/xml")])

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
            self.count("imds_region")
            return text(200, self.a.region)
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
    ap.add_argument("--role-arn", action="append", default=None)
    ap.add_argument("--region", default=REGION)
    ap.add_argument("--web-identity-token-file", default=None)
    ap.add_argument("--source-key", default="AKIDSTSSOURCE000001:sts-source-secret")
    ap.add_argument("--external-id", default=None)
    a = ap.parse_args()
    s = Standin(a)
    proxylib.serve(NAME, a.host, a.port, a.port_file, s.hook,
                   "(IMDSv2, container credentials, STS; lifetime %g s, rotation %g s)" % (a.lifetime, a.rotate))


if __name__ == "__main__":
    main()
