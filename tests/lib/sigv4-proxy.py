#!/usr/bin/python3
"""sigv4-proxy.py -- an HTTP proxy that checks the AWS Signature Version 4
of every request before it reaches a local emulator (which checks none).

    /usr/bin/python3 tests/lib/sigv4-proxy.py --upstream http://127.0.0.1:PORT \
        --service sqs|dynamodb|sns --access-key AKID --secret SECRET \
        [--token SESSION_TOKEN] [--region us-east-1] [--port 0] \
        [--port-file FILE] [--stats FILE]

Run it with Debian's /usr/bin/python3 (package python3-botocore).  For
each request it recomputes the signature independently with
botocore.auth.SigV4Auth over exactly the headers the request names in
SignedHeaders, at the request's own X-Amz-Date, with the given secret,
and also checks: the credential scope (access key, date, region,
service), the clock skew (at most 15 minutes, as AWS), that host and
x-amz-date are signed, that every signed header is present, that
x-amz-content-sha256 (when sent) is the body's hash, and - with --token -
that X-Amz-Security-Token is present, equal to the token and signed
(without --token it must be absent).

A good request is forwarded to --upstream and its answer relayed.  A bad
one gets HTTP 403 with a JSON body {"__type": ..., "message": reason}
like AWS's (for a query-protocol request, SNS: an XML ErrorResponse with
that Code and Message), and is not forwarded.  The action counted is
X-Amz-Target's or, for the query protocol, the form body's Action: the
body is signed as it came, byte for byte (its hash is in the canonical
request), whatever its encoding.

Counters {"verified", "rejected", "forwarded", "upstream_errors",
"by_action", "rejections"[last 20]} are written to --stats FILE after
every request (atomically) and served at GET /__proxy/stats (that path
needs no signature and is never forwarded).  A test asserts
rejected == 0 and verified > 0.
"""
import argparse
import datetime
import hashlib
import hmac
import json
import os
import re
import sys
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402
import querylib  # noqa: E402

# An SNS request names its action in the form body, not in X-Amz-Target.
proxylib.Request.action = property(querylib.action)

try:
    import botocore
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.compat import HTTPHeaders
    from botocore.credentials import Credentials
except ImportError as e:  # loud: the test must not pass without a verifier
    sys.exit("sigv4-proxy: cannot import botocore (%s): apt-get install python3-botocore "
             "and run with /usr/bin/python3" % e)

NAME = "sigv4-proxy"
AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request,"
    r"\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$")


class Reject(Exception):
    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class ExactSigV4(SigV4Auth):
    """botocore's SigV4 over exactly the headers the request says it
    signed (botocore's own choice would drop, e.g., User-Agent)."""

    def __init__(self, credentials, service, region, signed):
        super().__init__(credentials, service, region)
        self._signed = signed

    def headers_to_sign(self, request):
        hm = HTTPHeaders()
        for name, value in request.headers.items():
            if name.lower() in self._signed:
                hm[name.lower()] = value
        return hm


class Verifier:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.stats = {"verified": 0, "rejected": 0, "forwarded": 0,
                      "upstream_errors": 0, "by_action": {}, "rejections": []}
        self.write_stats()

    def write_stats(self):
        if self.a.stats:
            proxylib.write_atomic(self.a.stats, json.dumps(self.stats, indent=1) + "\n")

    def count(self, key, action=None, reason=None):
        with self.lock:
            self.stats[key] += 1
            if action is not None:
                per = self.stats["by_action"].setdefault(action, {"verified": 0, "rejected": 0})
                if key in per:
                    per[key] += 1
            if reason is not None:
                self.stats["rejections"] = (self.stats["rejections"] + [reason])[-20:]
            self.write_stats()

    def verify(self, req):
        a = self.a
        auth = req.header("Authorization")
        if not auth:
            raise Reject("MissingAuthenticationTokenException", "no Authorization header")
        m = AUTH_RE.match(auth.strip())
        if not m:
            raise Reject("IncompleteSignatureException", "malformed Authorization header: %r" % auth[:200])
        akid, day, region, service, signed_str, sig = m.groups()
        if a.access_key and akid != a.access_key:
            raise Reject("UnrecognizedClientException", "access key %r, expected %r" % (akid, a.access_key))
        if region != a.region:
            raise Reject("InvalidSignatureException", "credential scope region %r, expected %r" % (region, a.region))
        if service != a.service:
            raise Reject("InvalidSignatureException", "credential scope service %r, expected %r" % (service, a.service))
        amzdate = req.header("X-Amz-Date")
        if not amzdate:
            raise Reject("IncompleteSignatureException", "no X-Amz-Date header")
        try:
            t = datetime.datetime.strptime(amzdate, "%Y%m%dT%H%M%SZ")
        except ValueError:
            raise Reject("IncompleteSignatureException", "malformed X-Amz-Date %r" % amzdate)
        if day != amzdate[:8]:
            raise Reject("InvalidSignatureException", "credential scope date %s != X-Amz-Date day %s" % (day, amzdate[:8]))
        skew = abs((datetime.datetime.utcnow() - t).total_seconds())
        if skew > a.max_skew:
            raise Reject("InvalidSignatureException", "X-Amz-Date %s is %.0f s from now (max %d)" % (amzdate, skew, a.max_skew))
        signed = signed_str.split(";")
        if signed != sorted(set(signed)) or any(s != s.lower() for s in signed):
            raise Reject("InvalidSignatureException", "SignedHeaders not lower-case, sorted and unique: %s" % signed_str)
        for must in ("host", "x-amz-date"):
            if must not in signed:
                raise Reject("InvalidSignatureException", "%s is not signed (SignedHeaders=%s)" % (must, signed_str))
        present = {k.lower() for k, _ in req.headers}
        for s in signed:
            if s not in present:
                raise Reject("InvalidSignatureException", "signed header %s is not in the request" % s)
        tok = req.header("X-Amz-Security-Token")
        if a.token is not None:
            if tok is None:
                raise Reject("MissingAuthenticationTokenException", "no X-Amz-Security-Token (a session token is expected)")
            if not hmac.compare_digest(tok, a.token):
                raise Reject("UnrecognizedClientException", "X-Amz-Security-Token differs from the session token")
            if "x-amz-security-token" not in signed:
                raise Reject("InvalidSignatureException", "X-Amz-Security-Token is not signed")
        elif tok is not None:
            raise Reject("UnrecognizedClientException", "X-Amz-Security-Token sent but no session token is configured")
        csha = req.header("X-Amz-Content-SHA256")
        if csha is not None and csha != hashlib.sha256(req.body).hexdigest():
            raise Reject("InvalidSignatureException", "x-amz-content-sha256 is not the SHA-256 of the body")

        host = req.header("Host")
        url = "http://%s%s" % (host, req.target)
        areq = AWSRequest(method=req.method, url=url, data=req.body)
        areq.headers = HTTPHeaders()
        for k, v in req.headers:
            if k.lower() in signed:
                areq.headers[k] = v
        areq.context["timestamp"] = amzdate
        s4 = ExactSigV4(Credentials(akid, a.secret, a.token), service, region, set(signed))
        canon = s4.canonical_request(areq)
        hts = s4.headers_to_sign(areq)
        if s4.signed_headers(hts) != signed_str:
            raise Reject("InvalidSignatureException", "recomputed SignedHeaders %s != %s" % (s4.signed_headers(hts), signed_str))
        mine = s4.signature(s4.string_to_sign(areq, canon), areq)
        if not hmac.compare_digest(mine, sig):
            raise Reject("InvalidSignatureException",
                         "The request signature we calculated does not match the signature you provided "
                         "(botocore %s; canonical request: %r)" % (mine, canon))

    def hook(self, req):
        if req.path == "/__proxy/stats":
            with self.lock:
                return proxylib.json_response(200, self.stats, "application/json")
        action = req.action
        try:
            self.verify(req)
        except Reject as r:
            reason = "%s %s: %s" % (action, r.kind, r.message)
            self.count("rejected", action, reason)
            proxylib.log(NAME, "REJECT " + reason)
            if querylib.is_query(req):
                return proxylib.Response(403, querylib.error_response(r.kind, r.message),
                                         [("Content-Type", "text/xml")])
            return proxylib.json_response(403, {"__type": "com.amazon.coral.service#" + r.kind,
                                                "message": r.message})
        self.count("verified", action)
        try:
            resp = proxylib.forward(self.a.upstream, req, timeout=self.a.upstream_timeout)
        except Exception as e:
            self.count("upstream_errors")
            proxylib.log(NAME, "upstream error for %s: %r" % (action, e))
            return proxylib.json_response(502, {"__type": "ProxyUpstreamError", "message": repr(e)})
        self.count("forwarded")
        proxylib.log(NAME, "ok %s -> %d" % (action, resp.status))
        return resp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="emulator base URL, http://127.0.0.1:PORT")
    ap.add_argument("--service", required=True, help="credential scope service: sqs, dynamodb or sns")
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--access-key", default=None, help="expected access key id (default: any)")
    ap.add_argument("--secret", required=True)
    ap.add_argument("--token", default=None, help="expected session token (X-Amz-Security-Token)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port (see --port-file)")
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--stats", default=None)
    ap.add_argument("--max-skew", type=int, default=900)
    ap.add_argument("--upstream-timeout", type=float, default=60.0)
    a = ap.parse_args()
    v = Verifier(a)
    proxylib.serve(NAME, a.host, a.port, a.port_file, v.hook,
                   "-> %s (service %s, region %s, botocore %s, session token %s)" %
                   (a.upstream, a.service, a.region, botocore.__version__,
                    "expected" if a.token is not None else "none"))


if __name__ == "__main__":
    main()
