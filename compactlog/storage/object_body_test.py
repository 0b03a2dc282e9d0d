"""object_body: the mark of a file whose bytes are an object, with and without the file system's
extended attributes (the fallback keeps marks by inode, which a new file can be given)."""

from __future__ import annotations

import errno
import os

import pytest

from compactlog.storage import object_body

OBJECTS = {"dd/t-0/00000000000000000000.log": bytes(range(256)) * 40}


def get_range(key: str, start: int, end: int) -> bytes:
    return OBJECTS[key][start:end]


@pytest.fixture(params=["xattr", "by-inode"])
def marks(request, monkeypatch, tmp_path):
    """Marks kept as extended attributes (where tmp_path's file system has them) or, as on a file
    system without user attributes, by inode in this process."""
    if request.param == "xattr":
        probe = tmp_path / "probe"
        probe.write_bytes(b"")
        try:
            os.setxattr(probe, object_body.XATTR, b"x")
        except OSError:
            pytest.skip("this file system keeps no user extended attributes")
    else:
        def unsupported(*_a, **_k):
            raise OSError(errno.ENOTSUP, "Operation not supported")
        monkeypatch.setattr(os, "setxattr", unsupported)
        monkeypatch.setattr(os, "getxattr", unsupported)
    with object_body.activate(get_range):
        yield request.param


KEY = "dd/t-0/00000000000000000000.log"


def test_a_marked_file_reads_its_object_and_keeps_its_mark_across_renames(marks, tmp_path):
    path = tmp_path / "00000000000000000000.log"
    object_body.mark(str(path), KEY, len(OBJECTS[KEY]))
    assert path.stat().st_size == len(OBJECTS[KEY]) and path.stat().st_blocks == 0
    body = object_body.body_of(str(path))
    assert body.read(100, 50, len(OBJECTS[KEY])) == OBJECTS[KEY][100:150]
    assert body.whole(len(OBJECTS[KEY])) == OBJECTS[KEY]
    for name in ("00000000000000000000.log.swap", "00000000000000000000.log.deleted"):
        new = tmp_path / name
        os.rename(path, new)
        path = new
        assert object_body.key_of(str(path)) == KEY
    os.truncate(path, 1000)         # the loader cutting a torn tail keeps what it reads
    assert object_body.key_of(str(path)) == KEY


def test_a_new_file_given_a_deleted_marked_files_inode_is_read_from_disk(marks, tmp_path):
    # ext4 and tmpfs give a freed inode number to the next file created: by inode alone the new
    # file was taken for the old object and its own bytes were never read (failed before)
    for attempt in range(20):
        old = tmp_path / f"{attempt}.log"
        object_body.mark(str(old), KEY, len(OBJECTS[KEY]))
        ino = old.stat().st_ino
        old.unlink()
        new = tmp_path / f"{attempt}.new.log"
        new.write_bytes(b"real bytes of a new segment")
        if new.stat().st_ino == ino:
            break
        new.unlink()
    else:
        pytest.skip("this file system did not reuse the inode")
    assert object_body.key_of(str(new)) is None
    empty = tmp_path / "empty.log"
    object_body.mark(str(empty), KEY, 0)
    assert object_body.key_of(str(empty)) in (None, KEY if marks == "xattr" else None)


def test_nothing_is_marked_where_no_run_is_active(tmp_path):
    path = tmp_path / "a.log"
    with object_body.activate(get_range):
        object_body.mark(str(path), KEY, 10)
    assert not object_body.active()
    assert object_body.key_of(str(path)) is None and object_body.body_of(str(path)) is None
