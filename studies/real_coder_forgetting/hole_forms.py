"""Two ways to show a task's file, asked of one model on the same own-code tasks and executed on the repository's
tests: "hole" (the eval's: the body cut out and marked `// <the body to write>`) and "gone" (the function taken out
of its file whole, as the training rows now take out held-out functions; the question names it and shows its
doc comment and signature). Counts the replies that only repeat the marker, and Pass@1 with McNemar.

    .venv/bin/python studies/real_coder_forgetting/hole_forms.py --samples RUN/eval/own_functions_go_base.jsonl \
        --tasks CACHE/ferrylm/repo-tasks --model MODEL_DIR --echoed 8 --passed 8 --out /tmp/hole_forms.json

--samples: a GPU run's column (which tasks echoed, which passed there); --tasks: the tasks it found (the task
cache's folders, e.g. team_mix_05b/repo_tasks_cache.tgz unpacked); the tasks' repositories at their recorded paths.
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ferrylm.eval.repo import context
from ferrylm.eval.repo.splice import body_from_reply, execute, task_file
from ferrylm.eval.report.paired import mcnemar_exact
from ferrylm.prompts import LANGUAGE_NAMES, extract_code, hole_marker
from ferrylm.source.file_context import CHARS_PER_TOKEN, cut_out, trimmed
from ferrylm.source.spans import functions


def gone_question(task: dict, budget_tokens: int) -> str:
    """The file without the task's function (doc comment and signature too), then the function asked."""
    raw = task_file(task)
    text = raw.decode()
    (fn,) = [
        f for f in functions(text, task["file"], task["language"], 1, 10_000, documented=False) if f.id == task["id"]
    ]
    rest = cut_out(raw, [fn])[0]  # the function taken out as the training rows take held-out ones out
    before, after = rest[: fn.head].decode(), rest[fn.head :].decode()
    shown = trimmed(before, "", after, budget_tokens * CHARS_PER_TOKEN, task["language"])
    lang = task["language"]
    return (
        f"Here is `{task['file']}` without its function `{task['name']}`:\n\n```{lang}\n{shown}```\n\n"
        f"Write the body of this {LANGUAGE_NAMES.get(lang, lang)} function, which belongs in that file. Reply with "
        f"the body only, in a ```{lang} block.\n\n```{lang}\n{task['prompt']}```"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", required=True)
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--echoed", type=int, default=8)
    ap.add_argument("--passed", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=768)
    ap.add_argument("--max-new", type=int, default=384)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tasks = {t["task_id"]: t for f in glob.glob(f"{a.tasks}/*/tasks.json") for t in json.load(open(f))["tasks"]}
    rows = [json.loads(line) for line in open(a.samples)]
    echoed = [r["task_id"] for r in rows if "<the body to write>" in r["completion"]][: a.echoed]
    passed = [r["task_id"] for r in rows if r["passed"]][: a.passed]
    chosen = [tasks[i] for i in echoed + passed]
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32).eval()
    out = {"model": a.model, "samples": a.samples, "echoed_there": echoed, "passed_there": passed, "forms": {}}
    for form, ask in (
        ("hole", lambda t: context.question(t, a.tokens)),
        ("gone", lambda t: gone_question(t, a.tokens)),
    ):
        replies, t0 = [], time.time()
        for t in chosen:
            prompt = tok.apply_chat_template(
                [{"role": "user", "content": ask(t)}], tokenize=False, add_generation_prompt=True
            )
            ids = tok(prompt, return_tensors="pt")
            with torch.no_grad():
                gen = model.generate(**ids, max_new_tokens=a.max_new, do_sample=False)
            replies.append(tok.decode(gen[0, ids["input_ids"].shape[1] :], skip_special_tokens=True))
        results = execute(chosen, [(t["task_id"], r) for t, r in zip(chosen, replies)], workers=2)
        out["forms"][form] = {
            "passed": [r["task_id"] for r in results if r["passed"]],
            "echoed": [t["task_id"] for t, r in zip(chosen, replies) if hole_marker(t["language"]) in extract_code(r)],
            "bodies": {t["task_id"]: body_from_reply(t, r) for t, r in zip(chosen, replies)},
            "seconds": round(time.time() - t0),
        }
        print(
            form, len(out["forms"][form]["passed"]), "passed,", len(out["forms"][form]["echoed"]), "echoed", flush=True
        )
    h, g = (set(out["forms"][f]["passed"]) for f in ("hole", "gone"))
    out["gone_vs_hole"] = {"won": len(g - h), "lost": len(h - g), "p": mcnemar_exact(len(g - h), len(h - g))}
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(out["gone_vs_hole"])


if __name__ == "__main__":
    main()
