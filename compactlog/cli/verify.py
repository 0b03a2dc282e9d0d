"""``compactlog verify``: check a data dir without changing it."""

from __future__ import annotations

import json

import typer

from ..storage.events import EXIT_DATA_SET_ASIDE
from .common import context, fail
from .apps import app
from .progress import partition_log_bytes, progress


@app.command("verify")
def verify_cmd(ctx: typer.Context,
               topic: str = typer.Option(None, "--topic", help="Only this topic."),
               as_json: bool = typer.Option(False, "--json", help="One JSON object per problem, then a summary."),
               repair: bool = typer.Option(False, "--repair", help="First repair every partition under the "
                                           "data-dir lock, as recovery would, below the recovery point too: "
                                           "corrupt batches quarantined (kept in *.quarantined), a base offset "
                                           "outside the CRC corrected, an unreadable tail cut (kept in "
                                           "*.discarded), indexes rebuilt. Everything done is reported.")):
    """CRCs, offsets, batch sizes, indexes against the log, checkpoints, keys unique below the cleaner
    checkpoint, producer snapshots, directories Kafka's loader would refuse. Exit 0 when healthy
    (notes, such as a missing index Kafka rebuilds, do not count); otherwise one line per problem.
    A summary line ends the output."""
    from ..storage.datadir import DataDir
    from ..storage.verify import VerifyCounts, read_checkpoints, refused_directories, verify_partition
    c = context(ctx)
    if "://" in (c.data_dir or ""):
        if repair:
            fail(f"{c.data_dir}: --repair rewrites files in place; a bucket is verified read-only", 2)
        _report(*_verify_bucket(c, topic), as_json, repairs_here=False)
        return
    if repair:
        with c.open(write=True) as wdd:
            names = [topic] if topic else wdd.topics()
            for t in names:
                for p in wdd.partitions(t):
                    wdd.open_log(t, p).repair()
    dd = DataDir(c.require_data_dir(), broker=c.broker())   # never opened for writing: nothing changes
    checkpoints, problems = read_checkpoints(dd.path)
    if not topic:
        problems.extend(refused_directories(dd.path))
    topics = [topic] if topic else dd.topics()
    configs = {t: dd.topic_config(t) for t in topics}
    work = [(t, p) for t in topics for p in dd.partitions(t)]
    sizes = {tp: partition_log_bytes(dd.path, *tp) for tp in work}
    counts = VerifyCounts()
    with progress("verifying", sum(sizes.values()), unit="bytes", min_total=256 << 20) as bar:
        for t, p in work:
            problems.extend(verify_partition(dd.path, t, p, configs[t], checkpoints, counts))
            bar.advance(sizes[(t, p)])
    problems.extend(_verify_remote(dd, topics, counts))
    _report(len(work), counts, problems, as_json)


def _report(partitions: int, counts, problems: list, as_json: bool, repairs_here: bool = True) -> None:
    notes = [pr for pr in problems if pr.note]
    problems = [pr for pr in problems if not pr.note]
    for pr in notes + problems:
        if as_json:
            typer.echo(json.dumps(pr.to_dict()))
        else:
            typer.echo(f"note: {pr}" if pr.note else str(pr))
    repairable = [pr for pr in problems if pr.repairable]
    if as_json:
        typer.echo(json.dumps({"partitions": partitions, "segments": counts.segments, "records": counts.records,
                               "problems": len(problems), "notes": len(notes), "repairable": len(repairable)}))
    else:
        typer.echo(_summary(partitions, counts, problems, notes, repairable if repairs_here else []))
    if problems:
        # only bytes recovery set aside: the data is healthy, but not everything it held is there
        raise typer.Exit(EXIT_DATA_SET_ASIDE if all(p.set_aside for p in problems) else 1)


def _verify_bucket(c, topic: str | None) -> tuple[int, object, list]:
    """A bucket (``storage.remote.bucket``): a copied data dir's partitions checked as a local
    one's are, through their objects; a remote tier's as ``verify`` checks one beside its data dir
    (``storage.remote.verify``); GET, HEAD and LIST only."""
    from ..storage import files
    from ..storage.config import LogConfig
    from ..storage.remote.bucket import BucketTier, sources
    from ..storage.remote.verify import verify_remote_partition
    from ..storage.verify import VerifyCounts, verify_source
    from .bucket_dir import check_bucket
    listing = check_bucket(c)
    if topic and topic not in listing.topics():
        fail(f"topic {topic!r} does not exist in {listing.bucket.url} (topics there: {', '.join(listing.topics())})")
    counts = VerifyCounts()
    problems: list = []
    configs = listing.topic_configs()
    chosen = [(p, src) for p, src in sources(listing) if not topic or p.topic == topic]
    checkpoints = None
    tier = None
    for p, src in chosen:
        if p.shape == "remote-tier":
            tier = tier or BucketTier(listing)
            counts.partitions += 1
            problems.extend(verify_remote_partition(tier, p.topic, p.partition, None, counts))
            continue
        if checkpoints is None:
            names = (files.CLEANER_CHECKPOINT, files.RECOVERY_POINT_CHECKPOINT, files.LOG_START_OFFSET_CHECKPOINT)
            checkpoints = {name: src.checkpoint(name) for name in names}
        problems.extend(verify_source(listing.bucket.url.rstrip("/"), src, p.topic, p.partition,
                                      LogConfig(configs.get(p.topic, {})), checkpoints, counts))
    return len(chosen), counts, problems


def _verify_remote(dd, topics: list[str], counts) -> list:
    """The remote tier of each tiered partition (``storage.remote.verify``), when the data dir's
    broker config names a store; only reads reach it."""
    from ..storage.remote.tiered_read import RemoteTier
    tier = RemoteTier.of(dd)
    if tier is None:
        return []
    tiered = [t for t in topics if tier.tiered(t)]
    if not tiered:
        return []
    from ..storage.remote.verify import journal_states, verify_remote_partition
    journal = journal_states(dd)
    out = []
    for t in tiered:
        for p in dd.partitions(t):
            out.extend(verify_remote_partition(tier, t, p, journal, counts))
    return out


def _summary(partitions: int, counts, problems: list, notes: list, repairable: list) -> str:
    """``ok: 2 partition(s), 3 segment(s), 41 records checked, no problems`` or the count of
    problems, and ``verify --repair`` where it would help."""
    looked = (f"{partitions} partition(s), {counts.segments} segment(s), {counts.records} records checked")
    noted = f" ({len(notes)} note(s) above)" if notes else ""
    if not problems:
        return f"ok: {looked}, no problems{noted}"
    text = f"{looked}: {len(problems)} problem(s){noted}"
    if repairable:
        text += (f"; `compactlog verify --repair` repairs {len(repairable)} of them (corrupt batches set "
                 f"aside, offsets corrected, indexes rebuilt)")
    return text
