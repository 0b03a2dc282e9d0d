"""The advertised API table (wire-protocol.md §2.1/§2.2) and ApiVersions answers."""

from __future__ import annotations

import pytest
from kio.index import UnknownEntity
from kio.schema.errors import ErrorCode

from compactlog.server.conftest import ALL_APIS
from compactlog.server.dispatch import BROKER, BROKER_APIS, DECLARED_APIS, GROUP_APIS
from compactlog.server.versions import ApiRange, SupportedApis, request_schema, response_schema


def advertised(apis: SupportedApis) -> dict[int, tuple[int, int]]:
    body = apis.api_versions_response(0)
    assert body.error_code == ErrorCode.none
    return {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}


def test_broker_table_is_the_spec_table():
    # ListOffsets v9 (KIP-1005's LATEST_TIERED, -5): tiered-storage.md §4.6 extends wire-protocol.md's 1-8
    assert advertised(BROKER) == {
        0: (0, 12), 1: (4, 12), 2: (1, 9), 3: (0, 12), 18: (0, 4), 19: (2, 7), 20: (1, 5),
        21: (0, 2), 22: (0, 5), 32: (1, 4), 33: (0, 2), 35: (1, 4), 37: (0, 3), 44: (0, 1), 60: (0, 1),
        61: (0, 0)}


def test_group_apis_are_advertised_only_when_asked_for():
    table = advertised(ALL_APIS)
    assert set(table) == {r.key for r in BROKER_APIS} | {r.key for r in GROUP_APIS}
    assert {k: table[k] for k in (8, 9, 10, 11, 12, 13, 14, 15, 16, 28, 42, 47, 68, 69)} == {
        8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5),
        15: (0, 5), 16: (0, 5), 28: (0, 4), 42: (0, 2), 47: (0, 0), 68: (0, 1), 69: (0, 1)}
    assert not set(advertised(BROKER)) & {r.key for r in GROUP_APIS}


def test_old_librdkafka_feature_map_is_satisfied():
    # §2.2: librdkafka enables compression, idempotence and the balanced consumer only if
    # these versions are inside the advertised ranges.
    table = advertised(ALL_APIS)
    wanted = {0: [0], 10: [0], 11: [0], 14: [0], 12: [0], 13: [0], 8: [2], 9: [1], 22: [0]}
    for key, versions in wanted.items():
        low, high = table[key]
        assert all(low <= v <= high for v in versions), key


def test_produce_is_advertised_from_0_but_accepted_from_3():
    assert [BROKER.accepts(0, v) for v in (0, 1, 2, 3, 12, 13)] == [False] * 3 + [True] * 2 + [False]
    produce = BROKER.get(0)
    assert (produce.min_version, produce.accepted_min, produce.max_version) == (0, 3, 12)


def test_every_other_api_is_accepted_exactly_where_advertised():
    for r in ALL_APIS:
        if r.key == 0:
            continue
        assert not ALL_APIS.accepts(r.key, r.min_version - 1)
        assert ALL_APIS.accepts(r.key, r.min_version) and ALL_APIS.accepts(r.key, r.max_version)
        assert not ALL_APIS.accepts(r.key, r.max_version + 1)
    assert not ALL_APIS.accepts(24, 0) and 24 not in ALL_APIS


def test_a_bad_table_fails_at_construction():
    with pytest.raises(ValueError, match="listed twice"):
        SupportedApis(BROKER_APIS + (ApiRange(0, "Produce", 3, 9),))
    with pytest.raises(ValueError, match="ApiVersions"):
        SupportedApis(r for r in BROKER_APIS if r.key != 18)
    with pytest.raises(ValueError, match="bad range"):
        SupportedApis(BROKER_APIS[1:] + (ApiRange(0, "Produce", 3, 12, min_accepted=2),))
    with pytest.raises(UnknownEntity):                    # kio cannot decode Produce v14
        SupportedApis(BROKER_APIS[1:] + (ApiRange(0, "Produce", 3, 14),))


def test_every_accepted_version_of_every_declared_api_has_importable_schemas():
    """The table is checked against kio's index at construction; the modules themselves are
    imported on a version's first request, so here every one is imported once."""
    for r in DECLARED_APIS:
        for version in range(r.accepted_min, r.max_version + 1):
            assert request_schema(r.key, version).__api_key__ == r.key
            assert response_schema(r.key, version).__api_key__ == r.key


def test_api_versions_answers():
    unsupported = BROKER.api_versions_response(5)
    assert unsupported.__version__ == 0
    assert unsupported.error_code == ErrorCode.unsupported_version
    assert [(a.api_key, a.min_version, a.max_version) for a in unsupported.api_keys] == [(18, 0, 4)]
    good = request_schema(18, 3)(client_software_name="kcat", client_software_version="1.7.1")
    full = BROKER.api_versions_response(3, good)
    assert full.__version__ == 3 and full.error_code == ErrorCode.none
    assert BROKER.api_versions_response(3, good) is full          # built once per version
    bad = request_schema(18, 3)(client_software_name="kcat!", client_software_version="1.7.1")
    refused = BROKER.api_versions_response(3, bad)
    assert refused.error_code == ErrorCode.invalid_request and refused.api_keys == ()
    with pytest.raises(TypeError):
        BROKER.api_versions_response(4)
