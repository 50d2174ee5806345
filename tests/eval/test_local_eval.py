"""The eval stage with in-process models (no server): a tiny trained Qwen2, base beside fine-tuned."""

import json
import os
import shutil

import pytest

from ferrylm.eval import run_eval
from ferrylm.export import run_export
from ferrylm.train import run_train


@pytest.mark.slow
def test_local_eval_writes_full_report(copy_run, tiny_qwen2_dir, tiny_corpus, make_config):
    run = copy_run()
    # HumanEval-X in C++ too where its data and g++ are here (the Makefile points at the local copy).
    with_x = bool(os.environ.get("FERRYLM_HUMANEVAL_X")) and shutil.which("g++") is not None
    extra = ["eval.benchmarks=[humaneval,humaneval-x]", "eval.humaneval_x_limit=2"] if with_x else []
    cfg = make_config(
        run,
        tiny_qwen2_dir,
        tiny_corpus,
        "train.max_steps=2",
        "eval.local=true",
        "eval.humaneval_limit=3",
        "eval.bleu_limit=2",
        "eval.max_new_tokens=12",
        "eval.samples_per_task=2",
        "eval.temperature=0.7",
        "eval.pass_k=[1,2]",
        "eval.few_shot=2",  # the base shown 2 training examples (the CPU preset leaves that column to demo-gpu)
        "eval.enforce_gates=false",
        "eval.artifacts=[w4a16]",
        *extra,
    )
    run_train(cfg)
    run_export(cfg)
    _add_w4a16(run)
    rec = run_eval(cfg)
    report = json.loads((run / "eval" / "report.json").read_text())
    # the base shown 2 training examples; the exported W4A16 artifact on the general benchmarks alone
    assert set(report["models"]) == {"fine-tuned", "base", "base 2-shot", "fine-tuned (w4a16)"}
    shipped = report["details"]["fine-tuned (w4a16)"]
    assert [b["key"] for b in shipped["benchmarks"]] == [
        b["key"] for b in report["details"]["fine-tuned"]["benchmarks"]
    ]
    assert shipped["benchmarks"][0]["tasks"] == 3
    for label in ("fine-tuned", "base", "base 2-shot"):
        he, *xs = report["details"][label]["benchmarks"]
        assert (he["title"], he["key"], he["tasks"], he["samples"]) == ("HumanEval (Python)", "pass_at_1", 3, 6)
        assert "pass@2" in he
        assert report["details"][label]["latency"] is None  # no endpoint, no streaming latency
        rows = [json.loads(line) for line in open(run / "eval" / f"humaneval_python_{label.replace(' ', '-')}.jsonl")]
        assert len(rows) == 6 and all(r["result"] for r in rows)
        assert [x["language"] for x in xs] == (["cpp", "java", "go", "rust"] if with_x else [])
        for x in xs:  # every language the machine has
            if "not_measured" in x:
                continue
            assert x["tasks"] == 2 and x["samples"] == 4 and "pass@2" in x and x["subset_of"] == 164, x["language"]
            assert (
                len(open(run / "eval" / f"humaneval_x_{x['language']}_{label.replace(' ', '-')}.jsonl").readlines())
                == 4
            )
    if with_x:
        assert "## Pass@1 by benchmark and language" in (run / "eval" / "report.md").read_text()
        assert "humaneval-x/cpp" in report["paired"]
        measured = [x["key"] for x in report["details"]["fine-tuned"]["benchmarks"] if "not_measured" not in x]
        assert set(measured) <= {r["criterion"] for r in report["criteria"]}
    lat = next(r for r in report["criteria"] if r["criterion"] == "latency_512_s")
    assert lat["fine-tuned"]["verdict"] == "not measured"
    assert rec.outputs["html"].endswith("report.html")
    # Every sample is kept and named in the record, for the review page to find.
    held = [json.loads(line) for line in open(rec.outputs["heldout:base"])]
    assert len(held) == 4 and all({"messages", "reference", "output", "language", "task"} <= set(h) for h in held)
    assert sorted(h["task"] for h in held) == ["explain", "explain", "generate", "generate"]
    assert all(isinstance(h["loss"], float) and h["loss"] > 0 for h in held)  # in-process, per example
    tuned = [json.loads(line) for line in open(rec.outputs["heldout:fine-tuned"])]
    shown = [json.loads(line) for line in open(rec.outputs["heldout:base 2-shot"])]
    assert [h["source"] for h in tuned] == [h["source"] for h in held] == [h["source"] for h in shown]  # paired
    # its held-out loss is the answer's, with the examples before the question
    assert all(isinstance(h["loss"], float) for h in shown) and [h["loss"] for h in shown] != [h["loss"] for h in held]
    assert report["details"]["few_shot"]["k"] == 2 and report["models"]["base 2-shot"].get("loss") is None
    # The report opens with the verdict, one line per metric with its interval.
    md = (run / "eval" / "report.md").read_text()
    assert md.split("\n## ")[1].startswith("Did the fine-tune help?")
    metrics = {ln["metric"] for ln in report["details"]["helped"]}
    assert {
        "Code understanding: smoothed BLEU-4 of summaries (0–100)",
        "Held-out loss, explain task",
        "Held-out loss, generate task",
        "HumanEval (Python) Pass@1",
    } <= metrics
    assert all(
        ln["verdict"] in ("better", "worse", "no significant change", "too few to tell")
        for ln in report["details"]["helped"]
    )
    assert {ln["against"] for ln in report["details"]["helped"]} == {"base", "base 2-shot", "fine-tuned (w4a16)"}
    assert "The exported w4a16 artifact against the fine-tuned model: " in (run / "eval" / "report.md").read_text()
    assert "| criterion | target | gate | fine-tuned | base | base 2-shot |" in md
    bleu = next(r for r in report["criteria"] if r["criterion"] == "bleu")
    assert bleu["fine-tuned"]["value"] == report["details"]["fine-tuned"]["heldout"]["explain"]["smoothed_bleu4"] / 100
    assert rec.outputs["samples:fine-tuned:humaneval/python"] == str(run / "eval" / "humaneval_python_fine-tuned.jsonl")


def _add_w4a16(run):
    """The export's W4A16 artifact, as export.vllm_quantize=[w4a16] records it (written here by the same
    function: the export's own calibration and gate are tested in tests/export)."""
    from ferrylm.export.vllm_quant import write_compressed
    from ferrylm.manifest import write_json_atomic
    from ferrylm.models import load_tokenizer

    exported = json.loads((run / "export" / "record.json").read_text())
    art = run / "export" / "vllm-w4a16"
    write_compressed(exported["outputs"]["merged"], art, "w4a16", 32)
    load_tokenizer(exported["outputs"]["merged"]).save_pretrained(art)
    exported["outputs"]["vllm_w4a16"] = str(art)
    write_json_atomic(run / "export" / "record.json", exported)
