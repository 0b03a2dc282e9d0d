"""Java's hash codes and ``HashMap``/``HashSet`` iteration order, for Kafka's exact assignments.

Kafka's ``UniformHomogeneousAssignmentBuilder`` walks members, topics and partitions in the order
Java's hash tables iterate them, so the same inputs give Kafka's assignment only if we iterate as
they do: ``java.util.HashMap`` (JDK 8+) keeps ``2^k`` buckets, spreads a key's ``hashCode`` as
``h ^ (h >>> 16)``, puts it in bucket ``spread & (capacity - 1)``, appends within a bucket, doubles
the table when the size passes ``0.75 * capacity`` (a split keeps each bucket's relative order) and
iterates bucket by bucket. Buckets of 8+ colliding keys become trees (ordered differently); with
Kafka's tiny maps that never happens in practice and is not modelled.

Hash codes: ``String.hashCode`` (``record.consumer_offsets.java_string_hash``), Kafka's
``Uuid.hashCode`` (the xor of the two 32-bit halves of ``msb ^ lsb``) and ``Integer.hashCode`` (the
value). Topic ids are ``uuid.UUID``; ``kafka_uuid``/``uuid_text`` convert Kafka's base64 text form.
"""

from __future__ import annotations

import base64
import uuid

from ....record.consumer_offsets import java_string_hash

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _signed32(v: int) -> int:
    v &= _MASK32
    return v - (1 << 32) if v >= 1 << 31 else v


def _signed64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


def kafka_uuid(text: str) -> uuid.UUID:
    """``Uuid.fromString``: 22 characters of URL-safe base64 without padding."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r} (decodes to {len(raw)} bytes, not 16)")
    return uuid.UUID(bytes=raw)


def uuid_text(u: uuid.UUID) -> str:
    """``Uuid.toString``."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def uuid_msb_lsb(u: uuid.UUID) -> tuple[int, int]:
    """The two signed 64-bit halves (``getMostSignificantBits``, ``getLeastSignificantBits``)."""
    v = u.int
    return _signed64(v >> 64), _signed64(v)


def uuid_sort_key(u: uuid.UUID) -> tuple[int, int]:
    """``Uuid.compareTo``: signed most significant bits, then signed least significant bits."""
    return uuid_msb_lsb(u)


def java_string_key(s: str) -> bytes:
    """``String.compareTo`` order (UTF-16 code units: a character above U+FFFF sorts below U+E000,
    unlike Python's code-point order)."""
    return s.encode("utf-16-be", "surrogatepass")


def jhash(key) -> int:
    """``hashCode`` of a ``String``, a Kafka ``Uuid`` or an ``Integer``."""
    if isinstance(key, str):
        return java_string_hash(key)
    if isinstance(key, uuid.UUID):
        hilo = (key.int >> 64) ^ (key.int & _MASK64)
        return _signed32((hilo >> 32) ^ hilo)
    if isinstance(key, int):
        return _signed32(key)
    raise TypeError(f"no Java hash code for {type(key).__name__}")


def table_size_for(cap: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``cap`` (at least 1)."""
    n = 1
    while n < cap:
        n <<= 1
    return n


def hash_set_capacity(n: int) -> int:
    """The initial capacity of ``new HashSet<>(collection of n)`` / ``new HashMap<>(map of n)``."""
    return max(int(n / 0.75) + 1, 16)


def java_order(keys, initial: int = 16) -> list:
    """The iteration order of a ``HashMap``/``HashSet`` made with ``initial`` capacity and filled
    with ``keys`` in the given order (duplicates keep their first place, as ``put`` does)."""
    keys = list(dict.fromkeys(keys))
    cap = table_size_for(initial)
    while len(keys) > cap * 0.75:
        cap <<= 1
    mask = cap - 1

    def bucket(k):
        h = jhash(k) & _MASK32
        return (h ^ (h >> 16)) & mask

    # sorted() is stable: keys of one bucket keep their insertion order
    return sorted(keys, key=bucket)


def java_partitions(partitions) -> list[int]:
    """A partition set as ``new HashSet<>(list)`` iterates it (ascending below its capacity)."""
    parts = list(dict.fromkeys(partitions))
    return java_order(parts, hash_set_capacity(len(parts)))
