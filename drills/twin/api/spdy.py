"""SPDY/3.1 framing, the subset a server of kubectl's streams needs (moby/spdystream's wire format): control
frames SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE and data frames;
header blocks zlib-compressed with the SPDY/3 dictionary, one compression context per direction for the
whole session. `Session.feed` takes bytes as they arrive (frames may span messages) and yields frames.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterator

from drills.twin.api.spdy_dictionary import HEADER_DICTIONARY

__all__ = ["Frame", "Session", "SYN_STREAM", "SYN_REPLY", "RST_STREAM", "PING", "GOAWAY", "DATA", "FLAG_FIN"]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
DATA = 0  # not a control frame type: a data frame
FLAG_FIN = 0x01
RST_CANCEL = 5


class SpdyError(Exception):
    pass


@dataclass
class Frame:
    type: int  # a control type, or DATA
    stream: int = 0
    flags: int = 0
    data: bytes = b""  # a data frame's payload
    headers: dict[str, str] = field(default_factory=dict)  # SYN_STREAM, SYN_REPLY, HEADERS
    value: int = 0  # PING id, RST_STREAM / GOAWAY status

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Session:
    """One SPDY session's framer: its header (de)compression contexts and the bytes not yet framed."""

    def __init__(self) -> None:
        self._buf = b""
        self._inflate = zlib.decompressobj(zdict=HEADER_DICTIONARY)
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, HEADER_DICTIONARY)

    def feed(self, data: bytes) -> Iterator[Frame]:
        self._buf += data
        while len(self._buf) >= 8:
            (length,) = struct.unpack(">I", b"\0" + self._buf[5:8])
            if len(self._buf) < 8 + length:
                return
            head, payload, self._buf = self._buf[:8], self._buf[8:8 + length], self._buf[8 + length:]
            flags = head[4]
            if head[0] & 0x80:
                yield self._control(struct.unpack(">H", head[2:4])[0], flags, payload)
            else:
                yield Frame(DATA, struct.unpack(">I", head[:4])[0] & 0x7FFFFFFF, flags, payload)

    def _control(self, ftype: int, flags: int, payload: bytes) -> Frame:
        if ftype == SYN_STREAM:
            (sid,) = struct.unpack(">I", payload[:4])
            return Frame(ftype, sid & 0x7FFFFFFF, flags, headers=self._headers(payload[10:]))
        if ftype in (SYN_REPLY, HEADERS):
            (sid,) = struct.unpack(">I", payload[:4])
            return Frame(ftype, sid & 0x7FFFFFFF, flags, headers=self._headers(payload[4:]))
        if ftype in (RST_STREAM, WINDOW_UPDATE):
            sid, value = struct.unpack(">II", payload[:8])
            return Frame(ftype, sid & 0x7FFFFFFF, flags, value=value)
        if ftype == PING:
            return Frame(ftype, flags=flags, value=struct.unpack(">I", payload[:4])[0])
        if ftype == GOAWAY:
            last, status = struct.unpack(">II", payload[:8])
            return Frame(ftype, last & 0x7FFFFFFF, flags, value=status)
        return Frame(ftype, flags=flags)  # SETTINGS and anything newer: nothing the server acts on

    def _headers(self, block: bytes) -> dict[str, str]:
        raw = self._inflate.decompress(block)
        (count,) = struct.unpack(">I", raw[:4])
        pos, out = 4, {}
        for _ in range(count):
            (n,) = struct.unpack(">I", raw[pos:pos + 4])
            name = raw[pos + 4:pos + 4 + n].decode()
            pos += 4 + n
            (n,) = struct.unpack(">I", raw[pos:pos + 4])
            out[name] = raw[pos + 4:pos + 4 + n].decode()
            pos += 4 + n
        return out

    # -- frames the server sends -----------------------------------------------------------------------
    def syn_reply(self, stream: int, headers: dict[str, str] | None = None) -> bytes:
        block = struct.pack(">I", len(headers or {}))
        for name, value in (headers or {}).items():
            block += struct.pack(">I", len(name)) + name.lower().encode() + struct.pack(">I", len(value)) + value.encode()
        compressed = self._deflate.compress(block) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        return _control(SYN_REPLY, 0, struct.pack(">I", stream) + compressed)

    @staticmethod
    def data(stream: int, data: bytes, fin: bool = False) -> bytes:
        return struct.pack(">II", stream, (FLAG_FIN if fin else 0) << 24 | len(data)) + data

    @staticmethod
    def ping(ping_id: int) -> bytes:
        return _control(PING, 0, struct.pack(">I", ping_id))

    @staticmethod
    def rst_stream(stream: int, status: int = RST_CANCEL) -> bytes:
        return _control(RST_STREAM, 0, struct.pack(">II", stream, status))


def _control(ftype: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, ftype, flags << 24 | len(payload)) + payload
