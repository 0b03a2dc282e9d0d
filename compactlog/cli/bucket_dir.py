"""A bucket URL given as ``--data-dir`` (``s3://bucket/prefix``, ``file:///dir``): the read-only
commands list its partitions (``storage.remote.bucket``) instead of opening a directory;
``explain`` and ``clean``, whose engine works on a log directory, run on a local shadow of it whose
segments are read from their objects (``staged``; no copy of the data on local disk), and ``clean``
writes its result as a new generation of the bucket (``publish``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager

from ..errors import CompactlogError, TopicError


def check_bucket(c):
    """The bucket's listing, the command's ``--override`` store settings in force; a bad URL, a
    missing bucket, refused credentials or a prefix with no partitions: one error line."""
    from ..storage.remote.bucket import list_bucket, parse_bucket_url, use_settings
    use_settings(c.overrides)
    return list_bucket(parse_bucket_url(c.require_data_dir()))


def topic_sources(c, topic: str, partition: int | None = None) -> dict:
    """partition -> source of one topic of the bucket (a TopicError naming the topics there)."""
    from ..storage.remote.bucket import sources
    listing = check_bucket(c)
    found = {p.partition: src for p, src in sources(listing) if p.topic == topic}
    if not found:
        raise TopicError(f"topic {topic!r} does not exist in {listing.bucket.url} "
                         f"(topics there: {', '.join(listing.topics())})")
    if partition is not None:
        if partition not in found:
            raise TopicError(f"partition {topic}-{partition} does not exist in {listing.bucket.url} "
                             f"(partitions: {', '.join(map(str, sorted(found)))})")
        return {partition: found[partition]}
    return dict(sorted(found.items()))


@contextmanager
def staged(c, *, clean: bool = False, as_json: bool = False):
    """The bucket's data dir (a copied Kafka data dir, shape a) as a local *shadow* for the
    commands whose engine works on a directory (``explain``, ``clean``): its small files fetched,
    each segment's ``.log`` a sparse file whose bytes are read from its object
    (``storage.remote.bucket_clean``), ``c.data_dir`` pointing there meanwhile and the cleaner's
    plans reading and writing the objects (``c.segment_sources``); removed after. With ``clean``,
    the cleaned segments are written as objects of a new generation by the tasks, and the rest of
    the data dir is added to it and switched to (``publish``) when the command returns normally;
    a run that does not switch deletes what it wrote."""
    from ..storage import object_body
    from ..storage.remote import bucket as B
    from ..storage.remote.bucket_clean import ShadowDirSource, build_shadow
    listing = check_bucket(c)
    if any(p.shape == "remote-tier" for p in listing.partitions):
        raise CompactlogError(f"{listing.bucket.url}: a broker's remote tier is compacted by its broker "
                              f"(compactlog.remote.compaction.enable); offline, only a copied data dir is")
    root = B.parse_bucket_url(c.data_dir)
    doc, etag = B.read_switch(root)
    generation = (doc["generation"] if doc else 0) + 1
    base = root.prefix.rstrip("/")
    from ..storage.remote import keys
    out_prefix = f"{base + '.' if base else ''}compactlog-{generation:06d}-{keys.new_uuid()[:8]}/"
    read_config = listing.bucket.config
    url = c.data_dir
    parent = tempfile.mkdtemp(prefix="compactlog-bucket-")
    shadow = os.path.join(parent, "data")
    published = False
    try:
        with object_body.activate(read_config):
            fetched = build_shadow(listing, shadow)
            c.data_dir = shadow
            c.segment_sources = lambda log: ShadowDirSource.of(log, read_config, out_prefix, fetched)
            yield shadow
            c.data_dir = url
            if clean:
                published = publish(c, listing, shadow, fetched, generation, out_prefix, etag, as_json=as_json)
    finally:
        c.data_dir = url
        c.segment_sources = None
        shutil.rmtree(parent, ignore_errors=True)
        if clean and not published:
            _delete_prefix(root.store, out_prefix)


def _delete_prefix(store, prefix: str) -> None:
    """Whatever this run's tasks wrote under its generation (never switched to: never read)."""
    try:
        store.delete_many(m.key for m in store.list(prefix))
    except Exception:       # noqa: BLE001 - a killed generation is swept by the next clean's switch
        pass


def publish(c, listing, shadow: str, fetched: dict, generation: int, new_prefix: str, etag: str | None, *,
            as_json: bool) -> bool:
    """The cleaned data dir as a new generation: the cleaned segments are there already (the
    tasks' PUTs); every other file of the shadow is added, by a server-side copy of its object
    when it is the one read (CopyObject: no bytes through here), else a create-only PUT of the
    shadow's file (small ones: indexes, snapshots, checkpoints); anything else under the prefix
    (a dead task's object) is deleted; then the switch (``storage.remote.bucket``) by one
    conditional PUT. Nothing is written when the clean changed nothing (False); a switch another
    clean moved meanwhile loses (412): the error says so."""
    import json
    import time
    import typer
    from ..storage import object_body
    from ..storage.remote import bucket as B
    from ..storage.remote import faults
    from ..storage.remote.bucket_clean import file_digest
    from ..storage.remote.store import PreconditionFailed
    here = {}
    for d, _, names in os.walk(shadow):
        for n in names:
            full = os.path.join(d, n)
            here[os.path.relpath(full, shadow).replace(os.sep, "/")] = full
    read_prefix = listing.bucket.prefix
    plan = {}           # rel -> ("keep", key) | ("copy", src key) | ("put", path) | ("range", src key, size)
    for rel, full in sorted(here.items()):
        key = object_body.key_of(full)
        size = os.path.getsize(full)
        if key is not None:
            if key == new_prefix + rel:
                plan[rel] = ("keep",)
            elif key == read_prefix + rel and fetched.get(rel, (None, None))[1] == size:
                plan[rel] = ("copy", key)
            else:               # renamed by Kafka's loader (a .swap finished) or cut by recovery
                plan[rel] = ("range", key, size)
        elif fetched.get(rel, ("?",))[0] == "file" and fetched[rel][1:] == file_digest(full):
            plan[rel] = ("copy", read_prefix + rel)
        else:
            plan[rel] = ("put", full)
    unchanged = set(here) == set(fetched) and all(
        p[0] == "copy" and p[1] == read_prefix + rel for rel, p in plan.items())
    root = B.parse_bucket_url(c.data_dir)
    store = root.store
    if unchanged:
        return False
    for rel, p in plan.items():
        dst = new_prefix + rel
        if p[0] == "copy":
            store.copy(p[1], dst)
        elif p[0] == "put":
            with open(p[1], "rb") as f:
                store.put_if_absent(dst, f, size=os.path.getsize(p[1]))
        elif p[0] == "range":
            store.put_if_absent(dst, store.get_range(p[1], 0, p[2]) if p[2] else b"")
    stray = [m.key for m in store.list(new_prefix) if m.key[len(new_prefix):] not in plan]
    store.delete_many(stray)
    faults.maybe_die("bucket-clean-objects")
    switch = json.dumps({"version": 1, "generation": generation, "current": new_prefix,
                         "previous": listing.bucket.prefix, "cleanedAtMs": int(time.time() * 1000)},
                        indent=2).encode() + b"\n"
    try:
        if etag is None:
            store.put_if_absent(B.switch_key(root.prefix), switch)
        else:
            store.put_if_match(B.switch_key(root.prefix), switch, etag)
    except PreconditionFailed:
        raise CompactlogError(f"{c.data_dir}: another clean switched the bucket to a new generation during this "
                              f"one; nothing of this run was kept: run it again") from None
    except BaseException:
        # an answer lost (a timeout) may hide a switch that landed: the objects go only if it did not
        try:
            landed = (B.read_switch(root)[0] or {}).get("current") == new_prefix
        except Exception:       # noqa: BLE001 - unknown: keep the objects rather than risk the switch
            landed = True
        if landed:
            return True
        raise
    faults.maybe_die("bucket-clean-switch")
    swept = sweep_generations(root, keep={new_prefix, listing.bucket.prefix})
    url = root.url_of(new_prefix.rstrip("/"))
    if not as_json:
        typer.echo(f"cleaned copy written to {url}/ and switched to ({root.url_of(B.switch_key(root.prefix))}, "
                   f"generation {generation}); the objects under {listing.bucket.url} are left as they were. "
                   f"A Kafka broker's copy: aws s3 sync --delete {url}/ DATADIR"
                   + (f"; {swept} object(s) of older generations deleted" if swept else ""), err=True)
    return True


def sweep_generations(root, keep: set) -> int:
    """Delete the objects of this prefix's generations other than ``keep`` (the one just switched
    to and the one it was cleaned from, which readers that resolved the switch before may still
    be reading): older generations, and those of cleans killed before their switch. Only keys of
    the generation form ``<prefix>.compactlog-<6 digits>-<8 id chars>/`` are touched; the
    objects the first clean read (``<prefix>/``) are never among them."""
    import re
    base = root.prefix.rstrip("/")
    head = f"{base}.compactlog-" if base else "compactlog-"
    form = re.compile(re.escape(head) + r"\d{6}-[A-Za-z0-9_-]{8}/")
    doomed = []
    for meta in root.store.list(head):
        m = form.match(meta.key)
        if m and m.group(0) not in keep:
            doomed.append(meta.key)
    root.store.delete_many(doomed)
    return len(doomed)
