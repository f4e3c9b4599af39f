"""A small in-process OAuth 2.0 issuer for the client-credentials flow, on a
free loopback port (http.server on its own thread):

    GET  /.well-known/openid-configuration  -> {"issuer": ..., "token_endpoint": <base>/oauth/token}
    POST /oauth/token (a form: grant_type=client_credentials, client_id, client_secret, audience, scope)
         -> 200 {"access_token": <token_for(client_id)>, "token_type": "Bearer", "expires_in": lifetime}
         -> 401 {"error": "invalid_client"} for an unknown client or a wrong secret

``token_for(client_id, expires_at)`` makes the access token (the tests sign
a JWT with the broker's token secret, so the broker accepts it). Every token
request's form is recorded in ``token_requests``, every token handed out in ``issued``; ``lifetime`` and
``expires_in`` (None: left out of the answer) may be changed between requests.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs

from .ports import LOOPBACK

__all__ = ["OAuth2Issuer"]


class OAuth2Issuer:
    def __init__(self, clients: dict[str, str], token_for: Callable[[str, float], str], lifetime: int = 3600) -> None:
        self.clients = dict(clients)
        self.token_for = token_for
        self.lifetime = lifetime
        self.send_expires_in = True
        self.token_requests: list[dict[str, str]] = []
        self.issued: list[str] = []
        self.discoveries = 0
        self._lock = threading.Lock()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                issuer._get(self)

            def do_POST(self) -> None:  # noqa: N802
                issuer._post(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
                pass

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="oauth2-issuer", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return "http://%s:%d" % (host, port)

    @property
    def token_endpoint(self) -> str:
        return self.url + "/oauth/token"

    def token_count(self) -> int:
        with self._lock:
            return len(self.token_requests)

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _get(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path != "/.well-known/openid-configuration":
            self._answer(handler, 404, {"error": "not_found"})
            return
        with self._lock:
            self.discoveries += 1
        self._answer(handler, 200, {"issuer": self.url, "token_endpoint": self.token_endpoint})

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length).decode()
        if handler.path != "/oauth/token":
            self._answer(handler, 404, {"error": "not_found"})
            return
        form = {key: values[0] for key, values in parse_qs(raw, keep_blank_values=True).items()}
        form["content_type"] = handler.headers.get("Content-Type", "")
        with self._lock:
            self.token_requests.append(form)
            lifetime, send_expires_in = self.lifetime, self.send_expires_in
        client_id = form.get("client_id", "")
        if form.get("grant_type") != "client_credentials":
            self._answer(handler, 400, {"error": "unsupported_grant_type"})
        elif client_id not in self.clients or self.clients[client_id] != form.get("client_secret"):
            self._answer(handler, 401, {"error": "invalid_client"})
        else:
            token = self.token_for(client_id, time.time() + lifetime)
            with self._lock:
                self.issued.append(token)
            body: dict = {"access_token": token, "token_type": "Bearer"}
            if send_expires_in:
                body["expires_in"] = lifetime
            self._answer(handler, 200, body)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10.0)

    def __enter__(self) -> "OAuth2Issuer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
