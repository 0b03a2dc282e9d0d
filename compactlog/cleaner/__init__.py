"""The log cleaner (Kafka's LogCleaner, LogCleanerManager, Cleaner)."""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401
