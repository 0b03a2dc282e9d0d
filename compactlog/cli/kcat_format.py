"""kcat's ``-f`` output format for ``consume --format``: a format string of literal text and
``%`` tokens, each record printed through it (kcat's ``fmt_parse`` and ``fmt_msg_output_str``).

Tokens, as kcat has them: ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key, ``%K`` key
length (-1 for a null key), ``%s`` value, ``%S`` value length (-1 for null), ``%R`` the value
length as a big-endian signed 32-bit integer (binary), ``%T`` timestamp in ms (-1 when the record
has none), ``%h`` headers as ``name=value`` joined by commas (a null value printed ``NULL``), and
``%%`` a percent sign. Any other letter after ``%`` is refused, as kcat refuses it ("Unsupported
formatter"). A null or empty key or value prints nothing, as in kcat.

Escapes in the literal text, as kcat converts them: ``\\n``, ``\\r``, ``\\t``; ``\\x`` followed by hex
digits and ``\\`` followed by a number (C's ``strtoul`` with base 0: decimal, ``0`` octal, ``0x``
hex) give that byte (the low 8 bits); any other escaped character stands for itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CompactlogError

TOKENS = "tpokKsSRTh"
_HEX = "0123456789abcdefABCDEF"


class FormatError(CompactlogError):
    """A format string kcat would refuse."""


@dataclass(frozen=True)
class KcatFormat:
    """A parsed format: literal bytes and one-letter tokens, in order."""
    parts: tuple[tuple[str, bytes], ...]     # ("lit", bytes) or (token letter, b"")

    def render(self, topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
               value: bytes | None, headers) -> bytes:
        out = []
        for kind, text in self.parts:
            if kind == "lit":
                out.append(text)
            elif kind == "s":
                out.append(value or b"")
            elif kind == "k":
                out.append(key or b"")
            elif kind == "o":
                out.append(b"%d" % offset)
            elif kind == "p":
                out.append(b"%d" % partition)
            elif kind == "t":
                out.append(topic.encode("utf-8"))
            elif kind == "T":
                out.append(b"%d" % timestamp)
            elif kind == "S":
                out.append(b"%d" % (-1 if value is None else len(value)))
            elif kind == "K":
                out.append(b"%d" % (-1 if key is None else len(key)))
            elif kind == "R":
                out.append(struct.pack(">i", -1 if value is None else len(value)))
            elif kind == "h":
                out.append(headers_text(headers))
        return b"".join(out)


def headers_text(headers) -> bytes:
    """``a=1,b=NULL,c=``: kcat's print_headers."""
    if not headers:
        return b""
    return b",".join(name.encode("utf-8") + b"=" + (b"NULL" if value is None else value)
                     for name, value in headers)


def parse(fmt: str) -> KcatFormat:
    """The format's parts; FormatError for a token kcat does not have or a ``%`` at the end."""
    parts: list[tuple[str, bytes]] = []
    i = 0
    while i < len(fmt):
        cut = fmt.find("%", i)
        if cut < 0:
            parts.append(("lit", unescape(fmt[i:])))
            break
        if cut > i:
            parts.append(("lit", unescape(fmt[i:cut])))
        if cut + 1 >= len(fmt):
            raise FormatError(f"--format {fmt!r}: a % at the end names no field (kcat: \"Empty formatter\")")
        letter = fmt[cut + 1]
        if letter == "%":
            parts.append(("lit", b"%"))
        elif letter in TOKENS:
            parts.append((letter, b""))
        else:
            raise FormatError(f"--format {fmt!r}: unsupported formatter %{letter} (kcat's: "
                              f"{' '.join('%' + t for t in TOKENS)} and %%)")
        i = cut + 2
    return KcatFormat(tuple(_merged(parts)))


def _merged(parts):
    """Adjacent literals as one (fewer pieces to join per record)."""
    out: list[tuple[str, bytes]] = []
    for kind, text in parts:
        if kind == "lit" and out and out[-1][0] == "lit":
            out[-1] = ("lit", out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def unescape(text: str) -> bytes:
    """kcat's conversion of ``\\`` sequences in the literal parts of a format."""
    raw = text.encode("utf-8")
    out = bytearray()
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        if c != 0x5C or i + 1 >= n:           # not a backslash, or a backslash at the very end
            out.append(c)
            i += 1
            continue
        e = chr(raw[i + 1])
        i += 2
        if e in "ntr":
            out.append({"n": 10, "t": 9, "r": 13}[e])
        elif e == "x":
            j = i
            while j < n and chr(raw[j]) in _HEX:
                j += 1
            if j == i:
                out.append(ord("x"))
            else:
                out.append(int(raw[i:j], 16) & 0xFF)
                i = j
        elif e in "0123456789":
            value, i = _c_number(raw, i - 1)
            out.append(value & 0xFF)
        else:
            out.append(ord(e))
    return bytes(out)


def _c_number(raw: bytes, i: int) -> tuple[int, int]:
    """strtoul(s, &end, 0) from ``raw[i]`` (a digit): (value, index after it)."""
    n = len(raw)
    if raw[i:i + 2] in (b"0x", b"0X") and i + 2 < n and chr(raw[i + 2]) in _HEX:
        j = i + 2
        while j < n and chr(raw[j]) in _HEX:
            j += 1
        return int(raw[i + 2:j], 16), j
    if raw[i] == ord("0"):
        j = i + 1
        while j < n and chr(raw[j]) in "01234567":
            j += 1
        return int(raw[i:j], 8), j
    j = i
    while j < n and chr(raw[j]) in "0123456789":
        j += 1
    return int(raw[i:j]), j
