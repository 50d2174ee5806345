"""End-to-end data stage throughput over a real corpus: scan → clean → dedupe → tokenize → pack → Arrow.

    .venv/bin/python benchmarks/data_throughput.py --format cpt \
        --source /root/.pyenv/versions --source .venv/lib/python3.11/site-packages --source /usr/include

Each source is a directory of repositories (every entry under it is one). Writes the stage's
numbers and the wall time of the whole command (imports included) to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    t_start = time.perf_counter()
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", action="append", required=True)
    ap.add_argument("--format", default="cpt", choices=["cpt", "sft"])
    ap.add_argument("--seq-len", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "data_throughput.json"))
    args = ap.parse_args()

    from ferrylm.config import load_config
    from ferrylm.data import run_data

    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as run_dir:
        sources = "[" + ",".join(str(Path(s).resolve()) for s in args.source) + "]"
        cfg = load_config(
            "default",
            [
                f"run_dir={run_dir}",
                f"data.sources={sources}",
                f"data.format={args.format}",
                f"data.max_seq_len={args.seq_len}",
                f"data.workers={args.workers}",
                "data.max_pairs=1000000",
                "data.pack=true",
            ],
        )
        rec = run_data(cfg)
        m = rec.metrics
        wall = time.perf_counter() - t_start
        result = {
            "command": " ".join(sys.argv),
            "cpus": os.cpu_count(),
            "format": args.format,
            "sources": args.source,
            "seq_len": args.seq_len,
            "wall_s": wall,
            "stage_s": m["elapsed_s"],
            "input_mb": m["bytes_seen"] / 1e6,
            "kept_mb": m["bytes_kept"] / 1e6,
            "input_mb_per_s_stage": m["bytes_seen"] / 1e6 / m["elapsed_s"],
            "input_mb_per_s_wall": m["bytes_seen"] / 1e6 / wall,
            "tokens_per_s_stage": (m["train_tokens"] + m["eval_tokens"]) / m["elapsed_s"],
            "metrics": m,
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "metrics"}, indent=2))


if __name__ == "__main__":
    main()
