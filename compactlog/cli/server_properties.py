"""Changing ``DIR/server.properties`` in place for ``configs --alter --entity-type brokers`` on a data
dir: settings set or removed line by line, every other line (comments, order, other settings) kept
as it was; names and values checked as the broker checks them at start, before the file is
replaced (atomically: a new file renamed over the old one)."""

from __future__ import annotations

import os
import re

from ..errors import ConfigError

_KEY = re.compile(r"\s*((?:\\.|[^=:\s\\])+)")


def _logical_lines(text: str) -> list[tuple[str | None, list[str]]]:
    """(key or None for comments and blank lines, the physical lines it spans)."""
    out = []
    physical = text.splitlines(keepends=True)
    i = 0
    while i < len(physical):
        group = [physical[i]]
        # a line ending in an odd number of backslashes continues on the next
        while _continues(group[-1]) and i + 1 < len(physical):
            i += 1
            group.append(physical[i])
        i += 1
        first = group[0].lstrip()
        if not first.strip() or first[0] in "#!":
            out.append((None, group))
            continue
        m = _KEY.match(group[0])
        out.append((re.sub(r"\\(.)", r"\1", m.group(1)) if m else None, group))
    return out


def _continues(line: str) -> bool:
    body = line.rstrip("\r\n")
    return (len(body) - len(body.rstrip("\\"))) % 2 == 1


def _escaped(value: str) -> str:
    value = value.replace("\\", "\\\\")
    return "\\" + value if value.startswith(" ") else value


def alter_server_properties(data_dir: str, changes: dict[str, str], removals: list[str]) -> str:
    """Set ``changes`` and remove ``removals`` in ``data_dir``'s server.properties; its path."""
    from ..storage.config import (BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, broker_setting_names, did_you_mean,
                                  read_properties)
    from ..storage.datadir import SERVER_PROPERTIES
    path = os.path.join(data_dir, SERVER_PROPERTIES)
    current = read_properties(path)
    known = broker_setting_names()
    broker_names = set(BROKER_CONFIGS) | {b for d in TOPIC_CONFIGS.values() for b in d.broker}
    for name in list(changes) + removals:
        if name in TOPIC_CONFIGS and name not in broker_names and name not in current:
            d = TOPIC_CONFIGS[name]
            default = f"; the brokers' default for it is {d.broker[0]}" if d.broker else ""
            raise ConfigError(f"{name} is a topic config, not a broker setting{default}")
        if name not in known and not name.startswith("listener.name."):
            raise ConfigError(f"Unknown broker config name: {name}{did_you_mean(name, known)}")
    invalid = [n for n in removals if n not in current]
    if invalid:
        raise ConfigError(f"Invalid config(s): {','.join(invalid)}")
    merged = {k: v for k, v in current.items() if k not in removals}
    merged.update(changes)
    BrokerConfig(merged).validate()          # as `serve` will check them at start
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raw = b""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    lines, done = [], set()
    for key, group in _logical_lines(text):
        if key in removals:
            continue
        if key in changes:
            if key not in done:
                lines.append(f"{key}={_escaped(changes[key])}\n")
                done.add(key)
            continue
        lines.extend(group)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines.extend(f"{k}={_escaped(v)}\n" for k, v in changes.items() if k not in done)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path
