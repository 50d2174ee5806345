import json

from ferrylm.config import Criteria
from ferrylm.eval.report import write_report


def test_report_says_pass_or_fail_for_every_criterion(tmp_path):
    models = {
        "fine-tuned": {"loss": 1.5, "perplexity": 4.5, "grad_norm": 0.4, "bleu": 0.12, "pass_at_1": 0.05,
                       "latency_512_s": 21.0},
        "base": {"loss": 2.5, "perplexity": 12.2, "grad_norm": None, "bleu": 0.08, "pass_at_1": 0.0,
                 "latency_512_s": 20.0},
    }
    report = write_report(tmp_path, Criteria(), models, {"fine-tuned": {"x": 1}})
    verdicts = {row["criterion"]: (row["fine-tuned"]["verdict"], row["base"]["verdict"]) for row in report["criteria"]}
    assert verdicts == {"loss": ("pass", "fail"), "perplexity": ("pass", "pass"), "grad_norm": ("pass", "not measured"),
                        "bleu": ("fail", "fail"), "pass_at_1": ("fail", "fail"), "latency_512_s": ("fail", "fail")}
    md = (tmp_path / "report.md").read_text()
    assert "| HumanEval Pass@1 | > 0.4 | 0.05 (fail) | 0 (fail) |" in md
    assert json.loads((tmp_path / "report.json").read_text())["models"] == models
