"""Retrieval, the rival column: BM25 over the training functions, never the task's own function nor a near
duplicate of its hidden body, within its budget, asked above the same question, in every language."""

import json
import sqlite3

from ferrylm.eval.repo.retrieval import holds_body, snippets, with_retrieval
from ferrylm.eval.tasks import humaneval
from ferrylm.eval.tasks.benchmark import Track
from ferrylm.source import library

BODY = "    total = 0\n    for item in items:\n        total += item.price * item.count\n    return total\n"
TASK = {
    "task_id": "shop/cart.py::order_total",
    "file": "cart.py",
    "name": "order_total",
    "language": "python",
    "prompt": 'def order_total(items):\n    """The price of every item times its count, summed."""\n',
    "body": BODY,
}
TRAINING = [
    ("shop/cart.py::order_total", "python", TASK["prompt"] + BODY, "shop"),  # the task's own function
    (  # a copy in another module, its variable renamed: a near duplicate
        "shop/legacy.py::legacy_total",
        "python",
        "def legacy_total(items):\n    acc = 0\n    for item in items:\n        acc += item.price * item.count\n    return acc\n",
        "shop",
    ),
    (
        "shop/price.py::item_price",
        "python",
        'def item_price(item):\n    """The price of one item."""\n    return item.price\n',
        "shop",
    ),
    (
        "shop/count.py::count_items",
        "python",
        "def count_items(items):\n    return sum(item.count for item in items)\n",
        "shop",
    ),
    ("shop/io.go::OrderTotal", "go", "func OrderTotal(items []Item) int {\n\treturn 0\n}\n", "shop"),
    ("util/text.py::slug", "python", "def slug(text):\n    return text.lower().replace(' ', '-')\n", "util"),
    (  # another repository's function that matches the question best of all
        "store/sum.py::items_price_count_summed",
        "python",
        'def items_price_count_summed(items):\n    """Every item: its price times its count, summed; the price."""\n'
        "    return sum(i.price * i.count for i in items)\n",
        "store",
    ),
]


def _index(tmp_path):
    path = tmp_path / "library.sqlite"
    assert library.write(path, TRAINING) == len(TRAINING)
    return path


def test_bm25_ranks_by_the_question_and_keeps_to_its_language(tmp_path):
    found = library.search(_index(tmp_path), TASK["prompt"], "python", 10)
    sources = [s for s, _ in found]
    assert sources[0] == "shop/cart.py::order_total" and "shop/io.go::OrderTotal" not in sources
    assert "util/text.py::slug" not in sources  # no word in common
    assert library.query_terms("def get_value(self, key_name):") == ["get", "value", "key", "name"]


def test_never_the_task_itself_nor_a_near_duplicate_and_within_budget(tmp_path):
    index = _index(tmp_path)
    got = snippets(index, TASK, k=4, budget_chars=10_000)
    assert got and all(BODY not in g and not holds_body(g, BODY) for g in got)
    assert not any("legacy_total" in g or "def order_total" in g for g in got)
    assert {g.split("(")[0] for g in got} == {"def item_price", "def count_items", "def items_price_count_summed"}
    assert len(snippets(index, TASK, k=1, budget_chars=10_000)) == 1
    assert snippets(index, TASK, k=4, budget_chars=20) == []  # nothing fits: nothing shown


def test_a_training_repositorys_task_is_shown_its_own_repository_alone(tmp_path):
    """Another repository's function matches the question best; a held-out function of a training repository is
    shown its own repository's matches only, a task of a held-out repository (no name in the index) the best
    overall."""
    index = _index(tmp_path)
    first = [s for s, _ in library.search(index, TASK["prompt"], "python", 10)]
    assert first[:2] == ["shop/cart.py::order_total", "store/sum.py::items_price_count_summed"]  # after its own
    assert [s for s, _ in library.search(index, TASK["prompt"], "python", 10, within="util")] == []
    own = snippets(index, TASK | {"repo_name": "shop", "split": "functions"}, k=4, budget_chars=10_000)
    assert {g.split("(")[0] for g in own} == {"def item_price", "def count_items"}  # not the better match elsewhere
    held_out = snippets(index, TASK | {"repo_name": "elsewhere", "split": "repositories"}, k=1, budget_chars=10_000)
    assert [g.split("(")[0] for g in held_out] == ["def items_price_count_summed"]


def test_the_retrieval_tracks_ask_the_same_question_below_the_functions(tmp_path):
    index = _index(tmp_path)
    go_task = {
        "task_id": "shop/io.go::Sum",
        "file": "io.go",
        "name": "Sum",
        "language": "go",
        "prompt": "// OrderTotal sums the items.\nfunc Sum(items []Item) int {\n",
        "body": "\ttotal := 0\n\tfor _, it := range items {\n\t\ttotal += it.Price\n\t}\n\treturn total\n}\n",
    }
    own = Track("own-repos", "python", "own", "k", [TASK], question=lambda p: "QUESTION " + p["prompt"])
    go = Track("own-repos", "go", "own go", "k2", [go_task])
    he = humaneval.track(humaneval.load_problems(limit=1))
    copies = with_retrieval([own, go, he], index, 4, 512)
    assert [t.language for t in copies] == ["python", "go"]  # HumanEval is not asked again
    asked = copies[0].question(TASK)
    assert asked.startswith("Functions from the training repositories") and asked.endswith("QUESTION " + TASK["prompt"])
    assert "def item_price" in asked and BODY not in asked
    go_asked = copies[1].question(go_task)
    assert "func OrderTotal" in go_asked and go_task["body"] not in go_asked and go_asked.endswith("```")
    base = copies[0].prompt(TASK)
    assert base.startswith("# def ") and base.endswith("\n" + TASK["prompt"])  # the prompt's first line stays code
    assert own.question(TASK) == "QUESTION " + TASK["prompt"]  # the plain track is untouched


def test_the_data_stage_indexes_the_training_functions_only(tiny_data_run):
    data = tiny_data_run / "data"
    rec = json.loads((data / "record.json").read_text())
    with sqlite3.connect(rec["outputs"]["library"]) as db:
        sources = {s for (s,) in db.execute("SELECT source FROM functions")}
    held = {json.loads(line)["source"] for line in open(data / "eval.jsonl")}
    assert sources and len(sources) == rec["metrics"]["library_functions"] and not sources & held
