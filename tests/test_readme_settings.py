"""The README's settings table is generated from the settings registry (``compactlog.settings``):
it lists every owner's settings with their declared type, default, update mode and documentation,
so a setting added, removed or changed in its owner's module without ``python -m
compactlog.settings`` run again fails here."""

from __future__ import annotations

import os

from compactlog.settings import TABLE_BEGIN, TABLE_END, settings_table
from compactlog.storage.config import TOPIC_CONFIGS
from compactlog.storage.config_registry import BROKER_CONFIGS

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _readme_table() -> str:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END)
    return text[start:end]


def test_readme_settings_table_is_the_registrys():
    assert _readme_table() == settings_table(), (
        "README.md's settings table differs from the settings' definitions: run "
        "`python -m compactlog.settings` and paste its output between the markers")


def test_every_setting_has_a_row():
    table = _readme_table()
    for name in list(BROKER_CONFIGS) + list(TOPIC_CONFIGS):
        assert f"| `{name}` |" in table, name
