"""compactlog's Kafka broker: the wire protocol (sans-IO) and, above it, the server.

``protocol`` turns bytes into request events and answers into the parts to write (Kafka's
SocketServer, RequestHeader, RequestChannel); ``versions`` holds the API table type and the
ApiVersions answer (ApiVersionsRequest, KafkaApis.handleApiVersionsRequest). Each API is declared
in its own module of ``apis/`` (and ``groups/handlers.py``); ``dispatch`` derives the dispatch
table and the advertised APIs from those declarations; ``transport`` runs it all on asyncio.
"""

# this package's settings, registered with every owner's (storage/config_registry.py)
from . import config as _config  # noqa: F401

# the protocol's names, imported on first use: importing a module of this package (its settings,
# read by every command that checks server.properties) does not load the wire protocol's schemas
_EXPORTS = {"NEED_DATA": "protocol", "Close": "protocol", "Connection": "protocol",
            "EncodedResponse": "protocol", "FileRegion": "protocol", "NeedData": "protocol",
            "Request": "protocol", "encode_response": "protocol", "ApiRange": "versions",
            "SupportedApis": "versions"}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
