"""No file kills the data stage, and C++ repositories give C++ pairs."""

import shutil
from collections import Counter
from pathlib import Path

import pyarrow

from ferrylm.config import SEED_EXTENSIONS, load_config
from ferrylm.data.collect import CleanStats, collect
from ferrylm.data.corpus import ScanStats

GOOD = (
    '''def add(a, b):
    """Add two numbers."""
    total = a + b
    return total
'''
    + "\n".join(f"# filler line {i}" for i in range(12))
    + "\n"
)


def _collect(root: Path, *overrides) -> tuple[list, ScanStats, CleanStats]:
    cfg = load_config(
        "default",
        [f"data.sources=[{root}]", "data.workers=2", "data.near_dedupe=false", "data.max_chars=200000", *overrides],
    ).data
    scan, clean = ScanStats(), CleanStats()
    return list(collect(cfg, scan, clean, want_pairs=True)), scan, clean


def test_pathological_files_are_counted_not_fatal(tmp_path):
    repo = tmp_path / "repos" / "r"
    repo.mkdir(parents=True)
    # Valid Python of ~45 KB holding one deeply nested expression, in lines of ordinary length:
    # ast.parse raises RecursionError on the first and MemoryError on the second.
    terms = [f"a{i % 10}" for i in range(9_000)]
    (repo / "nested.py").write_text(
        "x = ("
        + "\n".join(" + ".join(terms[i : i + 20]) + " +" for i in range(0, 8_980, 20))
        + " a0)\n"
        + "# pad\n" * 12
    )
    (repo / "unary.py").write_text("y = (" + "\n".join(["not " * 100] * 100) + " 1)\n" + "# pad\n" * 12)
    (repo / "deep.go").write_text(
        "package p\n// F nests.\nfunc F() int {\n\treturn "
        + "(" * 30_000
        + "1"
        + ")" * 30_000
        + "\n}\n"
        + "// pad\n" * 12
    )
    (repo / "garbage.rs").write_text("/// doc\nfn f( {{{{ ]]] \n" * 400)
    (repo / "good.py").write_text(GOOD)
    docs, scan, clean = _collect(tmp_path / "repos")
    assert {d.ref.rel.rsplit("/", 1)[-1] for d in docs} >= {"nested.py", "unary.py", "good.py"}
    assert [p.source.rsplit("::", 1)[-1] for d in docs for p in d.pairs] == ["add"]
    assert clean.parse_failures["python:RecursionError"] == 1, clean.parse_failures
    assert clean.parse_failures["python:MemoryError"] == 1, clean.parse_failures
    assert sum(clean.parse_failures.values()) <= 4


def test_a_real_cpp_repository_gives_cpp_pairs(tmp_path):
    """Arrow's Python bindings (Google-style C++: .cc sources, .h headers), as pyarrow ships them."""
    src = Path(pyarrow.__file__).parent / "src" / "arrow" / "python"
    shutil.copytree(src, tmp_path / "repos" / "arrow-python")
    docs, scan, _ = _collect(tmp_path / "repos")
    files = Counter(d.ref.language for d in docs)
    pairs = Counter(d.ref.language for d in docs for _ in d.pairs)
    assert set(files) == {"cpp"} and files["cpp"] >= 50, files  # headers beside .cc files are C++
    assert pairs["cpp"] >= 25 and set(pairs) == {"cpp"}, pairs
    for d in docs:
        for p in d.pairs:  # a class or namespace body is never a function pair
            head = p.prompt_code.rstrip().splitlines()[-1]
            assert not head.lstrip().startswith(("class ", "struct ", "namespace ")), (p.source, head)
    # The seed's list alone misses the .cc sources, and then reads the headers as C.
    seed = "data.extensions=[" + ",".join(SEED_EXTENSIONS) + "]"
    docs, _, _ = _collect(tmp_path / "repos", seed)
    assert {d.ref.language for d in docs} == {"c"}


def test_a_manifest_can_say_headers_are_cpp(tmp_path):
    import yaml

    repo = tmp_path / "lib"
    repo.mkdir()
    (repo / "util.h").write_text(
        "// Clamp v into [lo, hi].\ntemplate <typename T>\nT clamp(T v, T lo, T hi) {\n"
        "    if (v < lo) return lo;\n    return v > hi ? hi : v;\n}\n" + "// pad\n" * 12
    )
    manifest = tmp_path / "repos.yaml"
    manifest.write_text(yaml.safe_dump({"repositories": [{"path": str(repo), "language": "cpp"}]}))
    docs, _, _ = _collect(tmp_path, "data.sources=[]", f"data.manifest={manifest}")
    assert [(d.ref.language, len(d.pairs)) for d in docs] == [("cpp", 1)]
