"""A bucket URL given as ``--data-dir`` (``s3://bucket/prefix``, ``file:///dir``): the read-only
commands list its partitions (``storage.remote.bucket``) instead of opening a directory;
``explain`` and ``clean``, whose engine works on a log directory, run on a scratch copy of it
(``staged``), and ``clean`` writes its result back as a new generation of the bucket (``publish``)."""

from __future__ import annotations

import hashlib
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
    """The bucket's data dir (a copied Kafka data dir, shape a) fetched to a scratch directory
    for the commands whose engine works on a directory (``explain``, ``clean``), ``c.data_dir``
    pointing there meanwhile; removed after. With ``clean``, what the command changed is written
    back as a new generation and switched to (``publish``) when it returns normally."""
    from ..storage.remote import bucket as B
    listing = check_bucket(c)
    if any(p.shape == "remote-tier" for p in listing.partitions):
        raise CompactlogError(f"{listing.bucket.url}: a broker's remote tier is compacted by its broker "
                              f"(compactlog.remote.compaction.enable); offline, only a copied data dir is")
    _, etag = B.read_switch(B.parse_bucket_url(c.data_dir))
    url = c.data_dir
    parent = tempfile.mkdtemp(prefix="compactlog-bucket-")
    scratch = os.path.join(parent, "data")
    try:
        fetched = _fetch(listing, scratch)
        c.data_dir = scratch
        yield scratch
        c.data_dir = url
        if clean:
            publish(c, listing, scratch, fetched, etag, as_json=as_json)
    finally:
        c.data_dir = url
        shutil.rmtree(parent, ignore_errors=True)


def _fetch(listing, scratch: str) -> dict[str, tuple[int, bytes]]:
    """Every object of the data dir's prefix to ``scratch`` (one GET each): name -> (size, digest)."""
    store, prefix = listing.bucket.store, listing.bucket.prefix
    out = {}
    for key in listing.objects:
        rel = key[len(prefix):]
        if not rel or rel.endswith("/") or ".." in rel.split("/"):
            continue
        path = os.path.join(scratch, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = store.get(key).data
        with open(path, "wb") as f:
            f.write(data)
        out[rel] = (len(data), hashlib.blake2b(data, digest_size=16).digest())
    return out


def _digest(path: str) -> tuple[int, bytes]:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return os.path.getsize(path), h.digest()


def publish(c, listing, scratch: str, fetched: dict, etag: str | None, *, as_json: bool) -> None:
    """The cleaned data dir as a new generation: every file under a fresh sibling prefix
    (create-only), then the switch (``storage.remote.bucket``) by one conditional PUT. Nothing is
    written when the clean changed nothing; a switch another clean moved meanwhile loses (412):
    this run's objects are deleted and the error says so."""
    import json
    import time
    import typer
    from ..storage.remote import bucket as B
    from ..storage.remote import faults, keys
    from ..storage.remote.store import PreconditionFailed
    here = {}
    for d, _, names in os.walk(scratch):
        for n in names:
            full = os.path.join(d, n)
            here[os.path.relpath(full, scratch).replace(os.sep, "/")] = full
    if {rel: _digest(p) for rel, p in here.items()} == fetched:
        return
    root = B.parse_bucket_url(c.data_dir)
    doc, _ = B.read_switch(root)
    generation = (doc["generation"] if doc else 0) + 1
    base = root.prefix.rstrip("/")
    new_prefix = f"{base + '.' if base else ''}compactlog-{generation:06d}-{keys.new_uuid()[:8]}/"
    store = root.store
    written = []
    try:
        for rel, full in sorted(here.items()):
            with open(full, "rb") as f:
                store.put_if_absent(new_prefix + rel, f, size=os.path.getsize(full))
            written.append(new_prefix + rel)
    except BaseException:
        store.delete_many(written)      # not switched to: never read (a kill leaves them unread too)
        raise
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
        store.delete_many(written)
        raise CompactlogError(f"{c.data_dir}: another clean switched the bucket to a new generation during this "
                              f"one; nothing of this run was kept: run it again") from None
    except BaseException:
        # an answer lost (a timeout) may hide a switch that landed: the objects go only if it did not
        try:
            landed = (B.read_switch(root)[0] or {}).get("current") == new_prefix
        except Exception:       # noqa: BLE001 - unknown: keep the objects rather than risk the switch
            landed = True
        if not landed:
            store.delete_many(written)
        raise
    faults.maybe_die("bucket-clean-switch")
    swept = sweep_generations(root, keep={new_prefix, listing.bucket.prefix})
    url = root.url_of(new_prefix.rstrip("/"))
    if not as_json:
        typer.echo(f"cleaned copy written to {url}/ and switched to ({root.url_of(B.switch_key(root.prefix))}, "
                   f"generation {generation}); the objects under {listing.bucket.url} are left as they were. "
                   f"A Kafka broker's copy: aws s3 sync --delete {url}/ DATADIR"
                   + (f"; {swept} object(s) of older generations deleted" if swept else ""), err=True)


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
