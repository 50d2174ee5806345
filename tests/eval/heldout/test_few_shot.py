"""The base model shown a few training examples: the data stage offers only training-side examples, the
same ones on every run, and every question of the eval (held-out, benchmark, base mode) gets them first."""

import json
from pathlib import Path

import pytest

from ferrylm.data.shots import MAX_TOKENS, POOL
from ferrylm.eval.heldout import examples as heldout
from ferrylm.eval.heldout.few_shot import FewShot, shown_words
from ferrylm.eval.tasks import benchmark
from tests.eval.test_repo_tasks import _four_repositories


class Recorder:
    """Answers every request with the same reply and keeps what it was asked."""

    def __init__(self):
        self.asked = []

    def chat(self, messages, max_tokens, temperature=0.0, n=1, until=None):
        self.asked.append(messages)
        return ["```python\n    return 1\n```"] * n

    def complete(self, prompt, max_tokens, temperature=0.0, n=1, stop=None):
        self.asked.append(prompt)
        return ["    return 1\n"] * n


def test_the_data_stage_offers_only_training_examples_and_the_same_ones_every_run(
    tmp_path, tiny_qwen2_dir, make_config
):
    from ferrylm.data import run_data

    corpus = _four_repositories(tmp_path / "repos")
    files = []
    for run in ("a", "b"):
        cfg = make_config(tmp_path / run, tiny_qwen2_dir, corpus, "data.min_body_lines=1", "data.holdout_functions=0.5")
        data = run_data(cfg)
        files.append(Path(data.outputs["shots"]).read_text())
    assert files[0] == files[1]  # the same data, the same examples
    shots = [json.loads(line) for line in files[0].splitlines()]
    repos = json.loads(Path(data.outputs["repositories"]).read_text())
    held_repos = {r["name"] for r in repos if r["split"] == "eval"}
    held_fns = {f"{r['name']}/{f.split('::')[-1]}" for r in repos for f in r["held_out_functions"]}
    evaluated = {r["source"] for r in map(json.loads, Path(data.outputs["eval_prompts"]).read_text().splitlines())}
    assert shots and {(s["task"], s["language"]) for s in shots} == {("generate", "python"), ("explain", "python")}
    for s in shots:
        assert s["source"].split("/")[0] not in held_repos and s["source"] not in evaluated
        assert f"{s['source'].split('/')[0]}/{s['source'].split('::')[-1]}" not in held_fns
        assert [m["role"] for m in s["messages"]] == ["user", "assistant"]
    assert all(sum(s["task"] == t for s in shots) <= POOL for t in ("generate", "explain")) and MAX_TOKENS >= 256
    # eval.few_shot asks for no more examples than the data stage keeps
    with pytest.raises(Exception, match="eval.few_shot"):
        make_config(tmp_path / "c", tiny_qwen2_dir, corpus, f"eval.few_shot={POOL + 1}")
    assert make_config(tmp_path / "c", tiny_qwen2_dir, corpus, f"eval.few_shot={POOL}").eval.few_shot == POOL


POOL_ROWS = {
    ("generate", "python"): [
        {
            "task": "generate",
            "language": "python",
            "source": f"r/m.py::f{i}",
            "prompt_code": f"def f{i}():\n",
            "body": f"    return {i}\n",
            "messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}],
        }
        for i in range(3)
    ],
    ("explain", "python"): [
        {
            "task": "explain",
            "language": "python",
            "source": "r/m.py::g",
            "messages": [{"role": "user", "content": "qx"}, {"role": "assistant", "content": "ax"}],
        }
    ],
}


def test_questions_come_after_their_task_and_languages_examples():
    shots = FewShot(POOL_ROWS, 2)
    assert shots.label == "base 2-shot" and shown_words(shots.label) == "the base shown 2 examples"
    assert shown_words("base") == "the base model" and shown_words("base 1-shot") == "the base shown 1 example"
    asked = [{"role": "system", "content": "s"}, {"role": "user", "content": "Q"}]
    assert [m["content"] for m in shots.messages(asked, "generate", "python")] == ["s", "q0", "a0", "q1", "a1", "Q"]
    assert [m["content"] for m in shots.messages(asked[1:], "explain", "python")] == ["qx", "ax", "Q"]
    assert shots.messages(asked, "generate", "go") == asked  # no training example in Go: asked as is
    assert shots.prefix("python") == "def f0():\n    return 0\n\ndef f1():\n    return 1\n\n"
    assert shots.summary({("generate", "python"), ("generate", "cpp")}) == {
        "k": 2,
        "shown": {"generate/python": ["r/m.py::f0", "r/m.py::f1"], "explain/python": ["r/m.py::g"]},
        "asked_without_examples": ["generate/cpp"],
    }
    # held-out rows: each by its own task; the scored record keeps the question as the data stage wrote it
    rows = [
        {"task": "explain", "language": "python", "messages": [{"role": "user", "content": "Q1"}], "reference": "x"},
        {"task": "generate", "language": "python", "messages": [{"role": "user", "content": "Q2"}], "reference": "y"},
    ]
    gen = Recorder()
    replies = heldout.generate_replies(gen, rows, 16, 1, shots)
    assert [[m["content"] for m in a] for a in gen.asked] == [["qx", "ax", "Q1"], ["q0", "a0", "q1", "a1", "Q2"]]
    assert [r["messages"] for r in heldout.score_rows(rows, replies)] == [rows[0]["messages"], rows[1]["messages"]]
    # benchmark tracks: chat turns, or in base mode the examples' code before the prompt
    track = benchmark.Track(
        "b", "python", "B", "k", [{"task_id": "t", "prompt": "def g():\n"}], from_reply=lambda p, r: r
    )
    for mode in ("chat", "base"):
        gen = Recorder()
        benchmark.generate(gen, [track], 16, 1, mode=mode, shots=shots)
        if mode == "chat":
            assert [m["content"] for m in gen.asked[0][:4]] == ["q0", "a0", "q1", "a1"] and "def g()" in gen.asked[0][
                4
            ]["content"]
        else:
            assert gen.asked == [shots.prefix("python") + "def g():\n"]
