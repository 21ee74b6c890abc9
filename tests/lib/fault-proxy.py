#!/usr/bin/python3
"""fault-proxy.py -- an HTTP proxy in front of the SQS emulator (JSON
protocol; and SNS, query protocol, on the same port) that injects faults
on command.

    /usr/bin/python3 tests/lib/fault-proxy.py --upstream http://127.0.0.1:PORT \
        [--port 0] [--port-file FILE] [--stats FILE] [--mode JSON]

Put it directly in front of the emulator: it may rewrite request bodies,
which would break a signature that something behind it checked.

Control (no signature, never forwarded):
    GET  /__fault              state: mode, parameters, what is left, stats
    POST /__fault  {"mode": NAME, ...parameters}   set the mode (replaces)
    POST /__fault/release      let held requests go (see hold_retry)
    POST /__fault/reset        zero the stats
--mode JSON sets the first mode the same way.  Example:
    curl -s -X POST http://127.0.0.1:P/__fault \
         -d '{"mode":"partial-batch","min_entries":10,"times":1}'

Modes (a mode with "times" or "seconds" falls back to "pass" when used up):
  pass           forward everything unchanged (the default).
  partial-batch  the case from the field: for a SendMessageBatch with at
                 least min_entries (default 1) entries, forward all but the
                 entry at fail_index (default -1 = the last) and answer
                 HTTP 200 with the emulator's Successful list plus that
                 entry in Failed: {"Id", "SenderFault": sender_fault
                 (false), "Code": code ("InternalError"), "Message":
                 message ("injected")}.  times (default 1; null = every
                 batch, i.e. a permanent per-entry error).  With
                 hold_retry: true, every SendMessage(Batch) after an
                 injection waits until POST /__fault/release or hold_max
                 seconds (default 30), so a test can look at the database
                 between the failed pass and the retry.
  status         answer HTTP status (default 500) with {"__type": code,
                 "message": message} without forwarding; for "seconds"
                 and/or "times" (both null = until changed).
  delay          forward after sleeping ms (default 1000) milliseconds;
                 "seconds"/"times" as above.  With
                 "after": true the request is forwarded at once and the
                 answer held: the emulator has done the work (a
                 ReceiveMessage has taken its messages) before the
                 client hears of it.
  fail-entries   per-entry failures chosen by content: for a
                 SendMessageBatch, every entry whose MessageBody contains
                 a rule's "match" text (or whose Id is in its "ids") is
                 answered in Failed with that rule's SenderFault
                 ("sender_fault", default false), "code" (default
                 "InternalError") and "message" ("injected"); the other
                 entries are forwarded and answered as the emulator
                 answers them.  rules: a list of {match|ids, sender_fault,
                 code, message, times}; a rule with "times" fails the
                 entries it matches in that many requests only (default:
                 every one).  times/seconds as above (null = until
                 changed).  SenderFault false is SQS's per-entry server
                 error (retry); true means the message can never succeed.
                 An SNS PublishBatch (query protocol) is treated the same
                 way, matching its entries' Message: the rest goes to the
                 emulator renumbered, and the answer is SNS's XML with the
                 failed entries added to <Failed>.
  drop           the write happens, the answer does not: forward the
                 request, let the emulator carry it out, then close the
                 client's connection without answering (the client sees
                 the connection drop after its write and cannot tell
                 whether it was done); "seconds"/"times" as above.
Every mode takes "actions": a list of SQS or SNS actions it applies to
(e.g. ["SendMessageBatch"]); default: SendMessageBatch only for
partial-batch, SendMessageBatch and PublishBatch for fail-entries, every
action for the others.  Requests outside it pass through.  The "status"
mode answers a query-protocol (SNS) request with SNS's XML ErrorResponse
(Code = code, Type Receiver for a 5xx, else Sender).

GET /__fault also lists "inflight": the requests being handled right now
(action, the client's TCP port "peer_port", "since" (epoch seconds), and
for SendMessage(Batch) the entry "ids"), so a test can tell which client
process has a request outstanding (e.g. with ss -tnp).

Stats: requests and per-action counts, entries_forwarded (messages that
reached the emulator through SendMessage/SendMessageBatch), injected (the
entries failed on purpose: action, Id, MessageBody, time), held,
requests_done (action, peer_port, ids, since, done) for SendMessage(Batch)
and ReceiveMessage (ids null).
The --stats file has them all but requests_done (GET /__fault has it).
"""
import argparse
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxylib  # noqa: E402
import querylib  # noqa: E402

# An SNS request names its action in the form body, not in X-Amz-Target.
proxylib.Request.action = property(querylib.action)

NAME = "fault-proxy"
MODES = {
    "pass": {},
    "partial-batch": {"fail_index": -1, "min_entries": 1, "times": 1, "seconds": None,
                      "sender_fault": False, "code": "InternalError", "message": "injected",
                      "hold_retry": False, "hold_max": 30, "actions": ["SendMessageBatch"]},
    "status": {"status": 500, "code": "InternalError", "message": "injected",
               "times": None, "seconds": None, "actions": None},
    "delay": {"ms": 1000, "after": False, "times": None, "seconds": None,
              "actions": None},
    "drop": {"times": None, "seconds": None, "actions": None},
    "fail-entries": {"rules": [], "times": None, "seconds": None,
                     "actions": ["SendMessageBatch", "PublishBatch"]},
}

# The client's address, for the in-flight list: proxylib hands the hook
# only the request, so remember the peer per handler thread.
_tls = threading.local()
_orig_handle = proxylib._Handler._handle


def _handle_with_peer(self):
    _tls.peer = self.client_address
    return _orig_handle(self)


class Drop(proxylib.Response):
    """Answer nothing: close the client's connection (the drop mode)."""


_orig_send = proxylib._Handler._send


def _send_or_drop(self, resp):
    if isinstance(resp, Drop):
        self.close_connection = True
        return
    return _orig_send(self, resp)


proxylib._Handler._send = _send_or_drop

for _m in ("do_GET", "do_POST", "do_PUT", "do_DELETE", "do_HEAD", "do_PATCH"):
    setattr(proxylib._Handler, _m, _handle_with_peer)


class Faults:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.release.set()
        self.hold_armed = False
        self.hold_max = 30
        self.inflight = {}
        self.inflight_seq = 0
        self.reset_stats()
        self.set_mode({"mode": "pass"})
        if a.mode:
            self.set_mode(json.loads(a.mode))

    def reset_stats(self):
        self.stats = {"requests": 0, "by_action": {}, "entries_forwarded": 0,
                      "injected": [], "held": 0, "faulted_requests": 0,
                      "requests_done": []}

    def set_mode(self, spec):
        name = spec.get("mode")
        if name not in MODES:
            raise ValueError("unknown mode %r (one of %s)" % (name, ", ".join(MODES)))
        params = dict(MODES[name])
        for k, v in spec.items():
            if k == "mode":
                continue
            if k not in params:
                raise ValueError("mode %s has no parameter %r (has %s)" % (name, k, ", ".join(params) or "none"))
            params[k] = v
        self.mode = name
        self.params = params
        self.remaining = params.get("times")
        # fail-entries: the requests each rule may still fail
        self.rule_left = [r.get("times") for r in params.get("rules") or []]
        self.until = time.time() + params["seconds"] if params.get("seconds") is not None else None
        self.hold_armed = False
        self.release.set()
        proxylib.log(NAME, "mode %s %s" % (name, json.dumps(params)))

    def state(self):
        return {"mode": self.mode, "params": self.params, "remaining_times": self.remaining,
                "seconds_left": (max(0.0, self.until - time.time()) if self.until else None),
                "holding": not self.release.is_set(), "stats": self.stats,
                "inflight": sorted(self.inflight.values(), key=lambda r: r["since"])}

    def write_stats(self):
        """The stats file, written at each change, is the state without
        stats.requests_done: that list grows with every request, and
        writing it whole three times a request made each request cost
        O(requests so far).  GET /__fault has it."""
        if self.a.stats:
            st = self.state()
            st["stats"] = {k: v for k, v in st["stats"].items() if k != "requests_done"}
            proxylib.write_atomic(self.a.stats, json.dumps(st, indent=1) + "\n")

    def _expire(self):
        """Fall back to pass when the mode is used up (lock held)."""
        if self.mode == "pass":
            return
        if (self.remaining is not None and self.remaining <= 0) or \
           (self.until is not None and time.time() >= self.until):
            proxylib.log(NAME, "mode %s used up, back to pass" % self.mode)
            hold = self.hold_armed
            self.mode, self.params, self.remaining, self.until = "pass", {}, None, None
            self.hold_armed = hold  # a pending hold stays until released

    def _applies(self, action):
        acts = self.params.get("actions")
        return self.mode != "pass" and (acts is None or action in acts)

    def control(self, req):
        p = req.path.rstrip("/")
        with self.lock:
            if p == "/__fault" and req.method == "GET":
                return proxylib.json_response(200, self.state(), "application/json")
            if req.method != "POST":
                return proxylib.json_response(405, {"error": "GET or POST"}, "application/json")
            if p == "/__fault":
                try:
                    spec = json.loads(req.body or b"{}")
                    self.set_mode(spec)
                except (ValueError, TypeError, AttributeError) as e:
                    return proxylib.json_response(400, {"error": str(e)}, "application/json")
            elif p == "/__fault/release":
                self.hold_armed = False
                self.release.set()
                proxylib.log(NAME, "released held requests")
            elif p == "/__fault/reset":
                self.reset_stats()
            else:
                return proxylib.json_response(404, {"error": "no such control path"}, "application/json")
            self.write_stats()
            return proxylib.json_response(200, self.state(), "application/json")

    def entry_ids(self, req):
        if req.action == "PublishBatch":
            return [e.get("Id") for e in querylib.batch_entries(querylib.form(req))[0]]
        if req.action not in ("SendMessage", "SendMessageBatch"):
            return None
        try:
            doc = json.loads(req.body)
        except ValueError:
            return None
        if req.action == "SendMessage":
            return [doc.get("MessageDeduplicationId")] if isinstance(doc, dict) else None
        try:
            return [e.get("Id") for e in doc.get("Entries") or []]
        except AttributeError:
            return None

    def hook(self, req):
        if req.path.startswith("/__fault"):
            return self.control(req)
        peer = getattr(_tls, "peer", None)
        rec = {"action": req.action, "peer_port": peer[1] if peer else None,
               "since": time.time(), "ids": self.entry_ids(req)}
        with self.lock:
            self.inflight_seq += 1
            key = self.inflight_seq
            self.inflight[key] = rec
        try:
            return self.hook_inner(req)
        finally:
            with self.lock:
                del self.inflight[key]
                if rec["ids"] is not None or req.action == "ReceiveMessage":
                    rec["done"] = time.time()
                    self.stats["requests_done"].append(rec)
                self.write_stats()

    def hook_inner(self, req):
        action = req.action
        with self.lock:
            self.stats["requests"] += 1
            self.stats["by_action"][action] = self.stats["by_action"].get(action, 0) + 1
            self._expire()
            hold = self.hold_armed and action in ("SendMessage", "SendMessageBatch")
            if hold:
                self.stats["held"] += 1
            self.write_stats()
        if hold:
            proxylib.log(NAME, "holding %s until released (max %ss)" % (action, self.hold_max))
            if not self.release.wait(self.hold_max):
                proxylib.log(NAME, "hold timed out, forwarding")
        with self.lock:
            self._expire()
            mode = self.mode if self._applies(action) else "pass"
            params = dict(self.params)
        if mode == "partial-batch":
            return self.partial_batch(req, params)
        if mode == "fail-entries":
            return self.fail_entries(req, params)
        if mode == "status":
            self.consume()
            proxylib.log(NAME, "inject HTTP %s for %s" % (params["status"], action))
            if querylib.is_query(req):
                return proxylib.Response(int(params["status"]), querylib.error_response(
                    params["code"], params["message"], int(params["status"]) < 500),
                    [("Content-Type", "text/xml")])
            return proxylib.json_response(int(params["status"]), {
                "__type": "com.amazonaws.sqs#" + params["code"], "message": params["message"]})
        if mode == "drop":
            self.consume()
            resp = self.pass_through(req)
            proxylib.log(NAME, "drop the connection after %s (upstream answered %s)" % (action, resp.status))
            return Drop(resp.status)
        if mode == "delay":
            self.consume()
            proxylib.log(NAME, "delay %s by %s ms" % (action, params["ms"]))
            if params.get("after"):
                resp = self.pass_through(req)
                time.sleep(float(params["ms"]) / 1000.0)
                return resp
            time.sleep(float(params["ms"]) / 1000.0)
        return self.pass_through(req)

    def consume(self):
        with self.lock:
            self.stats["faulted_requests"] += 1
            if self.remaining is not None:
                self.remaining -= 1
            self.write_stats()

    def count_entries(self, req, body=None):
        if req.action == "PublishBatch":
            return len(querylib.batch_entries(querylib.form(req))[0])
        if req.action not in ("SendMessage", "SendMessageBatch"):
            return 0
        try:
            doc = json.loads(body if body is not None else req.body)
        except ValueError:
            return 0
        return len(doc.get("Entries") or []) if req.action == "SendMessageBatch" else 1

    def pass_through(self, req):
        try:
            resp = proxylib.forward(self.a.upstream, req, timeout=self.a.upstream_timeout)
        except Exception as e:
            proxylib.log(NAME, "upstream error for %s: %r" % (req.action, e))
            return proxylib.json_response(502, {"__type": "ProxyUpstreamError", "message": repr(e)})
        if resp.status == 200:
            n = self.count_entries(req)
            if n:
                with self.lock:
                    self.stats["entries_forwarded"] += n
                    self.write_stats()
        return resp

    def partial_batch(self, req, p):
        try:
            doc = json.loads(req.body)
            entries = doc["Entries"]
            assert isinstance(entries, list)
        except (ValueError, KeyError, AssertionError, TypeError):
            return self.pass_through(req)
        if len(entries) < int(p["min_entries"]) or not entries:
            return self.pass_through(req)
        idx = int(p["fail_index"])
        if not -len(entries) <= idx < len(entries):
            return self.pass_through(req)
        victim = entries[idx]
        rest = [e for i, e in enumerate(entries) if i != idx % len(entries)]
        if rest:
            body = json.dumps(dict(doc, Entries=rest)).encode("utf-8")
            try:
                resp = proxylib.forward(self.a.upstream, req, body=body, timeout=self.a.upstream_timeout)
            except Exception as e:
                proxylib.log(NAME, "upstream error for %s: %r" % (req.action, e))
                return proxylib.json_response(502, {"__type": "ProxyUpstreamError", "message": repr(e)})
            if resp.status != 200:
                return resp  # not the case we inject into; fault stays armed
            try:
                answer = json.loads(resp.body or b"{}")
            except ValueError:
                return resp
        else:
            answer = {"Successful": []}
        answer.setdefault("Successful", [])
        failed = list(answer.get("Failed") or [])
        failed.append({"Id": victim.get("Id"), "SenderFault": bool(p["sender_fault"]),
                       "Code": p["code"], "Message": p["message"]})
        answer["Failed"] = failed
        with self.lock:
            self.stats["faulted_requests"] += 1
            self.stats["entries_forwarded"] += len(rest)
            self.stats["injected"].append({"action": req.action, "Id": victim.get("Id"),
                                           "MessageBody": victim.get("MessageBody"),
                                           "entries": len(entries), "time": time.time()})
            if self.remaining is not None:
                self.remaining -= 1
            if p.get("hold_retry"):
                self.hold_armed = True
                self.hold_max = float(p.get("hold_max") or 30)
                self.release.clear()
            self.write_stats()
        proxylib.log(NAME, "partial-batch: forwarded %d of %d entries, failed Id %r" %
                     (len(rest), len(entries), victim.get("Id")))
        hdrs = [(k, v) for k, v in resp.headers if k.lower() not in ("x-amz-crc32",)] if rest \
            else [("Content-Type", "application/x-amz-json-1.0")]
        return proxylib.Response(200, json.dumps(answer), hdrs)

    def pick_rule(self, p, text, eid):
        """The index of the first rule that matches an entry and may still
        fail it, or None (lock held)."""
        for i, r in enumerate(p.get("rules") or []):
            m = r.get("match")
            if ((m is not None and m in text) or str(eid) in [str(x) for x in r.get("ids") or []]) and \
               (i >= len(self.rule_left) or self.rule_left[i] is None or self.rule_left[i] > 0):
                return i
        return None

    def fail_entries_sns(self, req, p):
        try:
            entries, other = querylib.batch_entries(querylib.form(req))
        except (ValueError, UnicodeDecodeError):
            return self.pass_through(req)
        rules = p.get("rules") or []
        victims, rest = [], []
        with self.lock:
            for e in entries:
                i = self.pick_rule(p, e.get("Message", ""), e.get("Id"))
                (victims if i is not None else rest).append((e, i))
            if victims:
                for i in {i for _, i in victims}:
                    if i < len(self.rule_left) and self.rule_left[i] is not None:
                        self.rule_left[i] -= 1
        if not victims:
            return self.pass_through(req)
        ok, failed = [], []
        if rest:
            body = querylib.batch_form(other, [e for e, _ in rest])
            try:
                resp = proxylib.forward(self.a.upstream, req, body=body, timeout=self.a.upstream_timeout)
            except Exception as ex:
                proxylib.log(NAME, "upstream error for %s: %r" % (req.action, ex))
                return proxylib.Response(502, querylib.error_response("ProxyUpstreamError", repr(ex), False),
                                         [("Content-Type", "text/xml")])
            if resp.status != 200:
                return resp
            try:
                ok, failed = querylib.batch_result(resp.body)
            except (ValueError, SyntaxError):
                return resp
        now = time.time()
        for e, i in victims:
            r = rules[i]
            failed.append({"Id": e.get("Id"), "Code": r.get("code", "InternalError"),
                           "Message": r.get("message", "injected"),
                           "SenderFault": "true" if r.get("sender_fault", False) else "false"})
        with self.lock:
            self.stats["faulted_requests"] += 1
            self.stats["entries_forwarded"] += len(rest)
            for e, i in victims:
                self.stats["injected"].append({"action": req.action, "Id": e.get("Id"),
                                               "MessageBody": e.get("Message"),
                                               "SenderFault": bool(rules[i].get("sender_fault", False)),
                                               "entries": len(entries), "time": now})
            if self.remaining is not None:
                self.remaining -= 1
            self.write_stats()
        proxylib.log(NAME, "fail-entries: forwarded %d of %d PublishBatch entries, failed Ids %s" %
                     (len(rest), len(entries), [e.get("Id") for e, _ in victims]))
        return proxylib.Response(200, querylib.batch_response(ok, failed), [("Content-Type", "text/xml")])

    def fail_entries(self, req, p):
        if req.action == "PublishBatch":
            return self.fail_entries_sns(req, p)
        try:
            doc = json.loads(req.body)
            entries = doc["Entries"]
            assert isinstance(entries, list)
        except (ValueError, KeyError, AssertionError, TypeError):
            return self.pass_through(req)
        victims, rest, used = [], [], set()
        with self.lock:
            for e in entries:
                i = self.pick_rule(p, str(e.get("MessageBody", "")), e.get("Id"))
                if i is not None:
                    used.add(i)
                (victims if i is not None else rest).append((e, p["rules"][i] if i is not None else None))
            for i in used:
                if i < len(self.rule_left) and self.rule_left[i] is not None:
                    self.rule_left[i] -= 1
        if not victims:
            return self.pass_through(req)
        answer, hdrs = {"Successful": []}, [("Content-Type", "application/x-amz-json-1.0")]
        if rest:
            body = json.dumps(dict(doc, Entries=[e for e, _ in rest])).encode("utf-8")
            try:
                resp = proxylib.forward(self.a.upstream, req, body=body, timeout=self.a.upstream_timeout)
            except Exception as ex:
                proxylib.log(NAME, "upstream error for %s: %r" % (req.action, ex))
                return proxylib.json_response(502, {"__type": "ProxyUpstreamError", "message": repr(ex)})
            if resp.status != 200:
                return resp
            try:
                answer = json.loads(resp.body or b"{}")
            except ValueError:
                return resp
            hdrs = [(k, v) for k, v in resp.headers if k.lower() not in ("x-amz-crc32",)]
        answer.setdefault("Successful", [])
        failed = list(answer.get("Failed") or [])
        now = time.time()
        for e, r in victims:
            failed.append({"Id": e.get("Id"), "SenderFault": bool(r.get("sender_fault", False)),
                           "Code": r.get("code", "InternalError"), "Message": r.get("message", "injected")})
        answer["Failed"] = failed
        with self.lock:
            self.stats["faulted_requests"] += 1
            self.stats["entries_forwarded"] += len(rest)
            for e, r in victims:
                self.stats["injected"].append({"action": req.action, "Id": e.get("Id"),
                                               "MessageBody": e.get("MessageBody"),
                                               "SenderFault": bool(r.get("sender_fault", False)),
                                               "entries": len(entries), "time": now})
            if self.remaining is not None:
                self.remaining -= 1
            self.write_stats()
        proxylib.log(NAME, "fail-entries: forwarded %d of %d entries, failed Ids %s" %
                     (len(rest), len(entries), [e.get("Id") for e, _ in victims]))
        return proxylib.Response(200, json.dumps(answer), hdrs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="SQS emulator base URL, http://127.0.0.1:PORT")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port (see --port-file)")
    ap.add_argument("--port-file", default=None)
    ap.add_argument("--stats", default=None)
    ap.add_argument("--mode", default=None, help='first mode, e.g. {"mode":"partial-batch"}')
    ap.add_argument("--upstream-timeout", type=float, default=60.0)
    a = ap.parse_args()
    f = Faults(a)
    f.write_stats()
    proxylib.serve(NAME, a.host, a.port, a.port_file, f.hook, "-> %s" % a.upstream)


if __name__ == "__main__":
    main()
