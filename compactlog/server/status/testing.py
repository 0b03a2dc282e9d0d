"""A throwaway HTTP server for the status routes, for tests that have no broker listener: the
routes of ``routes.status_routes`` on a loopback port the system chooses, in a daemon thread."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(routes):
    """``with serving(status_routes(state)) as base_url: ...`` (``http://127.0.0.1:PORT``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            handler = routes.get(self.path.split("?", 1)[0])
            if handler is None:
                self.send_error(404)
                return
            response = handler()
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(response.body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="status-test-http")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
