# A small in-process auth server speaking nsqd's auth HTTP protocol
# (nsqd --auth-http-address=127.0.0.1:<port>):
#
#   GET /auth?remote_ip=...&tls=true|false&secret=...&common_name=...
#   200 {"ttl": s, "identity": "...", "identity_url": "...",
#        "authorizations": [{"topic": regex, "channels": [regex...], "permissions": ["subscribe", "publish"]}]}
#
# nsqd answers AUTH with E_AUTH_FAILED when the server errs (non-200, bad JSON,
# ttl <= 0) and with E_UNAUTHORIZED when "authorizations" is empty; a SUB or PUB
# that no authorization matches gets E_UNAUTHORIZED. For a PUB nsqd matches the
# channel regexes against "", so publish-only grants need a channel regex like ".*".
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["AuthServer", "grant"]


def grant(topic: str = ".*", channels: tuple[str, ...] = (".*",), permissions: tuple[str, ...] = ("subscribe", "publish")) -> dict:
    """One entry of "authorizations"."""
    return {"topic": topic, "channels": list(channels), "permissions": list(permissions)}


class AuthServer:
    """``AuthServer()`` starts listening on a free loopback port at once.

    ``allow(secret, *grants, identity=..)`` answers that secret with the grants
    (no grants: an empty list, which nsqd reports as E_UNAUTHORIZED);
    ``fail(secret, status)`` answers it with an HTTP error (nsqd: E_AUTH_FAILED).
    Unknown secrets get 403. Every request is recorded in ``requests`` (dicts of
    the query parameters) for assertions.
    """

    def __init__(self, ttl: int = 3600) -> None:
        self.ttl = ttl
        self.requests: list[dict[str, str]] = []
        self._answers: dict[str, tuple[int, Any]] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                owner._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self._httpd.server_address[:2]
        return "%s:%d" % (host, port)

    def allow(
        self,
        secret: str,
        *grants: dict,
        identity: str = "test-user",
        identity_url: str = "https://example.invalid/users/test-user",
        ttl: int | None = None,
    ) -> None:
        body = {
            "ttl": self.ttl if ttl is None else ttl,
            "identity": identity,
            "identity_url": identity_url,
            "authorizations": list(grants),
        }
        with self._lock:
            self._answers[secret] = (200, body)

    def fail(self, secret: str, status: int = 403) -> None:
        with self._lock:
            self._answers[secret] = (status, {"message": "NOT_AUTHORIZED"})

    def requests_for(self, secret: str) -> list[dict[str, str]]:
        with self._lock:
            return [r for r in self.requests if r.get("secret") == secret]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        with self._lock:
            self.requests.append(query)
            if url.path != "/auth":
                status, body = 404, {"message": "NOT_FOUND"}
            else:
                status, body = self._answers.get(query.get("secret", ""), (403, {"message": "NOT_AUTHORIZED"}))
        payload = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> "AuthServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
