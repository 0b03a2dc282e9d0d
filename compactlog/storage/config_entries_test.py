"""configs --describe's printing, shared by the data-dir and the broker side: ConfigCommand's
entry line, section headers and the entries a section shows."""

from __future__ import annotations

from compactlog.storage.config_entries import Entry, section_header, shown_entries


def test_entry_line_prints_null_and_synonyms_as_kafka():
    e = Entry("cleanup.policy", None, "DYNAMIC_TOPIC_CONFIG", False,
              [("DYNAMIC_TOPIC_CONFIG", "cleanup.policy", None), ("DEFAULT_CONFIG", "log.cleanup.policy", "delete")])
    assert e.line() == ("  cleanup.policy=null sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=null, "
                        "DEFAULT_CONFIG:log.cleanup.policy=delete}")
    assert Entry("a", "1", "DEFAULT_CONFIG", True, []).line() == "  a=1 sensitive=true synonyms={}"


def test_section_headers():
    assert section_header("topics", "t", False) == "Dynamic configs for topic t are:"
    assert section_header("brokers", "0", True) == "All configs for broker 0 are:"
    assert section_header("brokers", "", False) == "Default configs for brokers in the cluster are:"


def test_shown_entries_are_the_dynamic_ones_by_name_unless_all():
    entries = [Entry(n, "v", src, False, []) for n, src in [("z", "DYNAMIC_TOPIC_CONFIG"), ("b", "DEFAULT_CONFIG"),
                                                            ("a", "DYNAMIC_TOPIC_CONFIG"),
                                                            ("d", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                                                            ("c", "DYNAMIC_BROKER_CONFIG")]]
    assert [e.name for e in shown_entries(entries, "topics", "t", False)] == ["a", "z"]
    assert [e.name for e in shown_entries(entries, "topics", "t", True)] == ["a", "b", "c", "d", "z"]
    assert [e.name for e in shown_entries(entries, "brokers", "0", False)] == ["c"]
    assert [e.name for e in shown_entries(entries, "brokers", "", False)] == ["d"]
