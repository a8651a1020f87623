"""Loopback HTTP services for the bundle and decision-log tests, Python standard library only.

    python3 services.py PORT ROOT [CERT KEY]

Serves GET /NAME from folder ROOT with a strong ETag (the SHA-256 of the body) and answers
304 to a matching If-None-Match, as object storage does. POST /logs receives decision-log
batches (gzip JSON arrays) and keeps them; GET /__logs returns every event received.
POST /__fail?n=N makes the next N batches fail with 500. POST /v1/traces receives OTLP/HTTP
JSON exports; GET /__traces returns them. GET /__stats counts answers by status. GET /__redirect?to=URL answers 302 to URL. POST
/__etag?value=V makes every file's ETag V, whatever its bytes (a server that reuses ETags).
With CERT and KEY (PEM files) it speaks HTTPS. Prints `listening PORT` once bound (PORT 0
picks a free one).
"""

import gzip
import hashlib
import json
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

ROOT = sys.argv[2]
LOCK = threading.Lock()
STATS = {}
EVENTS = []
BATCHES = []
FAIL = {"n": 0}
TRACES = []
ETAG = {"fixed": None}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        with LOCK:
            STATS[str(status)] = STATS.get(str(status), 0) + 1
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/__stats":
            with LOCK:
                body = json.dumps(STATS).encode()
            return self.reply(200, body, [("Content-Type", "application/json")])
        if url.path == "/__traces":
            with LOCK:
                body = json.dumps(TRACES).encode()
            return self.reply(200, body, [("Content-Type", "application/json")])
        if url.path == "/__logs":
            with LOCK:
                body = json.dumps({"events": EVENTS, "batches": BATCHES}).encode()
            return self.reply(200, body, [("Content-Type", "application/json")])
        if url.path == "/__redirect":
            return self.reply(302, b"", [("Location", parse_qs(url.query)["to"][0])])
        name = os.path.basename(url.path)
        path = os.path.join(ROOT, name)
        if not name or not os.path.isfile(path):
            return self.reply(404, b"not found")
        with open(path, "rb") as f:
            body = f.read()
        with LOCK:
            etag = ETAG["fixed"] or '"' + hashlib.sha256(body).hexdigest() + '"'
        if self.headers.get("If-None-Match") == etag:
            return self.reply(304, b"", [("ETag", etag)])
        self.reply(200, body, [("ETag", etag), ("Content-Type", "application/gzip")])

    def do_POST(self):
        url = urlparse(self.path)
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if url.path == "/__etag":
            with LOCK:
                ETAG["fixed"] = parse_qs(url.query)["value"][0]
            return self.reply(204)
        if url.path == "/__fail":
            with LOCK:
                FAIL["n"] = int(parse_qs(url.query)["n"][0])
            return self.reply(204)
        if url.path == "/v1/traces":
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with LOCK:
                TRACES.append(
                    {"type": self.headers.get("Content-Type"), "body": json.loads(body)}
                )
            return self.reply(200, b"{}", [("Content-Type", "application/json")])
        if url.path != "/logs":
            return self.reply(404, b"not found")
        with LOCK:
            failing = FAIL["n"] > 0
            if failing:
                FAIL["n"] -= 1
        if failing:
            return self.reply(500, b"failing on purpose")
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        events = json.loads(body)
        with LOCK:
            EVENTS.extend(events)
            BATCHES.append(
                {
                    "count": len(events),
                    "encoding": self.headers.get("Content-Encoding"),
                    "type": self.headers.get("Content-Type"),
                }
            )
        self.reply(204)


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
if len(sys.argv) > 4:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = tls.wrap_socket(server.socket, server_side=True)
print("listening", server.server_address[1], flush=True)
server.serve_forever()
