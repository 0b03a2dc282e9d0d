"""What ``configs --describe`` prints, whichever side the entries come from (a broker's
DescribeConfigs answer or the data dir): the entity asked about, one ``name=value sensitive=...
synonyms={...}`` line per config, the section header over them and which entries a section shows
(Kafka's ``ConfigCommand.describeResourceConfig`` / ``getResourceConfig``).
"""

from __future__ import annotations

from dataclasses import dataclass

# the source of the entries a --describe without --all shows
DYNAMIC_SOURCE = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG"}
DEFAULT_BROKER_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"


@dataclass
class Entity:
    kind: str                # topics or brokers
    name: str | None         # None: every entity of the kind; "": the brokers' default


@dataclass
class Entry:
    """One described config, from the broker or from the data dir."""
    name: str
    value: str | None
    source: str
    sensitive: bool
    synonyms: list[tuple[str, str, str | None]]      # (source, name, value)

    def line(self) -> str:
        syn = ", ".join(f"{s}:{n}={_java(v)}" for s, n, v in self.synonyms)
        return f"  {self.name}={_java(self.value)} sensitive={'true' if self.sensitive else 'false'} synonyms={{{syn}}}"


def _java(value) -> str:
    return "null" if value is None else str(value)


def section_header(kind: str, name: str, all_: bool) -> str:
    """The line over one entity's entries."""
    if name == "":
        return f"Default configs for {kind} in the cluster are:"
    return f"{'All' if all_ else 'Dynamic'} configs for {kind[:-1]} {name} are:"


def shown_entries(entries: list[Entry], kind: str, name: str, all_: bool) -> list[Entry]:
    """ConfigCommand.getResourceConfig: the dynamic entries (all of them with --all), by name."""
    if not all_:
        source = DEFAULT_BROKER_SOURCE if kind == "brokers" and name == "" else DYNAMIC_SOURCE[kind]
        entries = [e for e in entries if e.source == source]
    return sorted(entries, key=lambda e: e.name)
