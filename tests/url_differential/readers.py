"""Reads URLs (one JSON string per line) on stdin; writes, per URL, one JSON object with the
host each Python reader names: `urlsplit` (urllib.parse) and `urllib3` (urllib3.util.parse_url).

A host is given the way the client would send it on the wire: lowercase, and an
internationalised name encoded with Python's own `idna` codec (IDNA 2003, what http.client
uses). A reader that rejects the URL gives {"error": "..."}.
"""

import json
import sys
import urllib.parse

import urllib3.util


def wire(host):
    if host is None:
        return {"error": "no host"}
    host = host.lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as e:
            return {"error": f"idna: {e}"}
    return {"host": host}


def read(reader, url):
    try:
        return wire(reader(url))
    except Exception as e:  # noqa: BLE001 - any refusal is an answer
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    for line in sys.stdin:
        url = json.loads(line)
        out = {
            "urlsplit": read(lambda u: urllib.parse.urlsplit(u).hostname, url),
            "urllib3": read(lambda u: urllib3.util.parse_url(u).host, url),
        }
        sys.stdout.write(json.dumps(out) + "\n")


main()
