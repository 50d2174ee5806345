"""A repository's facts are decided once, in facts.py, and carried: no other module of the finder or the
scorer asks again what kind of repository it is."""

import ast
from pathlib import Path

from ferrylm.eval.repo.facts import facts_of

REPO = Path(__file__).resolve().parents[2] / "ferrylm" / "eval" / "repo"
DECIDERS = {"std_package", "named", "detect_command"}  # go_std.std_package, toolchain.named, suite.detect_command


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
    }


def test_only_facts_decides_a_repositorys_kind():
    askers = {p.name for p in REPO.glob("*.py") if _calls(p) & DECIDERS}
    assert askers == {"facts.py"}, f"{sorted(askers - {'facts.py'})} decide a repository's kind again: carry its facts"


def test_a_repositorys_facts(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    (tmp_path / "test_m.py").write_text("from m import f\n\ndef test_f():\n    assert f() == 1\n")
    facts = facts_of(tmp_path, "python")
    assert (facts.language, facts.std_package, facts.in_place) == ("python", None, False)
    assert facts.command.startswith("pytest") and facts.toolchain.runs is None
    assert facts_of(tmp_path, "python", "python -m unittest").command == "python -m unittest"
