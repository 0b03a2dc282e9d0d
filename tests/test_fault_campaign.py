"""A small, fast subset of the storage fault campaign (``tests/faults/campaign.py`` runs it
whole): one fault of each family a user meets on a full or failing disk, in the broker process,
under an idempotent acks=all producer, group commits and transactions; after a restart without
faults, everything acknowledged is served and nothing else (see the campaign's docstring).

The points are chosen by description from the census of the same workload, so that they follow
the broker's files as they change: the first short write of a topic's ``.log`` (the reproduction
of the disk-full issue), the first failed fsync of a topic's ``.log`` (the partition goes offline
until the restart), a failed index write, the group coordinator's and the transaction
coordinator's first failed appends, the cleaner's ``.cleaned`` file and a checkpoint.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults"))

import campaign  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SUBSET = [
    "short on pwrite #1 of topic .log",
    "enospc on pwrite #1 of topic .timeindex",
    "eio on fsync #1 of topic .log",
    "enospc on pwrite #1 of __consumer_offsets .log",
    "short on pwrite #1 of __transaction_state .log",
    "enospc on create #1 of topic .log.cleaned",
    "enospc on write #1 of recovery-point-offset-checkpoint.tmp",
]


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    injector = campaign.build_injector()
    if injector is None:
        pytest.skip("no C compiler to build the fault injector")
    work = str(tmp_path_factory.mktemp("faults"))
    counts, _ = campaign.run_census(work, injector)
    return work, injector, campaign.points_of(counts, occurrences=("first",))


def test_the_census_covers_every_write_path(census):
    _, _, points = census
    kinds = {p.kind for p in points}
    for kind in ("topic .log", "topic .index", "topic .timeindex", "topic .snapshot.tmp",
                 "topic leader-epoch-checkpoint.tmp", "__consumer_offsets .log", "__transaction_state .log",
                 "topic .log.cleaned", "recovery-point-offset-checkpoint.tmp", "meta.properties.tmp"):
        assert kind in kinds, sorted(kinds)


@pytest.mark.parametrize("name", SUBSET)
def test_nothing_acknowledged_is_lost_nothing_else_served(census, name):
    work, injector, points = census
    [point] = campaign.choose(points, [name])
    trial = campaign.run_trial(work, injector, point, SUBSET.index(name))
    assert trial.fired, f"{point} never happened in this run"
    assert trial.outcome == "ok", f"{point}: {trial.outcome} ({trial.detail})"
