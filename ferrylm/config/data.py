"""`data`: what the data stage reads and builds."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator

from .base import _Section


SEED_EXTENSIONS = (".py", ".java", ".go", ".rs", ".cpp", ".c", ".h", ".hpp")
DEFAULT_EXTENSIONS = SEED_EXTENSIONS + (".cc", ".cxx", ".hh", ".hxx", ".ipp")


class DataConfig(_Section):
    # What the stage builds: "sft" the two tasks of each documented function (data.tasks), "cpt" raw code (with
    # fill-in-the-middle) for continued pre-training, "jsonl" the user's own chat files.
    format: Literal["sft", "cpt", "jsonl"] = "sft"
    # Each source is a directory of repositories (every entry directly under it is one repository:
    # the unit of the train/eval split), "stdlib" (this interpreter's standard library) or
    # "site-packages" (the packages installed for it).
    sources: list[str] = Field(default_factory=lambda: ["stdlib"])
    # Optional YAML listing repositories with their priority and language (`ferrylm manifest ROOT`
    # writes one from the seed's <priority>/<language>/<repo> layout); scanned after `sources`.
    manifest: Optional[str] = None
    # format=jsonl: files in alpaca, sharegpt or OpenAI-messages form ("auto" tells them apart per row).
    jsonl_files: list[str] = Field(default_factory=list)
    jsonl_format: Literal["auto", "alpaca", "sharegpt", "openai"] = "auto"
    # The seed's scan rules ("Qwen 2.5 7B Code A40 训练方案"), with the C++ spellings its list lacks
    # (.cc/.hh: Google style); the seed's own list is SEED_EXTENSIONS.
    extensions: list[str] = Field(default_factory=lambda: list(DEFAULT_EXTENSIONS))
    exclude_dirs: list[str] = Field(default_factory=lambda: ["node_modules", "target", "build", ".git", "__pycache__"])
    max_file_bytes: int = Field(1024 * 1024, gt=0)
    min_chars: int = Field(100, ge=0)
    max_chars: int = Field(50_000, gt=0)
    min_lines: int = Field(10, ge=0)
    max_files: Optional[int] = Field(None, gt=0)
    # Cleaning. Generated files: a marker in the first lines; minified: a very long line or
    # little alphanumeric text. Near-duplicates: MinHash over word 5-grams, LSH at this Jaccard.
    exact_dedupe: bool = True
    near_dedupe: bool = True
    near_dedupe_threshold: float = Field(0.85, gt=0, lt=1)
    minhash_perms: int = Field(128, ge=16, le=512)
    scrub_secrets: bool = True
    drop_generated: bool = True
    max_line_chars: int = Field(1000, gt=0)
    min_alnum_fraction: float = Field(0.25, ge=0, le=1)
    # format=cpt: the share of documents turned into fill-in-the-middle examples (when the tokenizer
    # has FIM tokens), and of those the share in suffix-prefix-middle order.
    fim_rate: float = Field(0.5, ge=0, le=1)
    fim_spm_rate: float = Field(0.5, ge=0, le=1)
    # Pack examples into rows of max_seq_len (position ids restart per example, attention stays
    # inside each). cpt always packs.
    pack: bool = False
    # Worker processes for scanning and cleaning, threads for tokenizing; 0 = every CPU.
    workers: int = Field(0, ge=0)
    # format=sft: the tasks each function with a doc comment teaches, and the share of functions that
    # give an example of each (seeded per function): "generate" doc comment + signature → body,
    # "explain" the code → the doc comment's summary (code understanding, CodeXGLUE's code-to-text).
    # A list names tasks at share 1.
    tasks: dict[Literal["generate", "explain"], float] = Field(
        default_factory=lambda: {"generate": 1.0, "explain": 1.0})
    # Pair extraction: a function with a docstring whose body is a teachable size.
    min_body_lines: int = Field(2, ge=1)
    max_body_lines: int = Field(30, ge=1)
    max_pairs: Optional[int] = Field(4000, gt=0)
    eval_fraction: float = Field(0.05, gt=0, lt=1)
    max_seq_len: int = Field(512, ge=32)
    seed: int = 0

    @field_validator("tasks", mode="before")
    @classmethod
    def _task_list(cls, v):
        return {t: 1.0 for t in v} if isinstance(v, (list, tuple)) else v

    @field_validator("tasks")
    @classmethod
    def _task_shares(cls, v: dict) -> dict:
        if not v or not any(share > 0 for share in v.values()) or any(not 0 <= s <= 1 for s in v.values()):
            raise ValueError("each task's share must be in [0, 1] and at least one above 0, e.g. {generate: 1, explain: 1}")
        return v
