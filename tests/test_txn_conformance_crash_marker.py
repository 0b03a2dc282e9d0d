"""Transaction conformance across a kill -9 of the broker right after the first marker of a commit
(transactions.md §6.3 scenario 5, the second crash point of §4.4): the scenario of
test_txn_conformance_crash.py, in a module of its own so that the two crash points run in
parallel (each case starts and kills two brokers)."""

from __future__ import annotations

import pytest

from test_txn_conformance_crash import kill_at_a_crash_point_then_restart
from txn_support import ALL_CLIENTS


@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_kill_after_the_first_marker_then_restart(tmp_path, monkeypatch, client):
    kill_at_a_crash_point_then_restart(tmp_path, monkeypatch, client, "first-marker")
