"""The broker's dispatch table and its advertised API table, both derived from the declarations.

Kafka routes each request in ``KafkaApis.handle``, enables versions in ``ApiKeys`` and answers a
failed request with the request class's ``getErrorResponse``: three places to keep in step. Here
each API declares all of it once, in its own module of ``apis/`` (``apis/groups.py`` for the
group APIs and FindCoordinator, ``apis/transactions.py`` for the transaction APIs, ``apis/acls.py``
for the ACL admin APIs), with a ``coordinator`` flag for the APIs a coordinator serves, as
Redpanda's handlers do; this module only collects the declarations. ``dispatch_table`` is what the transport runs (API key -> handler and where it
runs); ``advertised_apis`` is the ApiVersions table restricted to the APIs that have a handler,
so a client is never offered an API this broker cannot answer.
"""

from __future__ import annotations

from .apis.acls import ACL_APIS
from .apis.api_versions import API_VERSIONS
from .apis.cluster import DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS
from .apis.configs import ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from .apis.describe_producers import DESCRIBE_PRODUCERS
from .apis.fetch import FETCH
from .apis.handler import Api, ApiHandler
from .apis.init_producer_id import INIT_PRODUCER_ID
from .apis.list_offsets import LIST_OFFSETS
from .apis.metadata import METADATA
from .apis.produce import PRODUCE
from .apis.records import DELETE_RECORDS
from .apis.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from .apis.scram_credentials import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from .apis.topics import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS
from .apis.groups import GROUP_APIS
from .apis.transactions import TXN_APIS
from .versions import SupportedApis

__all__ = ["BROKER", "BROKER_APIS", "DECLARED_APIS", "GROUP_APIS", "SECURITY_APIS", "TXN_APIS", "advertised_apis",
           "dispatch_table", "error_response"]

BROKER_APIS: tuple[ApiHandler, ...] = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS,
    INIT_PRODUCER_ID, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS, ALTER_CONFIGS, CREATE_PARTITIONS,
    INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS,
)
"""The data-plane and admin APIs (wire-protocol.md §2.1), Produce first."""

SECURITY_APIS: tuple[ApiHandler, ...] = (
    SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS,
)
"""SASL and the SCRAM credential APIs (security.md §9), advertised on every listener as Kafka's."""

DECLARED_APIS: tuple[ApiHandler, ...] = BROKER_APIS + GROUP_APIS + TXN_APIS + SECURITY_APIS + ACL_APIS

_BY_KEY = {a.key: a for a in DECLARED_APIS}
if len(_BY_KEY) != len(DECLARED_APIS):
    raise ValueError("an API key is declared twice")


def dispatch_table() -> dict[int, Api]:
    """API key -> how a request of it is run (a fresh dict: tests replace entries)."""
    return {a.key: a.entry for a in DECLARED_APIS}


def advertised_apis(table: dict[int, Api]) -> SupportedApis:
    """The declared APIs that ``table`` has a handler for, as ApiVersions advertises them."""
    return SupportedApis(a for a in DECLARED_APIS if a.key in table)


def error_response(request, code: int, message: str | None = None):
    """Kafka's getErrorResponse for ``request``: ``code`` in every error field of its API's answer
    (None for an API this broker does not declare)."""
    api = _BY_KEY.get(request.api_key)
    return None if api is None else api.error_body(request, code, message)


BROKER = SupportedApis(BROKER_APIS)
"""The broker's table without the group APIs (the first broker's, issue 10; tests and benchmarks)."""
