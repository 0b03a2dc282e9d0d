"""Every broker setting compactlog knows, gathered from the packages that own them: Kafka's
``KafkaConfig``, whose ConfigDef only merges the definitions of ``LogConfig``, ``CleanerConfig``,
``GroupCoordinatorConfig``, ``TransactionLogConfig``, ``SslConfigs``, ...

Each owner declares its settings in one small module, every one with its type, default,
validator, documentation, importance and update mode (``config_def.ConfigDef``), and registers
them here when that module is imported (``register``), with the check of its settings taken
together (Kafka's ``KafkaConfig.validateValues`` for that owner's part). Nothing here imports an
owner by name in its source: storage stays below the floors that define settings. A package's
``__init__`` imports its owner module, so a package that reads its settings has them registered;
``compactlog/settings.py`` imports every owner, for what needs all of them (DescribeConfigs,
``configs --describe``, the README's table, checking ``server.properties``), and ``gather_all``
imports it by its name, for whoever reads a data dir's broker config whole (``DataDir``): that may
be a process that imported nothing else of compactlog (a Python worker Spark started).

The owners (``OWNERS``):

* ``storage`` (storage/config.py): the topic configs (``LogConfig``; a topic config's broker
  synonyms are its defaults) and the log manager's and producer state's broker settings;
* ``cleaner`` (cleaner/config.py): ``log.cleaner.*`` and compactlog's cleaner settings;
* ``server`` (server/config.py): listeners, node, requests, topic creation, authorizer, metrics;
* ``security`` (server/security/config.py): TLS and SASL;
* ``groups`` (coordinator/group/config.py), ``transactions`` (coordinator/txn/config.py): the coordinators';
* ``spark`` (spark/config.py): the Spark engine's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Iterable

from ..errors import ConfigError
from .config_def import IMPORTANCE, UPDATE_MODES, ConfigDef

# name -> definition, every owner's (filled as owners register; the dict is never replaced, so a
# module holding it sees later registrations)
BROKER_CONFIGS: dict[str, ConfigDef] = {}


@dataclass(frozen=True)
class Owner:
    name: str
    module: str
    settings: tuple[ConfigDef, ...]
    check: Callable | None = None       # (BrokerConfig) -> None, raises ConfigError


OWNERS: dict[str, Owner] = {}


def register(owner: str, module: str, settings: Iterable[ConfigDef],
             check: Callable | None = None) -> dict[str, ConfigDef]:
    """Add ``owner``'s broker settings (once: importing its module again changes nothing); the
    owner's settings by name. A name another owner defines, or a definition without a
    documentation, importance or update mode, is a bug in compactlog: refused loudly."""
    settings = tuple(settings)
    known = OWNERS.get(owner)
    if known is not None:
        if known.settings != settings:
            raise ConfigError(f"settings owner {owner} registered twice with different settings")
        return {d.name: d for d in settings}
    for d in settings:
        holder = next((o.name for o in OWNERS.values() if any(s.name == d.name for s in o.settings)), None)
        if holder is not None:
            raise ConfigError(f"setting {d.name} defined by both {holder} and {owner}")
        if not d.doc or d.importance not in IMPORTANCE or d.dynamic not in UPDATE_MODES:
            raise ConfigError(f"setting {d.name} ({owner}) needs a documentation, an importance and an "
                              f"update mode")
    OWNERS[owner] = Owner(owner, module, settings, check)
    for d in settings:
        BROKER_CONFIGS[d.name] = d
    return {d.name: d for d in settings}


def owner_of(name: str) -> str | None:
    """The owner defining broker setting ``name`` (None: not compactlog's)."""
    for o in OWNERS.values():
        if any(d.name == name for d in o.settings):
            return o.name
    return None


GATHERER = "compactlog.settings"        # the module importing every owner (Kafka's KafkaConfig)


def gather_all() -> None:
    """Every owner's settings registered, whatever this process imported so far: the gatherer
    imported by name (once; later calls cost a dict lookup)."""
    importlib.import_module(GATHERER)


def check_all(broker) -> None:
    """Every registered owner's check of its settings together (in registration order)."""
    for o in list(OWNERS.values()):
        if o.check is not None:
            o.check(broker)
