"""kafka-configs.sh's parsing of --add-config (ConfigCommand.parseConfigsToBeAdded) and the
server.properties rewrite of an offline broker --alter."""

from __future__ import annotations

import pytest
import typer

from .configs import _configs_to_add
from .server_properties import alter_server_properties


@pytest.mark.parametrize("text, expected", [
    ("a=1,b=2", {"a": "1", "b": "2"}),
    ("cleanup.policy=[compact,delete],retention.ms=5", {"cleanup.policy": "compact,delete", "retention.ms": "5"}),
    (" a = 1 ", {"a": "1"}),
    ("ssl.endpoint.identification.algorithm=", {"ssl.endpoint.identification.algorithm": ""}),
])
def test_add_config(text, expected):
    assert _configs_to_add([text], None) == expected


@pytest.mark.parametrize("text", ["a", "a=1,b", "a=1=2", "bad key=1"])
def test_add_config_refused(text):
    with pytest.raises(typer.Exit):
        _configs_to_add([text], None)


def test_server_properties_rewrite_keeps_comments_order_and_continuations(tmp_path):
    (tmp_path / "server.properties").write_text(
        "# a comment\nnum.partitions = 3\nlog.dirs=/a,\\\n  /b\n! other\nlog.retention.hours: 24\n")
    alter_server_properties(str(tmp_path), {"num.partitions": "5", "log.cleaner.threads": "2"},
                            ["log.retention.hours"])
    assert (tmp_path / "server.properties").read_text() == \
        "# a comment\nnum.partitions=5\nlog.dirs=/a,\\\n  /b\n! other\nlog.cleaner.threads=2\n"


def test_server_properties_refusals_change_nothing(tmp_path):
    from compactlog.errors import ConfigError
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\n")
    for changes, removals, words in [({"num.partitons": "1"}, [], "did you mean num.partitions?"),
                                     ({"num.partitions": "x"}, [], "not a whole number"),
                                     ({}, ["log.retention.hours"], "Invalid config(s): log.retention.hours"),
                                     ({"segment.bytes": "100"}, [], "a topic config, not a broker setting")]:
        with pytest.raises(ConfigError) as e:
            alter_server_properties(str(tmp_path), changes, removals)
        assert words in str(e.value)
    assert path.read_text() == "num.partitions=3\n"
