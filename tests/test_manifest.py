import json

from ferrylm.manifest import StageRecord, read_record, sha256_tree, write_json_atomic


def test_record_round_trip_and_tree_hash(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("one")
    h1 = sha256_tree(tmp_path / "a")
    (tmp_path / "a" / "x.txt").write_text("two")
    assert sha256_tree(tmp_path / "a") != h1
    rec = StageRecord("data", "abc", outputs={"x": "y"}, metrics={"n": 1}).finish(tmp_path)
    assert read_record(tmp_path)["metrics"] == {"n": 1}
    assert rec.seconds >= 0
    write_json_atomic(tmp_path / "z.json", {"k": 1})
    assert json.loads((tmp_path / "z.json").read_text()) == {"k": 1}
    assert not list(tmp_path.glob(".*tmp*"))
