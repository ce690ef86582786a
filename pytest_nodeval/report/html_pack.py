"""How report.html carries its data compressed, and how the page (report.js) unpacks it.

Every packed element is a JSON string of base64, inert inside `<script>` whatever the data.

- The run's data (the scenarios table) is gzip (`pack_text`): the page inflates it once, on load.
- A scenario's timelines are deflate against a preset dictionary that the whole page
  shares (`Dictionary`): the start of the first scenario's timelines. Scenarios of one
  suite have much in common (the agent's system prompt and tool definitions, the shape of
  their events, the words of their domain); with the dictionary each scenario's block
  refers back to it instead of carrying it again. The browser's `DecompressionStream` has
  no preset dictionaries, so the page feeds it a zlib stream made of the dictionary as one
  stored (uncompressed) deflate block followed by the scenario's compressed data, and drops
  the dictionary from the output. The scenario's Adler-32 covers both, so the stream is
  checked as any other (`zlib_stream` builds the same bytes here).
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib

DICTIONARY_SIZE = 32_000
"""Characters of the first scenario's timelines used as the dictionary: deflate looks back
at most 32 KB (zlib's compressor somewhat less: 32,768 - 262)."""
LEVEL = 9
"""zlib's best: costs little more time than the default on JSON text, and the page is read
many times."""
_ZLIB_HEADER = bytes([0x78, 0x01])
"""Deflate, 32 KB window, no preset dictionary flag (the dictionary travels as data instead)."""


def pack_text(text: str) -> str:
    """ASCII text as the JSON string of its gzip in base64 (what `unpack_text` and the page
    read)."""
    return _quoted(gzip.compress(text.encode("ascii"), compresslevel=LEVEL, mtime=0))


def unpack_text(element_text: str) -> str:
    return gzip.decompress(_unquoted(element_text)).decode("ascii")


class Dictionary:
    """The page's shared deflate dictionary, and the blocks compressed against it."""

    def __init__(self, sample: str) -> None:
        self.data = sample[:DICTIONARY_SIZE].encode("ascii")
        self._adler = zlib.adler32(self.data)

    def element(self) -> str:
        """The dictionary as the page embeds it (gzip, like the run's data)."""
        return _quoted(gzip.compress(self.data, compresslevel=LEVEL, mtime=0))

    def pack(self, text: str) -> str:
        """ASCII text as raw deflate that may refer back into the dictionary, then the
        Adler-32 of dictionary and text together (the end of the zlib stream the page builds)."""
        raw = text.encode("ascii")
        compressor = zlib.compressobj(
            LEVEL, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, self.data
        )
        packed = compressor.compress(raw) + compressor.flush()
        return _quoted(packed + zlib.adler32(raw, self._adler).to_bytes(4, "big"))

    @classmethod
    def from_element(cls, element_text: str) -> Dictionary:
        return cls(gzip.decompress(_unquoted(element_text)).decode("ascii"))

    def unpack(self, element_text: str) -> str:
        """What `pack` packed, read back the way the page does (a zlib stream checked end to
        end)."""
        whole = zlib.decompress(zlib_stream(self.data, _unquoted(element_text)))
        return whole[len(self.data) :].decode("ascii")


def zlib_stream(dictionary: bytes, packed: bytes) -> bytes:
    """The stream report.js hands to `DecompressionStream("deflate")`: the dictionary as a
    stored block (not the last one), then a block's deflate data and checksum."""
    n = len(dictionary)
    if n > 0xFFFF:
        raise ValueError(f"a stored deflate block holds at most 65,535 bytes, not {n:,}")
    return (
        _ZLIB_HEADER
        + bytes([0, n & 0xFF, n >> 8, ~n & 0xFF, (~n >> 8) & 0xFF])
        + dictionary
        + packed
    )


def _quoted(data: bytes) -> str:
    return '"' + base64.b64encode(data).decode("ascii") + '"'


def _unquoted(element_text: str) -> bytes:
    return base64.b64decode(json.loads(element_text))
