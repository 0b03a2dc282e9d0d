"""``clean``, ``explain``, ``cleaner status`` and ``cleaner run``."""

from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext

import typer

from .common import context, fail, parse_configs
from .apps import app, cleaner_app


def _now(now_ms: int | None) -> int:
    if now_ms is None:
        return int(time.time() * 1000)
    if now_ms < 0:
        # every horizon and lag is computed from it: a negative clock silently cleans nothing
        fail(f"--now-ms {now_ms}: expected a time in ms since the epoch (0 or more)", 2)
    return now_ms


def _executor(ctx, engine: str, spark_master: str | None):
    from ..cleaner.engines import make_executor, spark_master_for
    try:
        return make_executor(engine, spark_master_for(spark_master, ctx.broker()))
    except ValueError as e:
        fail(str(e), 2)


def _roll_active_segments(dd, topics, partition) -> None:
    from ..cleaner.cleaner import compacted_partitions
    for t, p in compacted_partitions(dd, topics, partition):
        log = dd.open_log(t, p)
        if log.config.compact and log.active_segment.size > 0:
            log.roll()


@app.command("clean")
def clean_cmd(ctx: typer.Context,
              topic: list[str] = typer.Option(None, "--topic", help="Only this topic; repeatable."),
              partition: int = typer.Option(None, "--partition", help="Only this partition (needs one --topic)."),
              now_ms: int = typer.Option(None, "--now-ms", help="The cleaner's clock, in ms since the epoch (default: now)."),
              force: bool = typer.Option(False, "--force", help="Clean the named partitions even when not eligible "
                                         "(ignores the dirty ratio and min.compaction.lag.ms)."),
              as_json: bool = typer.Option(False, "--json", help="One JSON object per partition."),
              engine: str = typer.Option("auto", "--engine", help="auto (the default: this process unless a "
                                         "local Spark would finish sooner, by a measured cost model), spark, "
                                         "or local (this process)."),
              spark_master: str = typer.Option(None, "--spark-master", help="A Spark master URL; implies --engine spark."),
              config: list[str] = typer.Option(None, "--config", help="A topic config K=V for this run only "
                                               "(e.g. cleanup.policy=compact on a copied Kafka data dir); repeatable. "
                                               "Needs --topic or --all-topics."),
              all_topics: bool = typer.Option(False, "--all-topics", help="Let --config apply to every topic of "
                                              "the data dir."),
              drop_keyless: bool = typer.Option(False, "--drop-keyless", help="Let a topic that only this run's "
                                                "--config compacts lose its records without a key (compaction "
                                                "removes them); without it such a run is refused."),
              dry_run: bool = typer.Option(False, "--dry-run", help="Show what the clean would remove from each "
                                           "partition (records, bytes, by reason) and write nothing."),
              log_dir: str = typer.Option(None, "--log-dir", help="Where the cleaner's run log (log-cleaner.log) "
                                          "goes; default compactlog.cleaner.log.dir, else DIR.logs next to the "
                                          "data dir (never inside it: Kafka would refuse the dir)."),
              roll: bool = typer.Option(False, "--roll", help="Roll each chosen partition's active segment first, "
                                        "so that all of its data can be cleaned (offline compaction).")):
    """One cleaner run at --now-ms: every eligible compacted partition cleaned once, as Kafka's cleaner would.
    A bucket (--data-dir s3://BUCKET/PREFIX) is cleaned into a new generation beside it, switched to
    by one conditional write; the objects read are left as they were."""
    args = dict(locals())
    from ..cleaner.cleaner import Cleaner
    from ..cleaner.log_format import CleanerLog
    c = context(ctx)
    if "://" in (c.data_dir or ""):
        from .bucket_dir import staged
        with staged(c, clean=not dry_run, as_json=as_json):
            return clean_cmd(**args)
    session_configs = parse_configs(config)
    topics = list(dict.fromkeys(topic or []))
    if partition is not None and len(topics) != 1:
        fail("--partition needs one --topic", 2)
    if all_topics and topics:
        fail("--all-topics and --topic exclude each other: --all-topics already means every topic", 2)
    now = _now(now_ms)
    if dry_run:
        return _dry_run(c, topics, partition, now, force=force, roll=roll, as_json=as_json,
                        session_configs=session_configs, all_topics=all_topics, drop_keyless=drop_keyless)
    executor = _executor(c, engine, spark_master)
    run_log = CleanerLog(c.require_data_dir(), c.broker(), log_dir)   # a bad --log-dir fails before anything
    refuse_keyless = frozenset()
    from ..cleaner.offline import idle_outcomes
    from ..storage.lock import refuse_if_held
    refuse_if_held(c.require_data_dir())    # a writer on the dir (a broker): refused, as the writable open would
    # read-only first: a run that is refused, or that would clean nothing, writes nothing, not even
    # the lock file (on a copied Kafka dir a writer's open alone writes indexes, snapshots and
    # checkpoints)
    with c.open(write=False, now_ms=now, session_configs=session_configs) as ro:
        if session_configs:
            guarded = _session_scope(ro, topics, partition, all_topics)
            if not drop_keyless:
                _refuse_keyless_records(ro, guarded, roll, as_json)
                refuse_keyless = frozenset(guarded)
        # a tiered partition's status counts its remote tier (its manifest read, GET only): a
        # store that does not answer fails here, before anything is written
        with _remote_read_only(c, ro, topics, partition) as remote_view:
            idle = idle_outcomes(_cleaner(c, ro), now, topics, partition, force=force, roll=roll)
            # replaced remote segments past their grace period (a run or a broker stopped before
            # deleting them): work even when nothing is to be cleaned
            remote_due = remote_view.due(int(time.time() * 1000)) if remote_view is not None else {}
    if idle is not None and not remote_due:
        _report(idle, topics, as_json, roll, choice=None, totals=None)
        return
    from .clean_progress import CleanProgress
    runner = CleanProgress(executor, enabled=os.isatty(2) and not as_json, waiting_text="done")
    with c.open(write=True, now_ms=now, session_configs=session_configs) as dd, runner:
        if roll:
            _roll_active_segments(dd, topics, partition)
        # the remote tier of a tiered partition is cleaned with its local segments by the broker's
        # own round (storage/remote/offline.py): the broker's remote log manager, opened here
        with _remote_for_clean(c, dd, topics, partition) as remote:
            outcomes = _cleaner(c, dd, runner).run(now, topic=topics, partition=partition, force=force,
                                               refuse_keyless=refuse_keyless)
            if remote is not None:
                deleted = remote.finish()
                _note_pending(outcomes, remote.pending())
                for (t, p), n in sorted(deleted.items()):
                    typer.echo(json.dumps({"topic": t, "partition": p, "remoteSegmentsDeleted": n}) if as_json else
                               f"{t}-{p}: {n} replaced remote segment(s) deleted after their grace period")
        runner.round_done(outcomes)
        choice = getattr(executor, "choice", None)
        if choice is not None and any(o.cleaned or o.error for o in outcomes):
            run_log.info(f"Engine: {choice.text()}")
        for o in outcomes:
            if o.cleaned:
                run_log.cleaned(o)
            elif o.error:
                run_log.error(o)
    totals = runner.totals
    engine_name = choice.engine if choice is not None else getattr(executor, "name", None)
    _report(outcomes, topics, as_json, roll, choice=choice,
            totals=totals.text(engine_name) if totals.cleaned or totals.failed or totals.stopped else None)


def _remote_read_only(c, dd, topics, partition):
    """The manifests of the tiered compacted partitions a run considers, read (GET only) so that
    statuses, the dry run and ``explain`` plan over both tiers; a store that does not answer is
    one error line (exit 1) before anything is written."""
    from ..storage.remote.offline import open_read_only
    return _remote(c, dd, topics, partition, open_read_only)


def _remote_for_clean(c, dd, topics, partition):
    """The data dir's remote log manager for a run that cleans (storage/remote/offline.py): each
    tiered compacted partition taken by the manifest's conditional write and reconciled, so the
    round cleans its remote tier with its local one as the broker does; None when there is none."""
    from ..storage.remote.offline import open_for_clean
    return _remote(c, dd, topics, partition, open_for_clean)


def _remote(c, dd, topics, partition, opener):
    # never for a data dir copied to a bucket (``--data-dir s3://``): the store its
    # ``server.properties`` names is the original broker's, which a run over a copy must not touch
    if c.segment_sources is not None:
        return nullcontext()
    from ..cleaner.cleaner import compacted_partitions
    return opener(dd, compacted_partitions(dd, topics, partition))


def _note_pending(outcomes, pending: dict) -> None:
    """Replaced remote segments still in their grace period: deleted by a later run or the broker."""
    for o in outcomes:
        n = pending.get((o.topic, o.partition))
        if n and o.tiers is not None:
            o.tiers["remote"]["pendingDeletion"] = n


def _tier_lines(tiers: dict | None, verb: str) -> list[str]:
    """``remote tier: 7 segment(s), removed 120 of 140 records (9000 of 10000 bytes): ...`` for
    each tier of a round over both (none for a log in one tier)."""
    if not tiers:
        return []
    lines = []
    for name in ("remote", "local"):
        t = tiers.get(name)
        if not t or not t["segments"]:
            continue
        why = ", ".join(f"{n} {r}" for r, n in sorted(t["removed"].items())) or "nothing"
        line = (f"{name} tier: {t['segments']} segment(s), {verb} {t['recordsRead'] - t['recordsKept']} of "
                f"{t['recordsRead']} records ({t['bytesRead'] - t['bytesKept']} of {t['bytesRead']} bytes): {why}")
        if name == "remote" and t.get("pendingDeletion"):
            line += (f"; {t['pendingDeletion']} replaced segment(s) kept for compactlog.remote.compaction."
                     f"delete.delay.ms (deleted by a later run or the broker)")
        lines.append(line)
    return lines


def _cleaner(c, dd, executor=None):
    """The data dir's cleaner, its plans over the command's segment sources (a bucket's shadow:
    the segments read from their objects) when it has any."""
    from ..cleaner.cleaner import Cleaner
    cleaner = Cleaner(dd, executor)
    cleaner.source_for = c.segment_sources
    return cleaner


def _report(outcomes, topics: list[str], as_json: bool, roll: bool, *, choice, totals: str | None) -> None:
    """What a ``clean`` run did to each partition, and its summary (exit 1 when one failed)."""
    from ..cleaner.log_format import summary_text
    failed = [o for o in outcomes if o.error]
    for o in outcomes:
        if as_json:
            d = o.to_dict()
            ran = choice is not None and (o.cleaned or bool(o.error))
            d["engine"] = choice.engine if ran else None
            d["engineReason"] = choice.reason if ran else None
            typer.echo(json.dumps(d))
        elif o.cleaned:
            typer.echo(summary_text(o))
            for line in _tier_lines(o.tiers, "removed"):
                typer.echo(f"\t{line}")
        elif o.error:
            typer.echo(f"error: {o.name}: {o.error}", err=True)
        elif topics and o.status is not None:
            typer.echo(f"{o.name}: not cleaned: {o.status.reason}")
    for o in outcomes:
        st = o.status
        if not as_json and not (o.cleaned or o.error or o.aborted) and st is not None and st.force_checkpoint_update:
            # the one write of a run that cleans nothing: said, with why
            typer.echo(f"{o.name}: cleaner checkpoint {st.checkpoint} lay outside the log's offsets "
                       f"[{st.first_dirty}, {st.log_end_offset}]: reset to the log start {st.first_dirty} "
                       f"(cleaner-offset-checkpoint), as Kafka's cleaner does")
    if not as_json and not topics:
        _note_unknown_configs([o.status for o in outcomes if o.status is not None])
    if not as_json and not any(o.cleaned for o in outcomes) and not topics and not failed:
        typer.echo(_nothing_to_clean(outcomes, roll))
    elif not as_json and totals:
        typer.echo(totals)
    if failed:
        raise typer.Exit(1)


def _note_unknown_configs(statuses) -> None:
    unknown = sorted({st.topic for st in statuses if st.unknown_configs})
    if unknown:
        typer.echo(f"note: left alone, configs unknown (no entry in compactlog.topics.json): "
                   f"{', '.join(unknown)}; set them with `compactlog topics alter --topic T --config "
                   f"cleanup.policy=compact` or for this run with `--topic T --config cleanup.policy=compact`",
                   err=True)


def _session_scope(dd, topics: list[str], partition, all_topics: bool):
    """Check this run's --config (every name and value, then which topics it may reach), given to
    ``dd`` when it was opened; the partitions it alone makes compacted."""
    from ..cleaner.offline import compacted_by_session, config_scope_error
    from ..storage.config import LogConfig
    LogConfig(dict(dd.session_configs), dd.broker)   # every name and value checked before anything runs
    problem = config_scope_error(dd.topics(), topics, all_topics, dd.path)
    if problem:
        fail(problem, 2)
    return compacted_by_session(dd, topics, partition)


def _refuse_keyless_records(dd, guarded, roll: bool, as_json: bool) -> None:
    """Count the keyless records of the partitions only this run's --config compacts, before
    anything is written; any there: report each partition and refuse (exit 1)."""
    from ..cleaner.offline import find_keyless
    found = find_keyless(dd, guarded, roll=roll)
    if not found:
        return
    for k in found:
        if as_json:
            typer.echo(json.dumps(k.to_dict()))
        else:
            typer.echo(k.text(), err=True)
    topics = ", ".join(dict.fromkeys(k.topic for k in found))
    total = sum(k.keyless for k in found)
    fail(f"refused: {total} records without a key in {len(found)} partition(s) (above) would be removed: "
         f"{topics} {'is' if len(set(k.topic for k in found)) == 1 else 'are'} compacted only by this run's "
         f"--config, and compaction removes every record without a key; nothing was written; give "
         f"--drop-keyless to remove them, or leave {topics} out (--topic)")


def _dry_run(c, topics, partition, now: int, *, force: bool, roll: bool, as_json: bool,
             session_configs: dict, all_topics: bool, drop_keyless: bool) -> None:
    """``clean --dry-run``: the same choices as the run, on the data dir opened read-only."""
    from ..cleaner.cleaner import Cleaner
    from ..cleaner.offline import dry_run, find_keyless, would_clean
    with c.open(write=False, now_ms=now, session_configs=session_configs) as dd:
        guarded = _session_scope(dd, topics, partition, all_topics) if session_configs else []
        keyless = [] if drop_keyless else find_keyless(dd, guarded, roll=roll)
        enabled = dd.broker.get("log.cleaner.enable") and dd.broker.get("log.cleaner.threads") > 0
        with _remote_read_only(c, dd, topics, partition):
            previews = dry_run(_cleaner(c, dd), now, topics, partition, force=force, roll=roll)
    refused = {k.name for k in keyless}
    if not as_json:
        typer.echo(f"dry run at {now}: nothing is written" + (" (active segments as after --roll)" if roll else ""))
    for ex in previews:
        cleaned = would_clean(ex, force=force, enabled=enabled)
        if as_json:
            d = ex.to_dict()
            d["wouldClean"] = cleaned and ex.name not in refused
            d["refused"] = "keyless records" if ex.name in refused else None
            d.pop("retained")
            typer.echo(json.dumps(d))
            continue
        if not ex.status.compacted:
            if topics:
                typer.echo(f"{ex.name}: not cleaned: {ex.status.reason}")
            continue
        if not cleaned:
            reason = ex.status.reason if enabled or force else "log.cleaner.enable is false or log.cleaner.threads is 0"
            typer.echo(f"{ex.name}: not cleaned: {reason}")
            continue
        start, end = ex.dirty_range
        typer.echo(f"{ex.name}: cleaning [{start}, {end}) {ex.removal_text()}")
        for line in _tier_lines(ex.tiers, "would remove"):
            typer.echo(f"  {line}")
    if not as_json and not topics:
        _note_unknown_configs([ex.status for ex in previews])
    if keyless and not as_json:
        names = ", ".join(dict.fromkeys(k.topic for k in keyless))
        typer.echo(f"the clean would be refused: {sum(k.keyless for k in keyless)} records without a key in "
                   f"{names}, which only this run's --config compacts (--drop-keyless removes them)")


def _nothing_to_clean(outcomes, rolled: bool) -> str:
    """'nothing to clean', with each compacted partition's reason and what would change it."""
    rows = [o for o in outcomes if o.status is not None and o.status.compacted]
    if not rows:
        if any(o.status is not None and o.status.unknown_configs for o in outcomes):
            return "nothing to clean: no topic with known configs has cleanup.policy=compact (see the note above)"
        return ("nothing to clean: no topic has cleanup.policy=compact (set it with `compactlog topics alter "
                "--topic T --config cleanup.policy=compact`)")
    lines = ["nothing to clean:"]
    for o in rows:
        reason = o.status.reason
        hint = ""
        if reason.startswith("active segment") and not rolled:
            hint = ("; Kafka never cleans the active segment: `clean --roll` rolls it first (offline "
                    "compaction), a broker rolls it after segment.ms / segment.bytes")
        elif reason.startswith("dirty ratio"):
            hint = "; `clean --force` ignores the ratio"
        elif reason.startswith("min.compaction.lag.ms"):
            hint = "; `clean --force` ignores the lag"
        lines.append(f"  {o.name}: {reason}{hint}")
    return "\n".join(lines)


@app.command("explain")
def explain_cmd(ctx: typer.Context,
                topic: str = typer.Option(..., "--topic"),
                partition: int = typer.Option(None, "--partition", help="Only this partition (default: every "
                                              "partition of the topic)."),
                now_ms: int = typer.Option(None, "--now-ms", help="Explain a clean at this time (default: now)."),
                config: list[str] = typer.Option(None, "--config", help="A topic config K=V, as `clean --config` "
                                                 "would set it for one run; repeatable."),
                roll: bool = typer.Option(False, "--roll", help="Explain a clean after `clean --roll` (the "
                                          "active segment included); nothing is rolled."),
                as_json: bool = typer.Option(False, "--json")):
    """What a clean at --now-ms would remove (by reason) and when each kept tombstone or marker goes.
    Writes nothing."""
    from ..cleaner.cleaner import Cleaner, compacted_partitions
    from ..cleaner.explain import explain_partition
    from ..cleaner.offline import compacted_by_session
    from ..storage.config import LogConfig
    c = context(ctx)
    if "://" in (c.data_dir or ""):
        # the cleaner's view of a log needs a directory: a scratch copy of the bucket, removed after
        from .bucket_dir import staged
        with staged(c):
            return explain_cmd(ctx, topic, partition, now_ms, config, roll, as_json)
    session_configs = parse_configs(config)
    now = _now(now_ms)
    with c.open(write=False, now_ms=now, session_configs=session_configs) as dd:
        if session_configs:
            LogConfig(session_configs, dd.broker)   # every name and value checked before anything runs
        cleaner = _cleaner(c, dd)
        with _remote_read_only(c, dd, [topic], partition):
            explanations = [explain_partition(cleaner, t, p, now, roll=roll)
                            for t, p in compacted_partitions(dd, topic, partition)]
        guarded = set(compacted_by_session(dd, topic, partition))
        pairs = [(ex.topic, ex.partition) for ex in explanations]
        # a bucket copy: where its segments are read from (never the original broker's remote tier)
        tiers = _bucket_tiers(c, dd, pairs) if c.segment_sources is not None else _tiers(dd, pairs)
    for ex in explanations:
        refused = (ex.topic, ex.partition) in guarded and ex.removed.get("keyless", 0) > 0
        if as_json:
            d = ex.to_dict()
            d["refusedWithoutDropKeyless"] = refused
            d["tiers"] = tiers.get((ex.topic, ex.partition))
            typer.echo(json.dumps(d, indent=2 if partition is not None else None))
        else:
            _explain_text(ex, roll)
            if (ex.topic, ex.partition) in tiers:
                d = tiers[(ex.topic, ex.partition)]
                typer.echo(f"  {_bucket_tiers_text(d) if 'objectStore' in d else _tiers_text(d)}")
            if refused:
                typer.echo(f"  `clean --config` refuses this partition unless --drop-keyless is given: the topic is "
                           f"compacted only by --config, and compacting removes its {ex.removed['keyless']} records "
                           f"without a key")


def _explain_text(ex, roll: bool) -> None:
    st = ex.status
    typer.echo(f"{ex.topic}-{ex.partition} at {ex.now_ms}{' (as after --roll)' if ex.rolled else ''}:")
    if not st.compacted:
        typer.echo(f"  not compacted: {st.reason}")
        return
    typer.echo(f"  dirty range [{st.first_dirty}, {st.first_uncleanable}), dirty ratio {st.dirty_ratio:.4f} "
               f"(min.cleanable.dirty.ratio {st.min_cleanable_dirty_ratio})")
    if ex.would_clean:
        typer.echo(f"  eligible: {st.reason}")
    else:
        typer.echo(f"  not eligible: {st.reason}")
        if st.next_eligible_ms:
            typer.echo(f"  eligible from: {st.next_eligible_ms}")
        if not roll and st.reason.startswith("active segment") and st.log_end_offset > st.first_dirty:
            typer.echo("  `explain --roll` shows what `clean --roll` would do (offline compaction)")
        if ex.forced:
            typer.echo("  what `clean --force` would do:")
        else:
            return
    typer.echo(f"  records read {ex.records_read}, kept {ex.records_kept}")
    typer.echo(f"  {ex.removal_text()}")
    for line in _tier_lines(ex.tiers, "would remove"):
        typer.echo(f"  {line}")
    if ex.removed:
        for reason, n in sorted(ex.removed.items()):
            typer.echo(f"  removed: {n} {reason}")
    else:
        typer.echo("  removed: nothing")
    for item in ex.retained:
        key = f" key {item.key}" if item.key is not None else ""
        typer.echo(f"  kept {item.kind} at offset {item.offset}{key}: {item.note}")


@cleaner_app.command("status")
def status_cmd(ctx: typer.Context,
               topic: str = typer.Option(None, "--topic"),
               now_ms: int = typer.Option(None, "--now-ms"),
               as_json: bool = typer.Option(False, "--json"),
               bootstrap_server: str = typer.Option(None, "--bootstrap-server",
                                                    help="A live broker's state (HOST:PORT), read from its HTTP "
                                                         "listener (metrics.listener) instead of a data dir."),
               metrics_url: str = typer.Option(None, "--metrics-url",
                                               help="A live broker's state from its HTTP listener at this URL "
                                                    "(e.g. http://127.0.0.1:9644) instead of a data dir.")):
    """Per compacted partition: dirty ratio, cleanable range, eligible or why not, next eligible time."""
    if bootstrap_server or metrics_url:
        return _live_status(topic, now_ms, as_json, bootstrap_server, metrics_url)
    from ..cleaner.cleaner import Cleaner
    from ..cleaner.plan import select_logs
    c = context(ctx)
    now = _now(now_ms)
    with c.open(write=False, now_ms=now) as dd:
        # a tiered partition's range over both tiers, as `clean` decides it (manifests read, GET only)
        with _remote_read_only(c, dd, [topic] if topic else None, None):
            statuses = [s for s in Cleaner(dd).statuses(now, topic) if s.compacted or s.unknown_configs]
        tiers = _tiers(dd, [(s.topic, s.partition) for s in statuses])
    ratios = [s.dirty_ratio for s in statuses if s.clean_bytes + s.cleanable_bytes > 0]
    max_dirty = int(100 * max(ratios)) if ratios else 0
    order = {(s.topic, s.partition): i for i, s in enumerate(select_logs(statuses))}
    rows = []
    for s in statuses:
        d = s.to_dict()
        d["cleaningOrder"] = order.get((s.topic, s.partition))
        if (s.topic, s.partition) in tiers:
            d["tiers"] = tiers[(s.topic, s.partition)]
        rows.append(d)
    _print_status(rows, max_dirty, now, as_json)


def _tiers(dd, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """(topic, partition) -> its tiers (``RemoteTier.describe``) for the tiered ones, when the
    data dir's broker config names a store (the bucket is read, never written)."""
    from ..storage.remote.tiered_read import RemoteTier
    tier = RemoteTier.of(dd)
    if tier is None:
        return {}
    out = {}
    for t, p in partitions:
        d = tier.describe(t, p) if tier.tiered(t) else None
        if d is not None:
            out[(t, p)] = d
    return out


def _bucket_tiers(c, dd, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """(topic, partition) -> where a bucket's segments are read from (``explain`` over a copied
    data dir): every segment an object of the bucket, named by its URL, read by ranged GETs."""
    out = {}
    for t, p in partitions:
        log = dd.open_log(t, p)
        source = c.segment_sources(log)
        segs = log.segments
        rows = [{"baseOffset": s.base_offset, "endOffset": segs[i + 1].base_offset if i + 1 < len(segs) else None,
                 "size": s.size, "tier": "bucket", "location": source.location(s.base_offset)}
                for i, s in enumerate(segs)]
        out[(t, p)] = {"objectStore": source.location(), "segmentCount": len(rows),
                       "sizeBytes": sum(r["size"] for r in rows), "segments": rows}
    return out


def _bucket_tiers_text(d: dict) -> str:
    """``tiers: bucket 5 segment(s), 80000 bytes, read from s3://b/dd/t-0 (objects 0-4 .log)``."""
    segs = d["segments"]
    first, last = (segs[0]["location"], segs[-1]["location"]) if segs else ("", "")
    return (f"tiers: bucket {d['segmentCount']} segment(s), {d['sizeBytes']} bytes, read from {d['objectStore']} "
            f"by ranged GETs (no local copy)" + (f"; first {first}, last {last}" if segs else ""))


def _tiers_text(d: dict) -> str:
    """``tiers: remote 5 segment(s), 80 KiB, offsets 0-1299; local from 1300; copy lag 0 segment(s)``."""
    n = d["remoteSegmentCount"]
    remote = (f"remote {n} segment(s), {d['remoteSizeBytes']} bytes, offsets {d['remoteStartOffset']}-"
              f"{d['highestRemoteOffset']}" if n else "remote none")
    lag = d.get("copyLagSegments")
    lag_text = f"; copy lag {lag} segment(s), {d['copyLagBytes']} bytes" if lag is not None else ""
    return f"tiers: {remote}; local from offset {d['localLogStartOffset']}{lag_text}"


def _live_status(topic: str | None, now_ms: int | None, as_json: bool, bootstrap: str | None,
                 metrics_url: str | None) -> None:
    """``cleaner status`` of a running broker: the rows its status document carries."""
    from .live_status import broker_status_address, check_same_broker, fetch_status, status_url
    if bootstrap and metrics_url:
        fail("--bootstrap-server and --metrics-url exclude each other: give one", 2)
    if now_ms is not None:
        fail("--now-ms applies to a data dir; a live broker reports its state at its own clock", 2)
    if metrics_url:
        url = status_url(metrics_url)
        doc = fetch_status(url)
    else:
        identity, base = broker_status_address(bootstrap)
        url = status_url(base)
        doc = fetch_status(url)
        check_same_broker(doc, identity, url, bootstrap)    # never another broker's partitions
    rows = doc["cleaner"]["statuses"]
    if topic is not None:
        if not any(t["name"] == topic for t in doc.get("topics", [])):
            fail(f"topic {topic!r} does not exist on the broker ({bootstrap or url})")
        rows = [r for r in rows if r["topic"] == topic]
    ratios = [r["dirty_ratio"] for r in rows if r["clean_bytes"] + r["cleanable_bytes"] > 0]
    max_dirty = int(100 * max(ratios)) if ratios else 0
    _print_status(rows, max_dirty, doc["nowMs"], as_json)


def _print_status(rows: list[dict], max_dirty: int, now: int, as_json: bool) -> None:
    """The rows of ``cleaner status`` (``PartitionStatus.to_dict`` with ``cleaningOrder``), offline
    or from a live broker, in one format."""
    if as_json:
        for d in rows:
            typer.echo(json.dumps(d))
        typer.echo(json.dumps({"maxDirtyPercent": max_dirty, "nowMs": now}))
        return
    from rich.console import Console
    from rich.table import Table
    table = Table("partition", "dirty ratio", "cleanable range", "eligible", "why / next eligible")
    for d in rows:
        why = d["reason"] + (f"; eligible from {d['next_eligible_ms']}" if d["next_eligible_ms"] else "")
        table.add_row(f"{d['topic']}-{d['partition']}", f"{d['dirty_ratio']:.4f}",
                      f"[{d['first_dirty']}, {d['first_uncleanable']})", "yes" if d["eligible"] else "no", why)
    console = Console(width=160)
    console.print(table)
    for d in rows:
        if d.get("tiers"):
            console.print(f"{d['topic']}-{d['partition']} {_tiers_text(d['tiers'])}", markup=False, highlight=False)
    console.print(f"max-dirty-percent: {max_dirty}")


@cleaner_app.command("run")
def run_cmd(ctx: typer.Context,
            engine: str = typer.Option("spark", "--engine", help="spark (default) or local."),
            spark_master: str = typer.Option(None, "--spark-master"),
            iterations: int = typer.Option(0, "--iterations", help="Stop after this many runs (0: until interrupted)."),
            log_dir: str = typer.Option(None, "--log-dir", help="Where the cleaner's run log (log-cleaner.log) goes; "
                                        "default compactlog.cleaner.log.dir, else DIR.logs next to the data dir.")):
    """A long-running cleaner: cleans every log.cleaner.backoff.ms, retention every log.retention.check.interval.ms."""
    from ..cleaner.service import CleanerService
    c = context(ctx)
    if iterations < 0:
        fail(f"--iterations must be 0 (until interrupted) or more, got {iterations}", 2)
    from ..cleaner.log_format import cleaner_log_dir
    cleaner_log_dir(c.require_data_dir(), c.broker(), log_dir)     # a bad --log-dir fails before anything
    executor = _executor(c, engine, spark_master)
    from .common import InterruptToStop, dump_stacks_on_sigquit
    dump_stacks_on_sigquit()
    # the first ^C lets the round under way finish (its files swapped in or left for the loader to
    # undo, never half-written), the second stops at once
    interrupt = InterruptToStop("cleaner run: stopping after this round (^C again to stop now)\n")
    from .clean_progress import CleanProgress
    runner = CleanProgress(executor, enabled=os.isatty(2))
    with interrupt, c.open(write=True) as dd, runner, _remote_for_clean(c, dd, None, None) as remote:
        # tiered compacted partitions: their remote tier cleaned with the local segments, as by
        # the broker's cleaner (storage/remote/offline.py); replaced objects deleted between rounds
        # once their grace period is over
        def between_rounds():
            # PySpark's SparkContext, made on this thread during a round, puts in its own handler
            interrupt.keep()
            if remote is not None:
                remote.finish()
        try:
            service = CleanerService(dd, runner, log_dir=log_dir)
            service.on_outcomes = runner.round_done
            service.between_rounds = between_rounds
            service.run(interrupt.stop, iterations=iterations)
        except KeyboardInterrupt:
            pass
    typer.echo("cleaner run: " + runner.totals.text(rounds=True))
