"""A bucket URL given as ``--data-dir`` (``s3://bucket/prefix``, ``file:///dir``): the read-only
commands list its partitions (``storage.remote.bucket``) instead of opening a directory."""

from __future__ import annotations

from ..errors import TopicError


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
