"""Held-out functions of training repositories (data.holdout_functions): a stable seeded draw, the
near-duplicate check against their bodies, and which files count as tests."""

from types import SimpleNamespace

from ferrylm.data.holdout import HeldOutFunctions, drawable, drawn, words_in
from ferrylm.source.pairs import Pair
from ferrylm.source.test_files import is_test_file

BODY = (
    "    total = 0\n    count = 0\n    for value in values:\n        if value is None:\n            continue\n"
    "        total += value * weight\n        count += 1\n    if count == 0:\n        raise ValueError(values)\n"
    "    mean = total / count\n    return round(mean, 4)\n"
)


def _pair(source: str, body: str, repo: str = "r"):
    return Pair(source, "def f(values, weight):\n", body), SimpleNamespace(repo=repo)


def test_the_draw_is_seeded_and_near_copies_of_held_out_bodies_are_found():
    sources = [f"r/m.py::f{i}" for i in range(2000)]
    share = sum(drawn(0, s, 0.25) for s in sources) / len(sources)
    assert 0.22 < share < 0.28 and [drawn(0, s, 0.25) for s in sources] == [drawn(0, s, 0.25) for s in sources]
    assert [drawn(1, s, 0.25) for s in sources] != [drawn(0, s, 0.25) for s in sources]
    held_name = next(s for s in sources if drawn(0, s, 0.5))
    other = next(s for s in sources if not drawn(0, s, 0.5))
    pairs = [
        _pair(held_name, BODY),
        _pair(other, BODY.replace("round(mean, 4)", "round(mean, 3)")),
        _pair("q/m.py::g", BODY, repo="q"),
    ]
    kept = HeldOutFunctions(pairs, held_repos={"q"}, share=0.5, seed=0, threshold=0.5, perms=128)
    assert kept.sources == {held_name}  # a held-out repository's are not drawn
    assert kept.near(BODY.replace("round(mean, 4)", "round(mean, 3)")) and not kept.near(
        "    return sorted(set(items), key=len)[:10]\n"
    )
    assert HeldOutFunctions(pairs, set(), 0.0, 0, 0.5, 128).sources == set()


def test_test_files_are_named_by_their_path():
    assert all(map(is_test_file, ["tests/test_a.py", "pkg/test_b.py", "strs/strs_test.go", "a/testing/x.py"]))
    assert not any(map(is_test_file, ["pkg/contest.py", "attest/core.py", "pkg/testify.go"]))


def test_in_a_repository_with_tests_only_the_functions_they_name_are_drawn():
    sources = [f"r/m.py::f{i}" for i in range(40)] + ["r/m.py::Box.size.setter"]
    tested = {"r": words_in("from m import f1, f2, f3\nassert f1(2) == f2(1) + f3(0)\nb.size = 3\n")}
    assert [s for s in sources if drawable(s, "r", tested)] == ["r/m.py::f1", "r/m.py::f2", "r/m.py::f3", sources[-1]]
    assert all(drawable(s, "other", tested) for s in sources)  # no tests here: any function may be held out
    pairs = [_pair(s, BODY) for s in sources]
    kept = HeldOutFunctions(pairs, set(), share=0.99, seed=0, threshold=0.5, perms=128, tested=tested)
    assert kept.sources <= {"r/m.py::f1", "r/m.py::f2", "r/m.py::f3", sources[-1]} and kept.sources


def test_a_training_repository_without_test_files_holds_out_none_of_its_functions(tmp_path):
    """tomli's sdist ships no tests: its functions were drawn as held out, then gave no task and only left
    training poorer. Every repository of the manifest is named, with the words its tests hold or none."""
    from ferrylm.data.file_examples import tested_words

    for name, files in {"bare": {"m.py": "def f():\n    return 1\n"}, "tested": {"tests/test_m.py": "f()\n"}}.items():
        for rel, text in files.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_text(text)
    roots = {n: {"root": str(tmp_path / n)} for n in ("bare", "tested", "held")}
    tested = tested_words({"held"}, roots)
    assert tested == {"bare": set(), "tested": {"f"}}
    assert not drawable("bare/m.py::f", "bare", tested) and drawable("tested/m.py::f", "tested", tested)
