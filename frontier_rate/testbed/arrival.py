"""When a request reached a test-bed host: the kernel's receive time of its first bytes.

The test-bed serves each connection in a Python thread. Under CPU load a thread may run tens
of milliseconds after its request arrived (the GIL, other threads, other processes), so a clock
read in the handler puts two requests closer or further apart than they reached the host, and
the politeness checks measured that jitter as violations (on the loaded 2-core VM, 6 demo
``--signals`` runs of 2 crawls each: one crawl with 7 gaps under the delay, down to 0.03 s
under 0.2 s; CI's run of the same test saw one). With kernel stamps, 8 runs of the same form
under the same load: none.

With ``SO_TIMESTAMPNS`` (Linux, socket(7)) the kernel stamps each received packet with the
wall clock; ``ArrivalReader`` reads the connection through ``recvmsg`` and keeps the stamp of the
first chunk of each request. Elsewhere, or where the stamp is missing, the handler's own clock
reading stands.

HTTP/1.1 clients without pipelining (Scrapy's) send a request only after the previous answer,
so a request's first chunk is never merged with the previous request's bytes.
"""

from __future__ import annotations

import io
import socket
import struct

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
"""Linux's value (asm-generic/socket.h); Python's socket module does not name it."""
_TIMESPEC = struct.Struct("@qq")


def stamp_arrivals(sock: socket.socket) -> bool:
    """Ask the kernel to stamp packets received on ``sock`` (a listening socket's accepted
    connections inherit it). False where the system does not offer it."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


class ArrivalReader(io.RawIOBase):
    """A connection's raw reader that notes the kernel's receive time of the first chunk read
    since ``first_arrival`` was last set to None (a Unix time, or None)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.first_arrival: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        size, ancillary, _flags, _address = self.sock.recvmsg_into([buffer], 64)
        if self.first_arrival is None and size:
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
                    seconds, nanoseconds = _TIMESPEC.unpack_from(data)
                    self.first_arrival = seconds + nanoseconds / 1e9
        return size
