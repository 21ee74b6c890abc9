"""rawhttp.py -- one raw HTTP/1.1 exchange for the framing scenarios
(tests/integration/http-strict.sh, admin-strict.sh): send parts on one
connection, read until the server closes or the wait is over, and print
one line:  STATUSES CTYPE CODE CLOSED VERSION
STATUSES the answers' status codes in order (comma separated, - if none),
CTYPE and CODE the last answer's Content-Type and JSON "error" (- when it
has no {"error", "message"}), CLOSED 1 if the server closed the
connection, VERSION the last answer's HTTP version.  Loopback only."""
import json, socket, time


def run(port, parts, wait=5.0):
    """parts: bytes to send, or a float: seconds to read before the next."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.2)
    state = {"data": b"", "closed": 0}

    def pump(secs):
        end = time.time() + secs
        while time.time() < end and not state["closed"]:
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionError:
                state["closed"] = 1
                break
            if not d:
                state["closed"] = 1
            state["data"] += d

    for p in parts:
        if isinstance(p, float):
            pump(p)
        else:
            try:
                s.sendall(p)
            except ConnectionError:
                pass
    pump(wait)
    answers, rest = [], state["data"]
    while rest.startswith(b"HTTP/"):
        head, _, rest = rest.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        hdr = {k.strip().lower(): v.strip() for k, _, v in
               (l.partition(b":") for l in lines[1:])}
        n = int(hdr.get(b"content-length", b"0"))
        body, rest = rest[:n], rest[n:]
        first = lines[0].split(b" ")
        answers.append((first[1].decode(),
                        hdr.get(b"content-type", b"-").decode(), body,
                        first[0].decode()))
    code = "-"
    if answers:
        try:
            j = json.loads(answers[-1][2])
            if isinstance(j.get("error"), str) and \
                    isinstance(j.get("message"), str):
                code = j["error"]
        except Exception:
            pass
    print(",".join(a[0] for a in answers) or "-",
          answers[-1][1].split(";")[0] if answers else "-", code,
          state["closed"], answers[-1][3] if answers else "-")
