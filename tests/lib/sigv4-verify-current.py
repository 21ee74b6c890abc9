#!/usr/bin/python3
"""sigv4-verify-current.py -- sigv4-proxy.py's botocore verifier, but the
keys it accepts are only the credential sets valid right now at the
credential stand-in (aws-creds-standin.py --valid FILE, re-read at every
request), so a request signed with rotated-out or expired credentials is
a 403, as AWS answers it.

    /usr/bin/python3 tests/lib/sigv4-verify-current.py --valid FILE \
        --upstream http://127.0.0.1:PORT --service sqs|dynamodb \
        [--region us-east-1] [--port 0] [--port-file FILE] [--stats FILE]

The request's access key picks the set; its secret and session token are
then required exactly as sigv4-proxy.py checks them.  An access key that
expired answers ExpiredTokenException ("The security token included in
the request is expired"), one never handed out UnrecognizedClientException.
A file written by hand ({"valid": [{"AccessKeyId", "SecretAccessKey",
"Token" (optional), "Expiration" (s since the epoch)}]}) serves static keys.
"""
import argparse
import importlib.util
import json
import os
import sys
import time
import types

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import proxylib  # noqa: E402

_spec = importlib.util.spec_from_file_location("sigv4_proxy", os.path.join(HERE, "sigv4-proxy.py"))
sigv4 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sigv4)

NAME = "sigv4-verify-current"


class CurrentVerifier(sigv4.Verifier):
    def verify(self, req):
        auth = (req.header("Authorization") or "").strip()
        m = sigv4.AUTH_RE.match(auth)
        if not m:
            return sigv4.Verifier.verify(self, req)  # its own refusal
        akid = m.group(1)
        try:
            with open(self.a.valid) as f:
                state = json.load(f)
        except (OSError, ValueError) as e:
            raise sigv4.Reject("InternalFailure", "cannot read the valid credentials: %r" % e)
        now = time.time()
        for s in state.get("valid", []):
            if s["AccessKeyId"] == akid:
                if s["Expiration"] <= now:
                    break
                a = argparse.Namespace(**vars(self.a))
                a.access_key, a.secret, a.token = akid, s["SecretAccessKey"], s.get("Token")
                return sigv4.Verifier.verify(types.SimpleNamespace(a=a), req)
        if akid in state.get("expired", []) or any(s["AccessKeyId"] == akid for s in state.get("valid", [])):
            raise sigv4.Reject("ExpiredTokenException", "The security token included in the request is expired")
        raise sigv4.Reject("UnrecognizedClientException", "The security token included in the request is invalid "
                           "(access key %s was never handed out)" % akid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--valid", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--stats", default=None)
    ap.add_argument("--max-skew", type=int, default=900)
    ap.add_argument("--upstream-timeout", type=float, default=60.0)
    a = ap.parse_args()
    a.access_key = a.secret = a.token = None
    v = CurrentVerifier(a)
    proxylib.serve(NAME, a.host, a.port, a.port_file, v.hook,
                   "-> %s (service %s, credentials valid now at %s)" % (a.upstream, a.service, a.valid))


if __name__ == "__main__":
    main()
