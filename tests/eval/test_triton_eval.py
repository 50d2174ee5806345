"""The eval stage through tritonserver (serve.backend=triton): the export's Triton model as the
fine-tuned one and a Triton model it writes for the base, each started in turn; benchmarks,
held-out replies and the 512-token latency measured through their streams, as with vLLM."""

import importlib.util
import json

import pytest

from ferrylm.config import ConfigError, load_config
from ferrylm.eval import run_eval
from ferrylm.export import run_export
from ferrylm.serve import free_port
from ferrylm.train import run_train

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pytriton") is None, reason="nvidia-pytriton (its bundled tritonserver) is not installed"
)


@pytest.mark.slow
def test_eval_through_triton_serves_both_models_and_times_their_streams(
    copy_run, tiny_qwen2_dir, tiny_corpus, make_config
):
    run = copy_run()
    cfg = make_config(
        run,
        tiny_qwen2_dir,
        tiny_corpus,
        "train.max_steps=2",
        "serve.backend=triton",
        f"serve.port={free_port(count=3)}",
        "export.onnx=false",
        "eval.humaneval_limit=2",
        "eval.bleu_limit=2",
        "eval.max_new_tokens=12",
        "eval.latency_new_tokens=16",
        "eval.latency_runs=2",
        "eval.latency_concurrency=[2]",
        "eval.enforce_gates=false",
        "eval.few_shot=0",
    )
    run_train(cfg)
    assert run_export(cfg).metrics["triton_max_len"] == cfg.export.triton_max_len
    run_eval(cfg)
    report = json.loads((run / "eval" / "report.json").read_text())
    assert set(report["models"]) == {"fine-tuned", "base"}
    for label in ("fine-tuned", "base"):
        details = report["details"][label]
        lat = details["latency"]
        assert lat["new_tokens"] == 16 and lat["runs"] == 2 and lat["ttft_s"]["p50"] < lat["total_s"]["p50"]
        assert lat["sweep"][0]["concurrency"] == 2 and lat["sweep"][0]["aggregate_tokens_per_s"] > 0
        assert details["benchmarks"][0]["tasks"] == 2
        held = [json.loads(line) for line in open(run / "eval" / f"heldout_{label}.jsonl")]
        assert len(held) == 4 and all(isinstance(h["output"], str) for h in held)
    base_repo = run / "eval" / "triton_base" / "base"
    assert (base_repo / "config.pbtxt").is_file() and (base_repo / "1" / "text_pieces.py").is_file()
    assert str(tiny_qwen2_dir) in (base_repo / "config.pbtxt").read_text()
    log = (run / "serve" / "triton.log").read_text()  # one server after the other, each its own model
    assert log.index("successfully loaded 'ferrylm'") < log.index("successfully loaded 'base'")


def test_sampling_through_triton_is_refused_in_one_line():
    for bad in ("eval.samples_per_task=4", "eval.temperature=0.8"):
        with pytest.raises(ConfigError, match="eval.samples_per_task: the Triton model decodes greedily"):
            load_config("default", ["serve.backend=triton", bad])
    load_config(
        "default", ["serve.backend=triton", "eval.samples_per_task=4", "eval.temperature=0.8", "eval.local=true"]
    )
