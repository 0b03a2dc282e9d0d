"""The table of API versions a connection accepts, and the ApiVersions answer built from it.

Follows Kafka's ``ApiKeys`` (which versions are enabled), ``ApiVersionsRequest`` (the
unsupported-version fallback and the KIP-511 client software name check) and
``KafkaApis.handleApiVersionsRequest`` (which of the three answers to send). This is the protocol
layer's view of the APIs: ``SupportedApis`` holds ``ApiRange`` entries and knows nothing of
handlers. Which APIs the broker serves, in which versions, each API declares in its own module
(``apis/``); ``dispatch.py`` derives the broker's table from those declarations (wire-protocol.md
§2.1: capped where a higher version would bring topic IDs or batched groups, Kafka 4.x minimums,
and Produce advertised from 0 but accepted from 3 only, KAFKA-18659).
"""

from __future__ import annotations

import datetime
import functools
import importlib
import re
from dataclasses import dataclass
from typing import Iterable

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

API_VERSIONS_KEY = 18

# ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN; Java's Matcher.matches() = fullmatch.
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

_NO_THROTTLE = datetime.timedelta(0)

# The schema lookups import a module on every uncached call (wire-protocol.md §1.6).
request_schema = functools.lru_cache(maxsize=None)(load_request_schema)
response_schema = functools.lru_cache(maxsize=None)(load_response_schema)


@dataclass(frozen=True)
class ApiRange:
    """One API's entry: the advertised [min_version, max_version] and the accepted minimum.

    ``min_accepted`` differs from ``min_version`` only for Produce (advertised from 0 for old
    librdkafka's feature map, accepted from 3).
    """

    key: int
    name: str
    min_version: int
    max_version: int
    min_accepted: int | None = None

    @property
    def accepted_min(self) -> int:
        return self.min_version if self.min_accepted is None else self.min_accepted

    def accepts(self, version: int) -> bool:
        return self.accepted_min <= version <= self.max_version


def software_name_is_valid(value: str) -> bool:
    """KIP-511's rule for ApiVersions v3+ ``client_software_name`` / ``_version``."""
    return _SOFTWARE_NAME_VERSION.fullmatch(value) is not None


def _check_schemas(r: ApiRange) -> None:
    """kio's UnknownAPIKey/UnknownEntity for a version in ``r`` it cannot decode, from kio's index
    (what ``load_request_schema`` looks up before importing): importing every accepted version's
    modules here was ~0.8 CPU-s of a broker's start (a py-spy profile: 39% of it), for versions
    most clients never send; each is imported on its first request (``request_schema``)."""
    name = api_key_map.get(r.key)
    if name is None:
        raise UnknownAPIKey(f"Failed mapping the given API key: {r.key!r}")
    versions = schema_name_map[name]
    for version in range(r.accepted_min, r.max_version + 1):
        for entity in (EntityType.request, EntityType.response):
            if entity not in versions.get(version, {}):
                raise UnknownEntity(f"{name} v{version}: kio has no {entity.name} schema")


class SupportedApis:
    """The broker's API table: what ApiVersions advertises and what a request may use.

    Every accepted version must have a kio request and response schema; the constructor checks
    that, so a bad table fails at start-up rather than on a client's request.
    """

    def __init__(self, ranges: Iterable[ApiRange]):
        by_key: dict[int, ApiRange] = {}
        for r in ranges:
            if r.key in by_key:
                raise ValueError(f"API key {r.key} ({r.name}) is listed twice")
            if not 0 <= r.accepted_min <= r.max_version or r.min_version > r.accepted_min:
                raise ValueError(f"{r.name}: bad range {r.min_version}-{r.max_version} "
                                 f"(accepted from {r.accepted_min})")
            _check_schemas(r)
            by_key[r.key] = r
        if API_VERSIONS_KEY not in by_key:
            raise ValueError("ApiVersions (18) must be supported: clients send it first")
        self._by_key = dict(sorted(by_key.items()))
        self._responses: dict[int, object] = {}

    def get(self, api_key: int) -> ApiRange | None:
        return self._by_key.get(api_key)

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._by_key

    def __iter__(self):
        return iter(self._by_key.values())

    def accepts(self, api_key: int, version: int) -> bool:
        r = self._by_key.get(api_key)
        return r is not None and r.accepts(version)

    def api_versions_supported(self, version: int) -> bool:
        """ApiVersionsRequest's ``!hasUnsupportedRequestVersion``: ``version`` is answered as is."""
        return self._by_key[API_VERSIONS_KEY].accepts(version)

    def api_versions_response(self, request_version: int, request_body=None):
        """The kio ApiVersionsResponse body for a request of ``request_version``.

        * a version outside the ApiVersions range: a v0 body, UNSUPPORTED_VERSION (35), with the
          ApiVersions entry only, so the client can retry with a version both sides know;
        * v3+ with a client software name or version not matching KIP-511's pattern:
          INVALID_REQUEST (42) and no API list, in the request's version;
        * otherwise NONE and the full table, in the request's version.

        The response always travels with response header v0 (kio's schema for key 18 says so).
        """
        if not self.api_versions_supported(request_version):
            cls = response_schema(API_VERSIONS_KEY, 0)
            own = self._by_key[API_VERSIONS_KEY]
            entry = _api_version_class(cls)(api_key=API_VERSIONS_KEY, min_version=own.min_version,
                                            max_version=own.max_version)
            return cls(error_code=ErrorCode.unsupported_version, api_keys=(entry,))
        if request_version >= 3:
            if request_body is None:
                raise TypeError(f"an ApiVersions v{request_version} answer needs the request body")
            if not (software_name_is_valid(request_body.client_software_name)
                    and software_name_is_valid(request_body.client_software_version)):
                return self._body(request_version, ErrorCode.invalid_request, ())
        cached = self._responses.get(request_version)
        if cached is None:
            cls = response_schema(API_VERSIONS_KEY, request_version)
            entry = _api_version_class(cls)
            keys = tuple(entry(api_key=r.key, min_version=r.min_version, max_version=r.max_version)
                         for r in self._by_key.values())
            cached = self._responses[request_version] = self._body(request_version,
                                                                   ErrorCode.none, keys)
        return cached

    @staticmethod
    def _body(version: int, error: ErrorCode, keys: tuple):
        cls = response_schema(API_VERSIONS_KEY, version)
        if version == 0:
            return cls(error_code=error, api_keys=keys)
        return cls(error_code=error, api_keys=keys, throttle_time=_NO_THROTTLE)


def _api_version_class(response_cls):
    return importlib.import_module(response_cls.__module__).ApiVersion

