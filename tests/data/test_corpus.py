import os

import pytest

from ferrylm.config import load_config
from ferrylm.data import EmptyCorpus, run_data
from ferrylm.data.collect import CleanStats, collect
from ferrylm.data.corpus import (
    ManifestError,
    ScanStats,
    load_manifest,
    manifest_from_layout,
    read_checked,
    repository_roots,
    trees,
    walk,
)
from ferrylm.source import go_std

GOOD = "def f(x):\n    return x\n" * 8  # 16 lines, 200 chars


def _cfg(*sources, extra=()):
    return load_config("default", [f"data.sources=[{','.join(map(str, sources))}]", "data.workers=1", *extra]).data


def _kept(cfg):
    stats, clean = ScanStats(), CleanStats()
    docs = list(collect(cfg, stats, clean, want_pairs=False))
    return sorted(d.ref.rel for d in docs), stats, clean


def test_seed_filters_count_each_drop(tmp_path):
    root = tmp_path / "repos"
    repo = root / "r1"
    repo.mkdir(parents=True)
    (repo / "keep.py").write_text(GOOD)
    (repo / "keep.go").write_text(GOOD.replace("def", "func"))
    (repo / "notes.txt").write_text(GOOD)  # not a code extension: not seen
    (repo / "short.py").write_text("x = 1\n")  # <= 100 chars
    (repo / "few_lines.py").write_text("x = 1  # " + "a" * 200)  # < 10 lines
    (repo / "huge.py").write_text("x = 1\n" * 10_000)  # >= 50,000 chars
    (repo / "bin.c").write_bytes(b"\0\1\2" * 100)
    (repo / "latin1.py").write_bytes(("# caf\xe9\n" + GOOD).encode("latin-1"))
    for skipped in ("node_modules", "build", "__pycache__", ".git"):
        (repo / skipped).mkdir()
        (repo / skipped / "x.py").write_text(GOOD)
    (repo / "link.py").symlink_to(repo / "keep.py")
    (repo / "dangling.c").symlink_to(repo / "gone.c")
    (repo / "loop").symlink_to(repo)  # a symlink loop: never followed
    os.mkfifo(repo / "pipe.py")  # opening it would block
    (root / "empty_repo").mkdir()
    kept, stats, _ = _kept(_cfg(root))
    assert kept == ["repos/r1/keep.go", "repos/r1/keep.py"]
    assert dict(stats.dropped) == {
        "too_short_chars": 1,
        "too_few_lines": 1,
        "too_long_chars": 1,
        "binary": 1,
        "not_utf8": 1,
        "symlink": 2,
        "not_regular_file": 1,
    }
    assert stats.seen == 10
    assert stats.skipped == {"excluded_dir": 4, "symlinked_dir": 1}
    assert dict(stats.by_language) == {"python": 1, "go": 1}


def test_file_that_vanishes_mid_scan_is_counted(tmp_path):
    repo = tmp_path / "src" / "r"
    repo.mkdir(parents=True)
    for i in range(3):
        (repo / f"m{i}.py").write_text(GOOD + f"# {i}\n")
    cfg = _cfg(tmp_path / "src")
    refs = [r for t in trees(cfg) for r in walk(t, cfg, ScanStats())]
    (repo / "m1.py").unlink()  # gone between listing and reading
    reasons = [read_checked(r.path, cfg)[2] for r in refs]
    assert reasons == [None, "vanished", None]


def test_missing_and_empty_sources_fail_clearly(tmp_path, tiny_qwen2_dir):
    with pytest.raises(FileNotFoundError, match="data.sources: .* is not a directory"):
        _kept(_cfg(tmp_path / "nope"))
    empty = tmp_path / "empty"
    (empty / "repo").mkdir(parents=True)
    (empty / "repo" / "readme.md").write_text("no code here")
    cfg = load_config(
        "default", [f"data.sources=[{empty}]", f"model.path={tiny_qwen2_dir}", f"run_dir={tmp_path / 'run'}"]
    )
    with pytest.raises(EmptyCorpus, match="no code files passed the filters"):
        run_data(cfg)
    assert not list((tmp_path / "run").rglob("*.arrow"))  # nothing half-written


def test_manifest_from_the_seed_layout(tmp_path):
    for prio, lang, repo in [
        ("high_priority", "python", "a"),
        ("high_priority", "go", "b"),
        ("medium_priority", "rust", "c"),
    ]:
        d = tmp_path / "codes" / prio / lang / repo
        d.mkdir(parents=True)
        (d / "x.py").write_text(GOOD + f"# {repo}\n")
    doc = manifest_from_layout(tmp_path / "codes")
    assert [(r["name"], r["priority"], r["language"]) for r in doc["repositories"]] == [
        ("go/b", "high_priority", "go"),
        ("python/a", "high_priority", "python"),
        ("rust/c", "medium_priority", "rust"),
    ]
    import yaml

    path = tmp_path / "repos.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert [t.name for t in load_manifest(path)] == ["go/b", "python/a", "rust/c"]
    cfg = load_config("default", ["data.sources=[]", f"data.manifest={path}", "data.workers=1"]).data
    kept, stats, _ = _kept(cfg)
    assert len(kept) == 3 and dict(stats.by_priority) == {"high_priority": 2, "medium_priority": 1}
    (tmp_path / "bad.yaml").write_text("repositories: [{name: x}]\n")
    with pytest.raises(ManifestError, match="entry 0 .* needs a 'path'"):
        load_manifest(tmp_path / "bad.yaml")


@pytest.mark.skipif(not go_std.package_dirs(), reason="Go's standard library with its tests is not installed")
def test_go_stdlib_source_gives_one_repository_per_package_with_its_tests(tmp_path):
    cfg = load_config(overrides=["data.sources=[go-stdlib]"]).data
    found = {t.name: t for t in trees(cfg)}
    assert sorted(found) == sorted(f"go-std/{p}" for p, _ in go_std.package_dirs())
    roots = repository_roots(cfg)  # each package is a repository whose tests the eval runs
    assert roots["go-std/container/list"] == {
        "root": str(found["go-std/container/list"].root.resolve()),
        "test": None,
        "test_requires": [],
    }
    refs = [r for r in walk(found["go-std/encoding/hex"], cfg, ScanStats())]
    assert {r.repo for r in refs} == {"go-std/encoding/hex"} and {r.language for r in refs} == {"go"}
    assert any(r.path.endswith("hex_test.go") for r in refs) and go_std.std_package(refs[0].path.rsplit("/", 1)[0])


def test_go_stdlib_without_go_reads_nothing_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(go_std, "goroot", lambda: None)
    assert go_std.package_dirs() == [] and go_std.std_package("/usr/lib/go/src/strings") is None
    cfg = load_config(overrides=["data.sources=[go-stdlib]"]).data
    with caplog.at_level("WARNING", logger="ferrylm.data"):
        assert trees(cfg) == []
    assert "go-stdlib: no Go here" in caplog.text
