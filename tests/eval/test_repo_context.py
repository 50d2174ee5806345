"""The file as context for repository tasks: the function's own file with its body cut out, trimmed
around the function; the hidden body never appears in what a model is asked, in any language."""

import hashlib
from pathlib import Path

import pytest

from ferrylm.eval.repo import context
from ferrylm.prompts import hole_marker
from ferrylm.source.spans import functions

PY = '''"""A module."""
import re

LIMIT = 3


class Box:
    def __init__(self, items):
        self.items = items

    def biggest(self, n=LIMIT):
        """The n largest items, largest first."""
        ranked = sorted(self.items, reverse=True)
        return ranked[:n]


def words(text):
    """Split a text into its lower-case words."""
    return re.findall(r"\\w+", text.lower())
'''
GO = """package idx

import "strings"

// Sep joins keys.
const Sep = "/"

// Join joins the parts with Sep, upper-cased.
func Join(parts []string) string {
	joined := strings.Join(parts, Sep)
	return strings.ToUpper(joined)
}
"""


def _tasks(tmp_path: Path, name: str, text: str, language: str) -> list[dict]:
    (tmp_path / name).write_text(text)
    sha = hashlib.sha256(text.encode()).hexdigest()
    return [
        f.as_dict() | {"repo": str(tmp_path), "task_id": f.id, "file_sha256": sha}
        for f in functions(text, name, language, 1)
    ]


def test_a_file_changed_since_its_tasks_were_found_is_refused(tmp_path):
    task = _tasks(tmp_path, "m.py", PY, "python")[0]
    (tmp_path / "m.py").write_text("# a line above moves every offset\n" + PY)  # a cut here would show the body
    with pytest.raises(Exception, match="changed since its tasks were found"):
        context.question(task, 1024)


@pytest.mark.parametrize("name, text, language", [("m.py", PY, "python"), ("idx.go", GO, "go")])
def test_the_hidden_body_never_appears_and_the_file_around_it_does(tmp_path, name, text, language):
    tasks = _tasks(tmp_path, name, text, language)
    assert tasks
    for t in tasks:
        q, base = context.question(t, 1024), context.base_prompt(t, 1024)
        body_lines = [ln.strip() for ln in t["body"].splitlines() if ln.strip() and ln.strip() != "}"]
        for ln in body_lines:
            assert ln not in q and ln not in base, (t["name"], ln)
        assert hole_marker(language) in q and t["prompt"] in q
        assert ("import re" if language == "python" else 'import "strings"') in q  # the file's imports
        assert base.endswith(t["prompt"].splitlines()[-1] + "\n")  # base mode continues at the body


def test_the_class_and_siblings_are_shown_and_a_small_budget_trims_around_the_function(tmp_path):
    biggest = next(t for t in _tasks(tmp_path, "m.py", PY, "python") if t["name"] == "Box.biggest")
    full = context.question(biggest, 1024)
    assert "class Box:" in full and "self.items = items" in full and "LIMIT = 3" in full and "def words" in full
    small = context.question(biggest, 50)  # 150 characters: the imports, the signature and doc comment, little else
    shown = small.split("```python\n")[1]
    assert "def biggest(self, n=LIMIT):" in small and "class Box" not in shown
    assert shown.startswith("…\nimport re\n…\n")  # the imports first (below the docstring), each cut marked
    before, hole, after = context.file_with_hole(biggest)
    assert len(context.trimmed(before, hole, after, 150)) <= 150 + 3 * len("…\n")


def test_a_long_file_keeps_its_imports_above_the_window(tmp_path):
    """Forty sibling functions between the imports and the task: the imports (a parenthesised group whole)
    are shown, a cut, then the lines around the function; no import when the budget cannot hold half."""
    siblings = "".join(f'\n\ndef f{i}(x):\n    """Sibling {i}."""\n    return x + {i}\n' for i in range(40))
    text = (
        '"""A module."""\nimport re\nfrom os.path import (\n    join,\n    split,\n)\n'
        + siblings
        + '\n\ndef last(path):\n    """The last part of a path, lower-cased."""\n    return split(path)[1].lower()\n'
    )
    task = next(t for t in _tasks(tmp_path, "m.py", text, "python") if t["name"] == "last")
    shown = context.question(task, 100).split("```python\n")[1]
    assert shown.startswith("…\nimport re\nfrom os.path import (\n    join,\n    split,\n)\n…\n")
    assert "def f39(x):" in shown and "def f0(x):" not in shown and "return split(path)" not in shown
    before, hole, after = context.file_with_hole(task)
    assert "import" not in context.trimmed(before, hole, after, 40)  # half of what the hole leaves of 40: no import


def test_imports_made_for_annotations_alone_are_shown_with_the_others(tmp_path):
    """humanize's time.py binds `dt` under `if TYPE_CHECKING:`; a body that reads `dt.date` needs it shown."""
    siblings = "".join(f'\n\ndef f{i}(x):\n    """Sibling {i}."""\n    return x + {i}\n' for i in range(40))
    head = "import math\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import datetime as dt\n\nX = 1\n"
    text = head + siblings + '\n\ndef day(d):\n    """Whether `d` is a date."""\n    return isinstance(d, dt.date)\n'
    task = next(t for t in _tasks(tmp_path, "m.py", text, "python") if t["name"] == "day")
    shown = context.question(task, 100).split("```python\n")[1]
    assert shown.startswith(
        "import math\nfrom typing import TYPE_CHECKING\n…\nif TYPE_CHECKING:\n    import datetime as dt\n…"
    )
    assert "X = 1" not in shown


def test_a_share_of_the_room_goes_below_the_hole_where_the_file_goes_on(tmp_path):
    """A method under a long class docstring: as shipped the window climbs the docstring and shows nothing of the
    class below; with half the room kept below, the next method (what `self._cache` is) is shown, the hidden
    body still nowhere, and the window's size the same."""
    doc = "".join(f"    Line {i} of the class's long story.\n" for i in range(40))
    text = (
        f'class Peek:\n    """A peekable.\n\n{doc}    """\n\n    def __init__(self, it):\n'
        '        """Wrap it."""\n        self._it = iter(it)\n        self._cache = []\n\n'
        "    def peek(self):\n        if not self._cache:\n            self._cache.append(next(self._it))\n"
        "        return self._cache[0]\n"
    )
    task = next(t for t in _tasks(tmp_path, "p.py", text, "python") if t["name"] == "Peek.__init__")
    as_shipped, below = context.question(task, 200), context.question(task, 200, after_share=0.5)
    assert "def peek(self):" not in as_shipped and "Line 39 of" in as_shipped
    assert "def peek(self):" in below and "self._cache.append" in below and "Line 39 of" in below
    assert "self._it = iter(it)" not in below and "self._cache = []" not in below
    before, hole, after = context.file_with_hole(task)
    for share in (0.0, 0.5, 0.9):
        assert len(context.trimmed(before, hole, after, 600, "python", share)) <= 600 + 3 * len("…\n")
    # nothing below the hole: the share goes back to the lines above it
    last = next(t for t in _tasks(tmp_path, "q.py", PY, "python") if t["name"] == "words")
    assert context.question(last, 60, after_share=0.5) == context.question(last, 60)
