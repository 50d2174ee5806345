"""format=cpt: whole files as training rows for continued pre-training (the data stage's other form)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from ..config.data import DataConfig
from ..log import get_logger
from .collect import worker_count
from .encode import Encoder, cpt_examples, document_end_id, fim_token_ids

log = get_logger("data")


def write_examples(d: DataConfig, tokenizer, docs, held: set, writers: dict, held_out: list, stats: dict) -> None:
    """Each document as continued pre-training rows (fill-in-the-middle at `d.fim_rate`) into its split's
    writer; up to 256 held-out documents become "continue this code" questions."""
    encoder = Encoder(tokenizer, threads=worker_count(d))
    fim = fim_token_ids(tokenizer)
    if fim is None and d.fim_rate > 0:
        log.warning("data: the tokenizer has no fill-in-the-middle tokens; cpt examples are plain code")
    end_id = document_end_id(tokenizer)
    from tqdm import tqdm

    def examples_of(chunk):
        return cpt_examples(
            [doc.text for doc in chunk],
            [doc.ref.rel for doc in chunk],
            encoder,
            fim,
            end_id,
            d.fim_rate,
            d.fim_spm_rate,
            d.seed,
        )

    chunks = [docs[i : i + 256] for i in range(0, len(docs), 256)]
    t0 = time.perf_counter()
    # The next batch is tokenized (the tokenizer releases the GIL) while this one is packed and written.
    with ThreadPoolExecutor(1) as ahead:
        pending = ahead.submit(examples_of, chunks[0]) if chunks else None
        for k in tqdm(range(len(chunks)), desc="tokenize+pack", unit="batch", disable=None, mininterval=2):
            examples = pending.result()
            pending = ahead.submit(examples_of, chunks[k + 1]) if k + 1 < len(chunks) else None
            for doc, (ids, labels) in zip(chunks[k], examples):
                about = {"repository": doc.ref.repo, "file": doc.ref.rel, "task": "cpt"}
                writers["eval" if doc.ref.repo in held else "train"].add(ids, labels, about)
    for doc in docs:
        if doc.ref.repo in held and len(held_out) < 256:
            lines = doc.text.splitlines(keepends=True)
            cut = min(30, len(lines) // 2)
            held_out.append(
                {
                    "source": doc.ref.rel,
                    "language": doc.ref.language,
                    "reference": "".join(lines[cut : cut + 30]),
                    "messages": [
                        {
                            "role": "user",
                            "content": "Continue this code. Reply with the next lines "
                            f"only, in a ```{doc.ref.language} block.\n\n```{doc.ref.language}\n"
                            + "".join(lines[:cut])
                            + "```",
                        }
                    ],
                }
            )
    stats["tokenizer_engine"] = encoder.engine
    stats["tokenize_s"] = encoder.seconds
    stats["tokenize_pack_write_s"] = time.perf_counter() - t0
    stats["fim"] = fim is not None and d.fim_rate > 0
