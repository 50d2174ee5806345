"""Generated code runs for real, contained: canonical HumanEval solutions pass, bad programs do not."""
import json
import time

import pytest

from ferrylm.cli import main
from ferrylm.eval.humaneval import SamplesError, completion_from_reply, execute, load_problems, score_samples
from ferrylm.eval.sandbox import run_program


def test_all_canonical_solutions_pass_and_wrong_ones_fail():
    problems = load_problems()
    assert len(problems) == 164
    canonical = execute(problems, {p["task_id"]: p["canonical_solution"] for p in problems}, 10, 1024, 2)
    assert sum(r["passed"] for r in canonical) == 164
    wrong = execute(problems[:20], {p["task_id"]: "    return None\n" for p in problems[:20]}, 10, 1024, 2)
    assert sum(r["passed"] for r in wrong) == 0


def test_contained_failures(tmp_path):
    assert run_program("import sys; sys.exit(0)") == "passed"
    assert run_program("assert 1 == 2").startswith("failed: AssertionError")
    t = time.monotonic()
    assert run_program("while True: pass", timeout_s=1) == "timed out"
    assert time.monotonic() - t < 5
    # A forked child that outlives the timeout is killed with its group.
    assert run_program("import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)", timeout_s=1) == "timed out"
    assert run_program("x = bytearray(4 << 30)", memory_mb=256).startswith("failed: MemoryError")
    # Files land in the program's own temp dir, which is gone afterwards.
    assert run_program(f"open('out.txt','w').write('x'); import os; assert os.getcwd() != {str(tmp_path)!r}") == "passed"
    assert not list(tmp_path.iterdir())
    assert run_program("import os; assert 'HOME' in os.environ and 'PYTHONPATH' not in os.environ") == "passed"


def test_chat_replies_become_completions():
    p = load_problems(1)[0]
    body = p["canonical_solution"]
    whole = p["prompt"] + body
    for reply in (f"```python\n{body}```", f"Here you go:\n```python\n{whole}```\nDone."):
        c = completion_from_reply(p, reply)
        assert execute([p], {p["task_id"]: c}, 10, 1024, 1)[0]["passed"]


def test_score_sample_file(tmp_path, capsys):
    problems = load_problems(4)
    f = tmp_path / "samples.jsonl"
    lines = [{"task_id": p["task_id"], "completion": p["canonical_solution"]} for p in problems[:3]]
    lines.append({"task_id": problems[3]["task_id"], "completion": "    return 0\n"})
    f.write_text("".join(json.dumps(l) + "\n" for l in lines))
    res = score_samples(f)
    assert (res["tasks"], res["passed"], res["pass@1"]) == (4, 3, 0.75)
    assert main(["eval", "humaneval", "--samples", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["pass@1"] == 0.75
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "HumanEval/0"}\n')
    with pytest.raises(SamplesError, match="bad.jsonl:1: expected a JSON object"):
        score_samples(bad)
    assert main(["eval", "humaneval", "--samples", str(tmp_path / "none.jsonl")]) == 2
