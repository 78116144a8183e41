"""Request arrival times as the kernel saw them: a ``tcpdump`` capture of the GET lines
sent to the site's hosts, read without any library.

The site's own log stamps a request when its handler thread runs; on a loaded machine
that thread may wake hundreds of ms late, and two requests sent 0.3 s apart are then
logged a few ms apart. The capture's timestamps are taken when the packet crosses the
loopback interface, so the gaps it shows are the gaps the crawlers made.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

SNAP = 512
"""Bytes kept of each packet: the request line and the first headers."""


def start_capture(path: Path, net: str, port: int) -> subprocess.Popen | None:
    """Capture every GET sent to ``net`` (e.g. ``127.0.3.0/24``) and ``port`` on ``lo``;
    None when tcpdump is not installed (or may not capture)."""
    binary = shutil.which("tcpdump")
    if binary is None:
        return None
    expression = f"dst net {net} and dst port {port} and tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420"
    proc = subprocess.Popen([binary, "-i", "lo", "-n", "-s", str(SNAP), "-U", "-w", str(path),
                             expression], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        proc.wait(timeout=1.0)  # exits at once when it may not capture
    except subprocess.TimeoutExpired:
        return proc
    return None


def read_capture(path: Path) -> list[dict[str, Any]]:
    """Each captured GET: wall time, destination host, path, User-Agent (when kept)."""
    data = path.read_bytes() if path.exists() else b""
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian, nano = {0xA1B2C3D4: ("<", False), 0xA1B23C4D: ("<", True),
                    0xD4C3B2A1: (">", False), 0x4D3CB2A1: (">", True)}[magic]
    link = struct.unpack(endian + "I", data[20:24])[0]
    offset, found = 24, []
    while offset + 16 <= len(data):
        sec, frac, kept, _ = struct.unpack(endian + "IIII", data[offset:offset + 16])
        packet = data[offset + 16:offset + 16 + kept]
        offset += 16 + kept
        ip = packet[14:] if link == 1 else packet[4:]  # Ethernet, or BSD loopback
        if len(ip) < 20 or ip[0] >> 4 != 4:
            continue
        tcp = ip[(ip[0] & 0x0F) * 4:]
        if len(tcp) < 20:
            continue
        payload = tcp[(tcp[12] >> 4) * 4:]
        if not payload.startswith(b"GET "):
            continue
        lines = payload.split(b"\r\n")
        agent = next((line.split(b":", 1)[1].strip().decode("latin-1") for line in lines[1:]
                      if line.lower().startswith(b"user-agent:")), None)
        found.append({"wall_time": sec + frac / (1e9 if nano else 1e6),
                      "host": ".".join(str(b) for b in ip[16:20]),
                      "port": struct.unpack("!H", tcp[2:4])[0],
                      "path": lines[0].split(b" ")[1].decode("latin-1"), "agent": agent})
    return found
