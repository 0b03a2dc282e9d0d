import pytest

from compactlog.errors import StorageError
from compactlog.storage import meta_properties


def test_read_and_node_id(tmp_path):
    assert meta_properties.read(str(tmp_path)) == {}
    (tmp_path / "meta.properties").write_text("#\n! a comment\ncluster.id=abc\nbroker.id = 7\nversion=0\n")
    props = meta_properties.read(str(tmp_path))
    assert props == {"cluster.id": "abc", "broker.id": "7", "version": "0"}
    assert meta_properties.stored_node_id(str(tmp_path), props) == 7
    assert meta_properties.stored_node_id(str(tmp_path), {"node.id": "3", "broker.id": "7"}) == 3
    assert meta_properties.stored_node_id(str(tmp_path), {}) is None


def test_bad_lines_and_ids_name_the_file(tmp_path):
    (tmp_path / "meta.properties").write_text("cluster.id=abc\nnonsense\n")
    with pytest.raises(StorageError, match=r"meta.properties: line 2: expected key=value"):
        meta_properties.read(str(tmp_path))
    with pytest.raises(StorageError, match="node.id 'x' is not a number"):
        meta_properties.stored_node_id(str(tmp_path), {"node.id": "x"})
