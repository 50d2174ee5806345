"""A finished eval stage as the review reads it: its record, the per-sample files of both models
(held-out pairs in Python and Go, HumanEval and HumanEval-X C++ tasks with their test results) and
its report, written by the real report writer."""

import json
from pathlib import Path

import pytest

from ferrylm.config import load_config
from ferrylm.eval.report.criteria import load_criteria
from ferrylm.eval.report.render import write_report
from ferrylm.manifest import StageRecord

HELD = [
    ("python", 'def add(a, b):\n    """Sum."""\n', "    return a + b\n", ["    return a + b\n", "    return a - b\n"]),
    ("python", "def neg(x):\n", "    return -x\n", ["    return -x\n", "    return x\n"]),
    ("go", "func Half(x int) int {\n", "    return x / 2\n}\n", ["    return x / 2\n}\n", "    return x\n}\n"]),
    ("go", "func Twice(x int) int {\n", "    return 2 * x\n}\n", ["    return x + x\n}\n", "    return 2\n}\n"]),
]
TASKS = {
    "humaneval/python": [(f"HumanEval/{i}", f"def f{i}(x):\n", f"    return x + {i}\n") for i in range(4)],
    "humaneval-x/cpp": [(f"CPP/{i}", f"int f{i}(int x){{\n", f"    return x + {i};\n}}\n") for i in range(2)],
}


def write_eval(run: Path) -> Path:
    out = run / "eval"
    out.mkdir(parents=True)
    record = StageRecord("eval", "test")
    for m, k in (("fine-tuned", 0), ("base", 1)):
        path = out / f"heldout_{m}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {
                        "source": f"repo/{i}",
                        "language": lang,
                        "reference": ref,
                        "output": outs[k],
                        "messages": [{"role": "user", "content": f"Complete this.\n\n```{lang}\n{p}```"}],
                    }
                )
                + "\n"
                for i, (lang, p, ref, outs) in enumerate(HELD)
            )
        )
        record.outputs[f"heldout:{m}"] = str(path)
        for track, tasks in TASKS.items():
            path = out / f"{track.replace('-', '_').replace('/', '_')}_{m}.jsonl"
            rows = [
                {
                    "task_id": t,
                    "passed": (i + k) % 2 == 0,
                    "result": "passed" if (i + k) % 2 == 0 else "failed: wrong",
                    "isolation": "bwrap",
                    "completion": body if k == 0 else "    return 0\n",
                    "prompt": p,
                    "reference": body,
                }
                for i, (t, p, body) in enumerate(tasks)
            ]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            record.outputs[f"samples:{m}:{track}"] = str(path)
    models = {m: {"pass_at_1": 0.5, "bleu": 0.1} for m in ("fine-tuned", "base")}
    write_report(out, load_criteria("seed"), models, {m: {"bleu": {"sacrebleu": 10.0}} for m in models}, [])
    record.outputs.update({n: str(out / f"report.{n}") for n in ("md", "html", "json")})
    record.finish(out)
    return out


@pytest.fixture
def review_run(tmp_path):
    """(config, eval dir) of a run whose eval stage has finished."""
    run = tmp_path / "run"
    out = write_eval(run)
    return (lambda *overrides: load_config("default", [f"run_dir={run}", *overrides])), out
