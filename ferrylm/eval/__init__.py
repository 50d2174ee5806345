"""Eval stage: code benchmarks' Pass@k (HumanEval, HumanEval-X; see tasks/), the held-out
repositories' code understanding and generation (heldout/) and loss per example, latency against
live endpoints, training numbers, and the report — which opens with whether the fine-tune helped.

With `eval.endpoint` set, the running endpoint is measured as the fine-tuned model; with
`eval.local=true` the models run in-process with transformers (no latency then). Otherwise the
stage starts vLLM itself on the exported model and (with `eval.compare_base`) on the base model,
one after the other, so both are measured the same way; with serve.backend=triton, tritonserver on
the export's Triton model and on one written for the base.
"""

from .stage import GateFailed, rewrite_report, run_eval

__all__ = ["GateFailed", "rewrite_report", "run_eval"]
