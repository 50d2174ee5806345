import pytest

from ferrylm.config import load_config
from ferrylm.data import EmptyCorpus, run_data
from ferrylm.data.corpus import ScanStats, scan

GOOD = "def f(x):\n    return x\n" * 8  # 16 lines, 200 chars


def _cfg(root, *extra):
    return load_config("default", [f"data.sources=[{root}]", *extra]).data


def test_seed_filters_count_each_drop(tmp_path):
    (tmp_path / "keep.py").write_text(GOOD)
    (tmp_path / "keep.go").write_text(GOOD)
    (tmp_path / "notes.txt").write_text(GOOD)                      # not a code extension: not seen
    (tmp_path / "short.py").write_text("x = 1\n")                  # <= 100 chars
    (tmp_path / "few_lines.py").write_text("x = 1  # " + "a" * 200)  # < 10 lines
    (tmp_path / "huge.py").write_text("x = 1\n" * 10_000)           # >= 50,000 chars
    (tmp_path / "bin.c").write_bytes(b"\0\1\2" * 100)
    (tmp_path / "latin1.py").write_bytes(("# caf\xe9\n" + GOOD).encode("latin-1"))
    for skipped in ("node_modules", "build", "__pycache__", ".git"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "x.py").write_text(GOOD)
    (tmp_path / "link.py").symlink_to(tmp_path / "keep.py")
    stats = ScanStats()
    kept = sorted(f.rel for f in scan(_cfg(tmp_path), stats))
    assert kept == ["keep.go", "keep.py"]
    assert dict(stats.dropped) == {"too_short_chars": 1, "too_few_lines": 1, "too_long_chars": 1,
                                   "binary": 1, "not_utf8": 1, "not_regular_file": 1}
    assert stats.seen == 8


def test_missing_and_empty_sources_fail_clearly(tmp_path, tiny_qwen2_dir):
    with pytest.raises(FileNotFoundError, match="data.sources: .* is not a directory"):
        list(scan(_cfg(tmp_path / "nope"), ScanStats()))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.md").write_text("no code here")
    cfg = load_config("default", [f"data.sources=[{empty}]", f"model.path={tiny_qwen2_dir}", f"run_dir={tmp_path / 'run'}"])
    with pytest.raises(EmptyCorpus, match="no code files passed the filters"):
        run_data(cfg)
    assert not (tmp_path / "run").exists()  # nothing half-written
