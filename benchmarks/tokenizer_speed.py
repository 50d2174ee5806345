"""Tokenizing speed on CPU: the tokenizer's own batch encoder vs ferrylm's tiktoken twin (same ids).

    .venv/bin/python benchmarks/tokenizer_speed.py

Texts: this interpreter's standard library .py files under 50,000 characters. Both engines use
every CPU (tokenizers through Rayon, the twin through threads).
"""

from __future__ import annotations

import json
import os
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    from ferrylm.data.encode import Encoder
    from ferrylm.models import convert_embedded, load_tokenizer

    tok = load_tokenizer(convert_embedded(REPO / ".cache" / "ferrylm"))
    texts = [
        t
        for t in (
            p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
        )
        if len(t) < 50_000
    ]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    t0 = time.perf_counter()
    ref = [e.ids for e in tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]
    hf_s = time.perf_counter() - t0
    enc = Encoder(tok, threads=os.cpu_count() or 1, check_docs=0)
    t0 = time.perf_counter()
    ids = enc.encode(texts)
    twin_s = time.perf_counter() - t0
    result = {
        "cpus": os.cpu_count(),
        "files": len(texts),
        "mb": mb,
        "engine": enc.engine,
        "tokenizers_mb_per_s": mb / hf_s,
        "twin_mb_per_s": mb / twin_s,
        "identical": ids == ref,
    }
    (REPO / "bench" / "results" / "tokenizer_speed.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
