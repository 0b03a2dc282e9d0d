"""A bucket URL given as ``--data-dir`` (``s3://bucket/prefix``, ``file:///dir``): the read-only
commands list its partitions (``storage.remote.bucket``) instead of opening a directory;
``explain`` and ``clean``, whose engine works on a log directory, run on a local shadow of it whose
segments are read from their objects (``staged``; no copy of the data on local disk), and ``clean``
writes its result as a new generation of the bucket (``publish``)."""

from __future__ import annotations

import os
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
    from ..storage.remote.bucket import use_settings
    from ..storage.remote.bucket_clean import shadow_generation
    use_settings(c.overrides)       # the URL is parsed and listed (once) by shadow_generation
    url = c.require_data_dir()
    try:
        with shadow_generation(url) as gen:
            c.data_dir = gen.shadow
            c.segment_sources = gen.sources
            yield gen.shadow
            c.data_dir = url
            if clean:
                publish(c, gen, as_json=as_json)
    finally:
        c.data_dir = url
        c.segment_sources = None


def publish(c, gen, *, as_json: bool) -> bool:
    """The shadow as the bucket's new generation (``ShadowGeneration.publish``), said on stderr."""
    import typer
    done = gen.publish()
    if done is None:
        return False
    if not as_json:
        # `aws s3 sync` takes no file:// URL: a directory store's generation is a local directory
        back = (f"rsync -a --delete {done['url'][len('file://'):]}/ DATADIR/" if done["url"].startswith("file://")
                else f"aws s3 sync --delete {done['url']}/ DATADIR")
        typer.echo(f"cleaned copy written to {done['url']}/ and switched to ({done['switch']}, "
                   f"generation {done['generation']}); the objects under {done['read']} are left as they were. "
                   f"A Kafka broker's copy: {back}"
                   + (f"; {done['swept']} object(s) of older generations deleted" if done["swept"] else ""), err=True)
    return True


def sweep_generations(root, keep: set) -> int:
    from ..storage.remote.bucket_clean import sweep_generations as sweep
    return sweep(root, keep)
