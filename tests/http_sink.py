"""A local HTTP endpoint recording POSTs, for the Goldmane emitter's tests (``from http_sink
import Sink``). It answers with the statuses queued in ``statuses``, then 200; port chosen by
the kernel.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink:
    """A local HTTP endpoint answering with the queued statuses (then 200), recording POSTs."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.posts: list[tuple[str, bytes]] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                sink.posts.append((self.headers["Content-Type"], body))
                status = sink.statuses.pop(0) if sink.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/flows/bulk"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
