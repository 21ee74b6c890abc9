#!/usr/bin/python3
"""pubsub-standin.py -- a loopback stand-in for Google Cloud Pub/Sub, its
OAuth 2.0 token endpoint for service accounts and the GCE metadata
server, for tests.  It is NOT the real service: no Pub/Sub emulator can be
installed from the registries this project reaches, so this is written
from Google's published references and refuses what they say the real
service refuses:

  projects.topics.publish (Pub/Sub REST v1): POST
    /v1/projects/P/topics/T:publish, JSON {"messages": [PubsubMessage]}
    only (an unknown field is INVALID_ARGUMENT), 1 to 1000 messages, at
    most 10 MB a request; each message: "data" valid padded base64 (RFC
    4648), "attributes" a map of strings, at most 100, keys 1..256 bytes
    not starting with "goog", values at most 1024 bytes; "orderingKey" a
    string of at most 1024 bytes; a message needs data or attributes.  An
    unknown topic is 404 NOT_FOUND "Resource not found (resource=T).";
    without a valid bearer token 401 UNAUTHENTICATED (an expired one
    too).
  projects.topics.create: PUT /v1/projects/P/topics/T, body empty or a
    JSON object (Topic), the same authentication; 409 ALREADY_EXISTS
    "Topic already exists" if it does; answers {"name":
    "projects/P/topics/T"}.  Errors are Google's JSON {"error": {"code", "message",
    "status"}}.  The answer is {"messageIds": [...]}.
  OAuth 2.0 for Server to Server Applications: POST /token, form body
    grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT;
    the JWT's RS256 signature is verified with the test key's public half
    (openssl dgst -verify), its header alg RS256, iss = the service
    account, scope holding the Pub/Sub or cloud-platform scope, aud = the
    token URI, iat not in the future, exp after now and at most an hour
    after iat.  Errors as Google's: 400 {"error": "invalid_grant",
    "error_description"}.  Tokens live --token-ttl s.
  The metadata server: GET
    /computeMetadata/v1/instance/service-accounts/default/token with
    Metadata-Flavor: Google (else 403), and no X-Forwarded-For.
  OAuth 2.0 token refresh (RFC 6749, 6; what an authorized_user file,
    `gcloud auth application-default login`'s, is used with): POST /token,
    application/x-www-form-urlencoded, exactly grant_type=refresh_token,
    client_id, client_secret, refresh_token; an unknown client or a wrong
    secret is 401 {"error": "invalid_client"}, another refresh token 400
    {"error": "invalid_grant"}.  Needs --client-id, --client-secret,
    --refresh-token.
  Security Token Service API v1, token (RFC 8693 token exchange;
    workload identity federation, AIP-4117): POST /v1/token,
    application/x-www-form-urlencoded, grant_type
    urn:ietf:params:oauth:grant-type:token-exchange, requested_token_type
    urn:ietf:params:oauth:token-type:access_token, subject_token_type one
    of the jwt, id_token, saml2 and aws4_request types, audience =
    --audience, scope holding the Pub/Sub or cloud-platform scope,
    subject_token one of the subject tokens set by /__control (else 400
    invalid_grant), no other parameter but options (JSON) and, with
    --sts-client ID:SECRET, HTTP Basic of that client (else 401
    invalid_client).  Answers {"access_token", "issued_token_type",
    "token_type": "Bearer", "expires_in"}.
  IAM Service Account Credentials API v1, generateAccessToken: POST
    /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken, EMAIL =
    --impersonate, bearer token an STS token of cloud-platform scope (an
    expired or unknown one 401 UNAUTHENTICATED, another scope 403
    PERMISSION_DENIED), JSON {"scope": [...] (required; Pub/Sub or
    cloud-platform), "lifetime": "Ns" (up to 43200 s), "delegates"} and
    nothing else (400 INVALID_ARGUMENT).  Answers {"accessToken",
    "expireTime" (RFC 3339, UTC)}.
  A subject token URL (credential_source.url, as on Azure or an OIDC
    token service): GET /subject, with each --subject-header NAME:VALUE
    (else 400); the current subject token as text, or with ?json=1 as
    {"id_token": TOKEN}.
Every token issued records its kind ("jwt", "metadata", "refresh", "sts",
"iam"); a publish's record carries the kind of the token it used.

    pubsub-standin.py --record FILE.jsonl --pubkey PEM --client-email E
        [--token-ttl 60] [--topic PROJECT/TOPIC ...] [--port 0]
        [--port-file F] [--stats F]

Every publish request is appended to --record: {"t", "path", "topic",
"auth" (the Authorization header or null), "status", "messages" (as
accepted, with "messageId")}.
Control: POST /__control {"fail": {"mode": "500"|"429"|"UNAVAILABLE",
"seconds": S, "topic": "P/T" (optional: only that topic's)}} fails every
publish that long; {"create": "P/T"} makes a
topic; {"subjects": {"LABEL": TOKEN, ...}} replaces the subject tokens the
STS takes (and /subject serves the last); {"token_ttl": S} changes the
tokens' life; {"echo": true} makes /token refuse every request with
the request's own body in its error_description (an endpoint that leaks
what it was sent: outboxd must not pass it on).  GET /__control: stats (requests, by_status, tokens,
by_kind, sts_by_subject (LABEL: exchanges), refused (why: count),
bad_auth, expired_auth).
"""
import argparse
import base64
import binascii
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402

NAME = "pubsub-standin"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
SUBJECT_TYPES = ("urn:ietf:params:oauth:token-type:jwt",
                 "urn:ietf:params:oauth:token-type:id_token",
                 "urn:ietf:params:oauth:token-type:saml2",
                 "urn:ietf:params:aws:token-type:aws4_request")
CLOUD_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
IAM_PREFIX = "/v1/projects/-/serviceAccounts/"
SCOPES = ("https://www.googleapis.com/auth/pubsub",
          "https://www.googleapis.com/auth/cloud-platform")
META_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
STATUS_CODE = {"INVALID_ARGUMENT": 400, "UNAUTHENTICATED": 401,
               "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
               "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500,
               "UNAVAILABLE": 503}


def gerror(status, message):
    code = STATUS_CODE[status]
    return proxylib.json_response(code, {"error": {
        "code": code, "message": message, "status": status}},
        "application/json; charset=UTF-8")


def b64url(s):
    s += "=" * (-len(s) % 4)
    return base64.urlsafe_b64decode(s.encode())


class Standin:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.topics = set(a.topic or [])
        self.tokens = {}          # token -> (expiry (unix s), kind, scopes)
        self.subjects = {}        # subject token -> label
        self.last_subject = None
        self.fail_mode = None
        self.fail_until = 0.0
        self.fail_topic = None
        self.next_id = 1
        self.stats = {"requests": 0, "by_status": {}, "tokens": 0,
                      "by_kind": {}, "sts_by_subject": {}, "refused": {},
                      "bad_auth": 0, "expired_auth": 0, "messages": 0}

    def write_stats(self):
        if self.a.stats:
            proxylib.write_atomic(self.a.stats, json.dumps(self.stats) + "\n")

    def count(self, status):
        k = str(status)
        self.stats["by_status"][k] = self.stats["by_status"].get(k, 0) + 1

    def mint(self, kind, scopes, ttl=None):
        ttl = self.a.token_ttl if ttl is None else ttl
        tok = "ya29.standin-%s-" % kind + binascii.hexlify(os.urandom(24)).decode()
        with self.lock:
            self.tokens[tok] = (time.time() + ttl, kind, tuple(scopes))
            self.stats["tokens"] += 1
            self.stats["by_kind"][kind] = self.stats["by_kind"].get(kind, 0) + 1
            self.write_stats()
        return tok, ttl

    def issue(self, kind="jwt", scopes=SCOPES[:1], extra=None):
        tok, ttl = self.mint(kind, scopes)
        body = {"access_token": tok, "expires_in": ttl, "token_type": "Bearer"}
        body.update(extra or {})
        return proxylib.json_response(200, body, "application/json; charset=utf-8")

    def refuse(self, status, why, body):
        """A refused credential request: counted by why, logged."""
        with self.lock:
            self.stats["refused"][why] = self.stats["refused"].get(why, 0) + 1
            self.write_stats()
        proxylib.log(NAME, "refused (%d): %s" % (status, why))
        return proxylib.json_response(status, body, "application/json; charset=utf-8")

    def oauth_refuse(self, status, err, why):
        return self.refuse(status, why, {"error": err, "error_description": why})

    def form(self, req):
        """The form body as {name: value}, or a why: each name once."""
        if (req.header("Content-Type") or "").split(";")[0].strip() != \
                "application/x-www-form-urlencoded":
            return "Content-Type is not application/x-www-form-urlencoded"
        try:
            pairs = urllib.parse.parse_qsl(req.body.decode("ascii"), keep_blank_values=True,
                                           strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return "not a form body"
        f = dict(pairs)
        if len(f) != len(pairs):
            return "a parameter given twice"
        return f

    def refresh(self, req, f):
        a = self.a
        if set(f) != {"grant_type", "client_id", "client_secret", "refresh_token"}:
            return self.oauth_refuse(400, "invalid_request",
                                     "refresh: parameters %s" % sorted(f))
        if f["client_id"] != a.client_id or f["client_secret"] != a.client_secret:
            return self.oauth_refuse(401, "invalid_client", "The OAuth client was not found.")
        if f["refresh_token"] != a.refresh_token:
            return self.oauth_refuse(400, "invalid_grant", "Bad Request")
        return self.issue("refresh", SCOPES, {"scope": " ".join(SCOPES)})

    def sts(self, req):
        a = self.a
        if req.method != "POST":
            return proxylib.Response(405, "POST only\n")
        f = self.form(req)
        if isinstance(f, str):
            return self.oauth_refuse(400, "invalid_request", f)
        need = {"grant_type", "audience", "scope", "requested_token_type",
                "subject_token", "subject_token_type"}
        if need - set(f) or set(f) - need - {"options"}:
            return self.oauth_refuse(400, "invalid_request", "STS: parameters %s" % sorted(f))
        if f["grant_type"] != TOKEN_EXCHANGE:
            return self.oauth_refuse(400, "unsupported_grant_type", "Invalid grant_type.")
        if f["requested_token_type"] != ACCESS_TOKEN_TYPE:
            return self.oauth_refuse(400, "invalid_request", "Invalid requested_token_type.")
        if f["subject_token_type"] not in SUBJECT_TYPES:
            return self.oauth_refuse(400, "invalid_request", "Invalid subject_token_type.")
        if f["audience"] != a.audience:
            return self.oauth_refuse(400, "invalid_target", "Invalid audience.")
        scopes = f["scope"].split()
        if not any(s in scopes for s in SCOPES):
            return self.oauth_refuse(400, "invalid_scope", "Invalid scope.")
        if "options" in f:
            try:
                if not isinstance(json.loads(f["options"]), dict):
                    raise ValueError
            except ValueError:
                return self.oauth_refuse(400, "invalid_request", "options is not a JSON object")
        if a.sts_client:
            want = "Basic " + base64.b64encode(a.sts_client.encode()).decode()
            if req.header("Authorization") != want:
                return self.oauth_refuse(401, "invalid_client", "STS client authentication failed.")
        elif req.header("Authorization"):
            return self.oauth_refuse(400, "invalid_request", "STS: an Authorization header without a client")
        with self.lock:
            label = self.subjects.get(f["subject_token"])
            if label is not None:
                d = self.stats["sts_by_subject"]
                d[label] = d.get(label, 0) + 1
        if label is None:
            return self.oauth_refuse(400, "invalid_grant", "The subject token is invalid or expired.")
        return self.issue("sts", scopes, {"issued_token_type": ACCESS_TOKEN_TYPE})

    def bearer(self, req):
        """(token, (expiry, kind, scopes)) of the request, or None."""
        auth = req.header("Authorization") or ""
        if not auth.startswith("Bearer "):
            return None, None
        with self.lock:
            return auth[7:], self.tokens.get(auth[7:])

    def iam(self, req):
        a = self.a
        name = req.path[len(IAM_PREFIX):]
        if req.method != "POST" or not name.endswith(":generateAccessToken"):
            return gerror("NOT_FOUND", "Method not found.")
        _, t = self.bearer(req)
        if t is None or t[0] <= time.time():
            return self.refuse(401, "IAM: bearer token unknown or expired", {"error": {
                "code": 401, "status": "UNAUTHENTICATED",
                "message": "Request had invalid authentication credentials."}})
        if t[1] != "sts" or CLOUD_SCOPE not in t[2]:
            return self.refuse(403, "IAM: not an STS token of cloud-platform scope", {"error": {
                "code": 403, "status": "PERMISSION_DENIED",
                "message": "Request had insufficient authentication scopes."}})
        if name[:-len(":generateAccessToken")] != a.impersonate:
            return self.refuse(403, "IAM: another service account", {"error": {
                "code": 403, "status": "PERMISSION_DENIED",
                "message": "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist)."}})
        try:
            doc = json.loads(req.body)
        except ValueError:
            doc = None
        bad = None
        if (req.header("Content-Type") or "").split(";")[0].strip() != "application/json":
            bad = "Content-Type is not application/json"
        elif not isinstance(doc, dict) or set(doc) - {"scope", "lifetime", "delegates"}:
            bad = "Invalid JSON payload received."
        elif not isinstance(doc.get("scope"), list) or not doc["scope"] or \
                not any(s in doc["scope"] for s in SCOPES):
            bad = "Scope required."
        life = 3600
        if bad is None and "lifetime" in doc:
            lt = doc["lifetime"]
            if not isinstance(lt, str) or not lt.endswith("s") or not lt[:-1].isdigit() \
                    or not 1 <= int(lt[:-1]) <= 43200:
                bad = "Invalid value at 'lifetime' (type.googleapis.com/google.protobuf.Duration)"
            else:
                life = int(lt[:-1])
        if bad:
            return self.refuse(400, "IAM: " + bad, {"error": {
                "code": 400, "status": "INVALID_ARGUMENT", "message": bad}})
        tok, ttl = self.mint("iam", doc["scope"], min(life, self.a.token_ttl))
        exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ttl))
        return proxylib.json_response(200, {"accessToken": tok, "expireTime": exp},
                                      "application/json; charset=UTF-8")

    def subject(self, req):
        for h in self.a.subject_header or []:
            n, v = h.split(":", 1)
            if req.header(n) != v:
                return self.refuse(400, "subject URL: no %s header" % n, {"error": "bad header"})
        with self.lock:
            tok = self.last_subject
        if tok is None:
            return proxylib.Response(404, "no subject token\n")
        if "json=1" in urllib.parse.urlsplit(req.target).query:
            return proxylib.json_response(200, {"id_token": tok}, "application/json")
        return proxylib.Response(200, tok, [("Content-Type", "text/plain")])

    def verify_jwt(self, jwt, token_uri):
        parts = jwt.split(".")
        if len(parts) != 3:
            return "not a JWS compact serialisation"
        try:
            head = json.loads(b64url(parts[0]))
            claims = json.loads(b64url(parts[1]))
            sig = b64url(parts[2])
        except (ValueError, binascii.Error):
            return "bad base64url or JSON"
        if head.get("alg") != "RS256":
            return "alg is not RS256"
        with tempfile.NamedTemporaryFile() as sf, tempfile.NamedTemporaryFile() as df:
            sf.write(sig)
            sf.flush()
            df.write((parts[0] + "." + parts[1]).encode())
            df.flush()
            r = subprocess.run(["openssl", "dgst", "-sha256", "-verify",
                                self.a.pubkey, "-signature", sf.name, df.name],
                               capture_output=True)
        if r.returncode != 0:
            return "Invalid JWT Signature."
        now = time.time()
        if claims.get("iss") != self.a.client_email:
            return "Invalid issuer"
        if not any(s in str(claims.get("scope", "")).split() for s in SCOPES):
            return "Invalid scope"
        if claims.get("aud") != token_uri:
            return "Invalid JWT: aud is %r" % claims.get("aud")
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, (int, float)) or not isinstance(exp, (int, float)):
            return "Invalid JWT: iat/exp"
        if iat > now + 60 or exp <= now or exp - iat > 3600:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
        return None

    def token(self, req):
        if req.method != "POST":
            return proxylib.Response(405, "POST only\n")
        if getattr(self, "echo", False):
            # A misbehaving endpoint (a wrong token_uri, a proxy) that
            # echoes the request, secrets and all, in its error.
            return proxylib.json_response(400, {"error": "invalid_grant",
                                                "error_description": "you sent: " +
                                                req.body.decode("ascii", "replace")},
                                          "application/json")
        form = self.form(req)
        if isinstance(form, dict) and form.get("grant_type") == "refresh_token" \
                and self.a.refresh_token:
            return self.refresh(req, form)
        f = urllib.parse.parse_qs(req.body.decode("ascii", "replace"), strict_parsing=False)
        if f.get("grant_type") != [JWT_BEARER] or len(f.get("assertion", [])) != 1:
            return proxylib.json_response(400, {"error": "unsupported_grant_type",
                                                "error_description": "Invalid grant_type."},
                                          "application/json")
        host = req.header("Host", "")
        why = self.verify_jwt(f["assertion"][0], "http://%s/token" % host)
        if why:
            proxylib.log(NAME, "token refused: %s" % why)
            return proxylib.json_response(400, {"error": "invalid_grant",
                                                "error_description": why}, "application/json")
        return self.issue()

    def metadata(self, req):
        if req.method != "GET" or req.header("Metadata-Flavor") != "Google" \
                or req.header("X-Forwarded-For"):
            return proxylib.Response(403, "Missing Metadata-Flavor:Google header.\n")
        return self.issue("metadata", SCOPES)

    def check_auth(self, req):
        auth = req.header("Authorization")
        if self.a.emulator:
            return None
        if not auth or not auth.startswith("Bearer "):
            return "Request is missing required authentication credential."
        t = self.tokens.get(auth[7:])
        if t is None or not any(s in t[2] for s in SCOPES):
            self.stats["bad_auth"] += 1
            return "Request had invalid authentication credentials."
        if t[0] <= time.time():
            self.stats["expired_auth"] += 1
            return "Request had invalid authentication credentials. Expected OAuth 2 access token."
        return None

    def check_messages(self, body):
        if len(body) > 10 * 1000 * 1000:
            return "Request payload size exceeds the limit: 10485760 bytes."
        try:
            doc = json.loads(body)
        except ValueError:
            return "Invalid JSON payload received."
        if not isinstance(doc, dict) or set(doc) - {"messages"}:
            return "Invalid JSON payload received. Unknown name."
        msgs = doc.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return "The value for message_count is too small. You passed 0 in the request, but the minimum value is 1."
        if len(msgs) > 1000:
            return "The value for message_count is too large."
        for m in msgs:
            if not isinstance(m, dict) or set(m) - {"data", "attributes", "orderingKey"}:
                return "Invalid JSON payload received. Unknown name in message."
            data = m.get("data", "")
            try:
                if not isinstance(data, str):
                    raise ValueError
                base64.b64decode(data.encode(), validate=True)
            except (ValueError, binascii.Error):
                return "Invalid value at 'messages[0].data' (TYPE_BYTES), Base64 decoding failed"
            attrs = m.get("attributes", {})
            if not isinstance(attrs, dict) or len(attrs) > 100:
                return "Too many attributes (limit 100)."
            for k, v in attrs.items():
                if not isinstance(v, str):
                    return "Invalid value at 'messages[0].attributes'."
                if not k or len(k.encode()) > 256 or k.lower().startswith("goog"):
                    return "Invalid attribute key %r." % k[:64]
                if len(v.encode()) > 1024:
                    return "An attribute value is too long (limit 1024 bytes)."
            ok = m.get("orderingKey", "")
            if not isinstance(ok, str) or len(ok.encode()) > 1024:
                return "Invalid orderingKey."
            if not data and not attrs:
                return "Some messages are empty: they need data or attributes."
        return msgs

    def create(self, req, p):
        topic = p[3] + "/" + p[5]
        with self.lock:
            why = self.check_auth(req)
            if why:
                return gerror("UNAUTHENTICATED", why)
            try:
                if req.body and not isinstance(json.loads(req.body), dict):
                    raise ValueError
            except ValueError:
                return gerror("INVALID_ARGUMENT", "Invalid JSON payload received.")
            if topic in self.topics:
                return proxylib.json_response(409, {"error": {
                    "code": 409, "message": "Topic already exists", "status": "ALREADY_EXISTS"}},
                    "application/json; charset=UTF-8")
            self.topics.add(topic)
        return proxylib.json_response(200, {"name": "projects/%s/topics/%s" % (p[3], p[5])},
                                      "application/json; charset=UTF-8")

    def publish(self, req):
        path = req.path
        p = path.split("/")
        if req.method == "PUT" and len(p) == 6 and p[1] == "v1" and p[2] == "projects" \
                and p[4] == "topics" and ":" not in p[5]:
            return self.create(req, p)
        # /v1/projects/P/topics/T:publish
        if req.method != "POST" or len(p) != 6 or p[1] != "v1" or p[2] != "projects" \
                or p[4] != "topics" or not p[5].endswith(":publish"):
            return gerror("NOT_FOUND", "Method not found.")
        topic = p[3] + "/" + p[5][:-len(":publish")]
        now = time.time()
        with self.lock:
            self.stats["requests"] += 1
            why = self.check_auth(req)
            if why:
                resp, accepted = gerror("UNAUTHENTICATED", why), []
            elif now < self.fail_until and self.fail_topic in (None, topic):
                mode = self.fail_mode
                resp = (gerror("UNAVAILABLE", "The service is currently unavailable.") if mode == "UNAVAILABLE"
                        else gerror("RESOURCE_EXHAUSTED", "Quota exceeded.") if mode == "429"
                        else gerror("INTERNAL", "Internal error encountered."))
                accepted = []
            elif topic not in self.topics:
                resp = gerror("NOT_FOUND", "Resource not found (resource=%s)." % topic.split("/")[1])
                accepted = []
            else:
                msgs = self.check_messages(req.body)
                if isinstance(msgs, str):
                    resp, accepted = gerror("INVALID_ARGUMENT", msgs), []
                else:
                    ids = []
                    for m in msgs:
                        m["messageId"] = str(self.next_id)
                        ids.append(m["messageId"])
                        self.next_id += 1
                    accepted = msgs
                    self.stats["messages"] += len(msgs)
                    resp = proxylib.json_response(200, {"messageIds": ids}, "application/json")
            self.count(resp.status)
            auth = req.header("Authorization") or ""
            t = self.tokens.get(auth[7:]) if auth.startswith("Bearer ") else None
            rec = {"t": now, "path": path, "topic": topic,
                   "auth": req.header("Authorization"), "status": resp.status,
                   "kind": t[1] if t else None, "messages": accepted}
            with open(self.a.record, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            self.write_stats()
        return resp

    def control(self, req):
        if req.method == "POST":
            try:
                c = json.loads(req.body or b"{}")
            except ValueError as e:
                return proxylib.Response(400, "bad control body: %s\n" % e)
            with self.lock:
                if "fail" in c:
                    self.fail_mode = str(c["fail"]["mode"])
                    self.fail_until = time.time() + float(c["fail"]["seconds"])
                    self.fail_topic = c["fail"].get("topic")
                if "create" in c:
                    self.topics.add(c["create"])
                if "subjects" in c:
                    self.subjects = {v: k for k, v in c["subjects"].items()}
                    self.last_subject = list(c["subjects"].values())[-1] if c["subjects"] else None
                if "token_ttl" in c:
                    self.a.token_ttl = int(c["token_ttl"])
                if "echo" in c:
                    self.echo = bool(c["echo"])
            proxylib.log(NAME, "control %s" % sorted(c))
        with self.lock:
            return proxylib.json_response(200, self.stats, "application/json")

    def hook(self, req):
        if req.path == "/__control":
            return self.control(req)
        if req.path == "/token":
            return self.token(req)
        if req.path == META_PATH:
            return self.metadata(req)
        if req.path == "/v1/token":
            return self.sts(req)
        if req.path.startswith(IAM_PREFIX):
            return self.iam(req)
        if req.path == "/subject":
            return self.subject(req)
        return self.publish(req)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", required=True)
    ap.add_argument("--pubkey", required=True, help="PEM public key of the test service account")
    ap.add_argument("--client-email", required=True)
    ap.add_argument("--token-ttl", type=int, default=60)
    ap.add_argument("--topic", action="append", help="PROJECT/TOPIC that exists")
    ap.add_argument("--client-id", default=None, help="authorized_user's OAuth client")
    ap.add_argument("--client-secret", default=None)
    ap.add_argument("--refresh-token", default=None)
    ap.add_argument("--audience", default=None, help="the STS audience (workload identity provider)")
    ap.add_argument("--sts-client", default=None, help="ID:SECRET the STS wants as HTTP Basic")
    ap.add_argument("--impersonate", default=None, help="service account email of generateAccessToken")
    ap.add_argument("--subject-header", action="append", help="NAME:VALUE /subject needs")
    ap.add_argument("--emulator", action="store_true", help="no authentication, as the emulator")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--stats", default=None)
    a = ap.parse_args()
    if subprocess.run(["openssl", "version"], capture_output=True).returncode != 0:
        sys.exit("pubsub-standin: openssl is needed to verify RS256")
    s = Standin(a)
    open(a.record, "a").close()
    s.write_stats()
    proxylib.serve(NAME, a.host, a.port, a.port_file, s.hook, "(Pub/Sub stand-in)")


if __name__ == "__main__":
    main()
