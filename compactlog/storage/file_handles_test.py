"""The LRU of open segment files: bounded, pinned while used, reopened only as the same file."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from compactlog.errors import StorageError
from compactlog.storage import file_handles
from compactlog.storage.file_handles import (FileHandleCache, PooledFile, TooManyOpenFilesError, default_budget,
                                             too_many_open_files)


def make(tmp_path, n: int, cache: FileHandleCache) -> list[PooledFile]:
    out = []
    for i in range(n):
        p = tmp_path / f"{i}.log"
        p.write_bytes(b"file %d" % i)
        out.append(PooledFile(str(p), os.O_RDONLY, cache=cache))
    return out


def read(handle: PooledFile) -> bytes:
    with handle.use() as fd:
        return os.pread(fd, 100, 0)


def test_at_most_the_budget_is_open_least_recently_used_closed_first(tmp_path):
    cache = FileHandleCache(budget=3)
    handles = make(tmp_path, 10, cache)
    for i, h in enumerate(handles):
        assert read(h) == b"file %d" % i
        assert cache.open_count() <= 3
    assert [h.is_open for h in handles] == [False] * 7 + [True] * 3
    read(handles[7])                    # used again: the most recent now
    read(handles[0])                    # evicts 8, the least recently used
    assert handles[7].is_open and handles[0].is_open and not handles[8].is_open
    assert [read(h) for h in handles] == [b"file %d" % i for i in range(10)]


def test_a_pinned_descriptor_is_never_closed_under_its_user(tmp_path):
    cache = FileHandleCache(budget=2)
    handles = make(tmp_path, 5, cache)
    with handles[0].use() as fd0:
        for h in handles[1:]:
            read(h)
        assert handles[0].is_open and os.pread(fd0, 100, 0) == b"file 0"
    read(handles[1])
    read(handles[2])
    assert cache.open_count() == 2 and not handles[0].is_open


def test_a_file_replaced_since_it_was_opened_fails_instead_of_reading_the_new_one(tmp_path):
    cache = FileHandleCache(budget=1)
    a, b = make(tmp_path, 2, cache)
    read(a)
    read(b)                             # a evicted
    os.replace(tmp_path / "1.log", tmp_path / "0.log")      # a's path now names another file
    with pytest.raises(StorageError, match="replaced by another file"):
        read(a)


def test_rename_follows_the_file_and_close_ends_the_handle(tmp_path):
    cache = FileHandleCache(budget=1)
    p = tmp_path / "0.log"
    p.write_bytes(b"x")
    h = PooledFile(str(p), os.O_RDWR, cache=cache)
    read(h)
    h.rename(str(tmp_path / "0.log.swap"))
    read(make(tmp_path, 1, cache)[0])                       # evicts h
    assert not h.is_open
    assert read(h) == b"x" and h.path.endswith(".swap")
    h.close()
    with pytest.raises(OSError) as e:
        read(h)
    assert e.value.errno == errno.EBADF
    assert cache.open_count() <= 1


def test_close_while_pinned_closes_after_the_last_use(tmp_path):
    cache = FileHandleCache(budget=4)
    h = make(tmp_path, 1, cache)[0]
    with h.use() as fd:
        h.close()
        assert os.pread(fd, 100, 0) == b"file 0"     # still this file's descriptor
    assert not h.is_open and cache.open_count() == 0


def test_dup_outlives_the_handle(tmp_path):
    cache = FileHandleCache(budget=1)
    h = make(tmp_path, 1, cache)[0]
    fd = h.dup()
    try:
        h.close()
        os.remove(h.path)
        assert os.pread(fd, 100, 0) == b"file 0"
    finally:
        os.close(fd)


def test_threads_reading_through_a_tiny_cache_always_read_their_own_file(tmp_path):
    cache = FileHandleCache(budget=2)
    handles = make(tmp_path, 12, cache)
    errors = []

    def worker(k):
        for n in range(300):
            i = (k * 7 + n) % len(handles)
            got = read(handles[i])
            if got != b"file %d" % i:
                errors.append((i, got))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and cache.open_count() <= 2 + 4      # pinned ones may exceed it briefly


def test_emfile_evicts_once_then_names_ulimit(tmp_path, monkeypatch):
    cache = FileHandleCache(budget=100)
    handles = make(tmp_path, 3, cache)
    read(handles[0])
    read(handles[1])
    real_open = os.open
    calls = []

    def refusing(path, flags, *a):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, flags, *a)

    monkeypatch.setattr(file_handles.os, "open", refusing)
    assert read(handles[2]) == b"file 2"          # made room (half the open ones) and retried
    assert len(calls) == 2 and cache.open_count() <= 2

    monkeypatch.setattr(file_handles.os, "open",
                        lambda path, flags, *a: (_ for _ in ()).throw(OSError(errno.EMFILE, "x", path)))
    handles[0].close()
    fresh = make(tmp_path, 1, cache)[0]
    with pytest.raises(TooManyOpenFilesError) as e:
        read(fresh)
    assert "ulimit -n" in str(e.value) and "\n" not in str(e.value)


def test_budget_leaves_room_for_sockets():
    assert default_budget(1024) == 512
    assert default_budget(20000) == 10000
    assert default_budget(300) == 44
    assert default_budget(64) == 16
    msg = str(too_many_open_files("/d/t-0/00000000000000000000.log"))
    assert msg.startswith("/d/t-0/00000000000000000000.log: too many open files (ulimit -n is ")
