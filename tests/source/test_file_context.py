"""The window around a hole: the outline of what it leaves out (file_context.trimmed's outline_share)."""

from ferrylm.source.file_context import trimmed

HEAD = "import os\n\n\nclass Store:\n    def __init__(self, root):\n        self._root = root\n        self._items = {}\n\n"
FILLER = "".join(f"    def filler_{i}(self):\n        return {i} * 2 + len(os.sep)\n\n" for i in range(30))
BEFORE = HEAD + FILLER + '    def get(self, key):\n        """The item under key."""\n'
HOLE = "        # <the body to write>\n"
AFTER = "\n    def put(self, key, value):\n        self._items[key] = value\n" + FILLER.replace("filler", "later")


def test_no_outline_is_the_window_as_before():
    out = trimmed(BEFORE, HOLE, AFTER, 600)
    assert out.startswith("import os\n…\n") and "self._items = {}" not in out and "class Store" not in out
    assert out == trimmed(BEFORE, HOLE, AFTER, 600, outline_share=0.0)


def test_the_outline_shows_the_class_its_attributes_and_the_definitions_far_from_the_hole():
    out = trimmed(BEFORE, HOLE, AFTER, 600, outline_share=0.3)
    above, below = out.split(HOLE)
    # what the body needs from far above: the class, its constructor and the attributes it sets
    for line in ("class Store:\n", "    def __init__(self, root):\n", "        self._items = {}\n"):
        assert line in above
    assert above.rstrip().endswith('def get(self, key):\n        """The item under key."""')  # the window kept
    assert "    def put(self, key, value):\n" in below and below.endswith("…\n")  # a sibling below, outlined
    assert "return 0 * 2" not in out  # a far function's body is left out: only its def line outlines it
    assert len(out) <= 600 + 40  # the budget, give or take the cut marks


def test_the_outline_keeps_the_files_order_and_marks_each_cut():
    out = trimmed(BEFORE, HOLE, AFTER, 600, outline_share=0.3)
    lines = out.splitlines()
    assert (
        lines.index("class Store:")
        < lines.index("    def __init__(self, root):")
        < lines.index("    def get(self, key):")
    )
    shown_fillers = [ln for ln in lines if ln.startswith("    def filler_")]
    assert shown_fillers == sorted(shown_fillers, key=lambda ln: int(ln.split("_")[1].split("(")[0]))
    assert all(a != "…" or b != "…" for a, b in zip(lines, lines[1:]))  # never two marks in a row


def test_a_language_without_an_outline_gets_the_window_alone():
    go = 'package p\n\nimport "os"\n\n' + "".join(f"func f{i}() int {{\n\treturn {i}\n}}\n\n" for i in range(40))
    assert trimmed(go, "\t// <the body to write>\n}\n", "", 300, "go", outline_share=0.3) == trimmed(
        go, "\t// <the body to write>\n}\n", "", 300, "go"
    )
