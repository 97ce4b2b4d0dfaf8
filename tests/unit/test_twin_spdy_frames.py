"""SPDY/3.1 frames as kubectl's spdystream writes them (header blocks zlib-compressed with the SPDY/3
dictionary, one context per session), read back by the twin's framer whatever the message boundaries."""

from __future__ import annotations

import struct
import zlib

from drills.twin.api import spdy
from drills.twin.api.spdy_dictionary import HEADER_DICTIONARY


class _Client:
    """The writing side of spdystream's Framer: SYN_STREAM with a header block, DATA frames."""

    def __init__(self):
        self.deflate = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, HEADER_DICTIONARY)

    def syn_stream(self, sid: int, headers: dict[str, str]) -> bytes:
        block = struct.pack(">I", len(headers))
        for k, v in headers.items():
            block += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        block = self.deflate.compress(block) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack(">IIBB", sid, 0, 0, 0) + block
        return struct.pack(">HHI", 0x8003, spdy.SYN_STREAM, len(payload)) + payload


def test_stream_headers_data_and_ping_across_message_boundaries():
    client, server = _Client(), spdy.Session()
    wire = (client.syn_stream(1, {"streamtype": "error", "port": "8000", "requestid": "0"})
            + client.syn_stream(3, {"streamtype": "data", "port": "8000", "requestid": "0"})
            + server.data(3, b"GET / HTTP/1.1\r\n\r\n") + server.data(3, b"", fin=True) + server.ping(7))
    frames = [f for i in range(0, len(wire), 5) for f in server.feed(wire[i:i + 5])]
    assert [(f.type, f.stream) for f in frames] == [(spdy.SYN_STREAM, 1), (spdy.SYN_STREAM, 3), (spdy.DATA, 3),
                                                    (spdy.DATA, 3), (spdy.PING, 0)]
    assert frames[0].headers == {"streamtype": "error", "port": "8000", "requestid": "0"}
    assert frames[1].headers["streamtype"] == "data"  # the second block decodes with the session's shared context
    assert frames[2].data == b"GET / HTTP/1.1\r\n\r\n" and not frames[2].fin and frames[3].fin
    assert frames[4].value == 7


def test_a_syn_reply_decodes_with_the_dictionary_as_spdystream_reads_it():
    reply = spdy.Session().syn_reply(5)
    version, ftype, flags_length = struct.unpack(">HHI", reply[:8])
    assert (version, ftype, flags_length & 0xFFFFFF) == (0x8003, spdy.SYN_REPLY, len(reply) - 8)
    assert struct.unpack(">I", reply[8:12])[0] == 5
    block = zlib.decompressobj(zdict=HEADER_DICTIONARY).decompress(reply[12:])
    assert block == struct.pack(">I", 0)
