"""``server.properties`` and ``K=V`` options: Java's ``.properties`` format as
``java.util.Properties.load`` reads it (jproperties), and ``--config``/``--override`` assignments."""

from __future__ import annotations

from ..errors import ConfigError


def read_properties(path: str) -> dict[str, str]:
    """A ``.properties`` file (``server.properties``), {} when it does not exist.

    UTF-8, or ISO-8859-1 when it is not: Java's ``Properties.load(InputStream)``, which Kafka uses,
    reads ISO-8859-1, so any byte is accepted there and must be here (a comment in Latin-1 is common).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    try:
        return parse_properties(text)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` text, parsed by jproperties as ``java.util.Properties.load`` does:
    ``key=value``, ``key: value`` and ``key value``, ``#``/``!`` comments, backslash line
    continuations and escapes (``\\uXXXX`` included)."""
    from jproperties import Properties, PropertyError
    props = Properties()
    try:
        props.load(text, "utf-8")
    except (PropertyError, ValueError) as e:
        raise ConfigError(f"not a Java properties text: {e}") from None
    return {k: v.data for k, v in props.items()}


def parse_assignments(items: list[str] | None, what: str) -> dict[str, str]:
    """``K=V`` strings (from --config / --override) into a dict, with a clear error."""
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ConfigError(f"{what} {item!r} is not of the form name=value")
        out[k.strip()] = v.strip()
    return out
