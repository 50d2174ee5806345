"""`data`: what the data stage reads and builds."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import _Section

SEED_EXTENSIONS = (".py", ".java", ".go", ".rs", ".cpp", ".c", ".h", ".hpp")
DEFAULT_EXTENSIONS = SEED_EXTENSIONS + (".cc", ".cxx", ".hh", ".hxx", ".ipp")
# data.sources entries that name a corpus of this machine rather than a directory
BUILT_IN_SOURCES = ("stdlib", "site-packages", "go-stdlib")


class DataConfig(_Section):
    format: Literal["sft", "cpt", "jsonl"] = "sft"
    """What the stage builds: "sft" the two tasks of each documented function (data.tasks), "cpt" raw code
    (with fill-in-the-middle) for continued pre-training, "jsonl" the user's own chat files."""
    sources: list[str] = Field(default_factory=lambda: ["stdlib"])
    """Each source is a directory of repositories (every entry directly under it is one repository: the unit of
    the train/eval split), "stdlib" (this interpreter's standard library), "site-packages" (the packages
    installed for it) or "go-stdlib" (six small packages of Go's standard library with their tests, each a
    repository: source/go_std.py; none where Go is not installed)."""
    manifest: str | None = None
    """Optional YAML listing repositories with their priority and language (`ferrylm manifest ROOT` writes one
    from the seed's <priority>/<language>/<repo> layout); scanned after `sources`."""
    jsonl_files: list[str] = Field(default_factory=list)
    """format=jsonl: files in alpaca, sharegpt or OpenAI-messages form ("auto" tells them apart per row)."""
    jsonl_format: Literal["auto", "alpaca", "sharegpt", "openai"] = "auto"
    """format=jsonl: the rows' form; "auto" tells alpaca, sharegpt and OpenAI messages apart per row."""
    extensions: list[str] = Field(default_factory=lambda: list(DEFAULT_EXTENSIONS))
    """File extensions scanned: the seed's list ("Qwen 2.5 7B Code A40 训练方案") plus the C++ spellings it lacks
    (.cc/.hh: Google style); the seed's own list is SEED_EXTENSIONS."""
    exclude_dirs: list[str] = Field(default_factory=lambda: ["node_modules", "target", "build", ".git", "__pycache__"])
    """Directory names skipped anywhere in a repository."""
    max_file_bytes: int = Field(1024 * 1024, gt=0)
    """Files this large or larger are dropped (counted as "too large")."""
    min_chars: int = Field(100, ge=0)
    """Files with fewer characters are dropped (the seed's 100)."""
    max_chars: int = Field(50_000, gt=0)
    """Files with more characters are dropped (the seed's 50,000)."""
    min_lines: int = Field(10, ge=0)
    """Files with fewer lines are dropped (the seed's 10)."""
    max_files: int | None = Field(None, gt=0)
    """Stop scanning after this many kept files (None: all); for quick trials."""
    exact_dedupe: bool = True
    """Remove files whose content is byte-for-byte another's (the first one seen is kept)."""
    near_dedupe: bool = True
    """Remove near duplicates (MinHash over word 5-grams, LSH at near_dedupe_threshold)."""
    near_dedupe_threshold: float = Field(0.85, gt=0, lt=1)
    """Estimated Jaccard similarity at or above which two files count as near duplicates."""
    minhash_perms: int = Field(128, ge=16, le=512)
    """MinHash permutations per file (more: a finer similarity estimate, slower)."""
    scrub_secrets: bool = True
    """Replace keys, tokens, private keys and credential-named values with placeholders (counted by kind in stats.md)."""
    drop_generated: bool = True
    """Drop generated files (a marker such as "DO NOT EDIT" near the top) and minified ones."""
    max_line_chars: int = Field(1000, gt=0)
    """A file with a line longer than this counts as minified."""
    min_alnum_fraction: float = Field(0.25, ge=0, le=1)
    """A file whose share of letters and digits is below this counts as minified or data."""
    fim_rate: float = Field(0.5, ge=0, le=1)
    """format=cpt: the share of documents turned into fill-in-the-middle examples (when the tokenizer has FIM
    tokens)."""
    fim_spm_rate: float = Field(0.5, ge=0, le=1)
    """format=cpt: of the fill-in-the-middle examples, the share in suffix-prefix-middle order."""
    pack: bool = False
    """Pack examples into rows of max_seq_len (position ids restart per example, attention stays inside each).
    cpt always packs."""
    workers: int = Field(0, ge=0)
    """Worker processes for scanning and cleaning, threads for tokenizing; 0 = every CPU."""
    tasks: dict[Literal["generate", "explain", "file"], float] = Field(
        default_factory=lambda: {"generate": 1.0, "explain": 1.0}
    )
    """format=sft: the tasks each function with a doc comment teaches, and the share of functions that give an
    example of each (seeded per function): "generate" doc comment + signature → body, "explain" the code →
    the doc comment's summary (code understanding, CodeXGLUE's code-to-text), "file" the generate task asked as
    the eval asks a team's own functions: the function's file shown with its body cut out (held-out functions
    taken out), the body the answer; training functions only. A list names tasks at share 1. On a team's own
    repositories [generate, explain, file] is the measured choice (docs/train.md, "On your own repositories")."""
    file_context_tokens: int = Field(768, ge=64)
    """format=sft, task "file": how much of the file the question shows (3 characters a token); keep it at the
    eval's eval.repo_context_tokens, so training asks as the eval does."""
    file_context_outline: float = Field(0.0, ge=0, le=0.5)
    """format=sft, task "file": the share of the question's window that outlines the lines it leaves out (as
    eval.repo_context_outline; keep the two equal). 0: off."""
    repo_files: float = Field(0.0, ge=0, le=1)
    """format=sft: the share of the training repositories' source files (of repositories whose tests the eval
    runs: your own, not the stdlib / site-packages corpora) also trained whole as continued pre-training: the
    model's repository format, windows of max_seq_len tokens, fill-in-the-middle at fim_rate, every held-out
    function's body cut out, test files never (data/repo_files.py). 0: off; beside the file questions it did not
    help at a fixed step budget (docs/train.md, "On your own repositories")."""
    answer: Literal["body", "function"] = "body"
    """format=sft: what a generate example answers with, "body" (the body alone) or "function" (the whole
    function, signature and doc comment first, as an instruct model answers unasked). The eval asks every
    model in the same form (the data stage's record carries it)."""
    min_body_lines: int = Field(2, ge=1)
    """format=sft: shortest function body (lines) used as an example."""
    max_body_lines: int = Field(30, ge=1)
    """format=sft: longest function body (lines) used as an example."""
    max_pairs: int | None = Field(4000, gt=0)
    """format=sft: functions drawn in all (seeded), each giving one example per task; None: every one found."""
    eval_fraction: float = Field(0.05, gt=0, lt=1)
    """Share of repositories held out for evaluation (the split is by repository, never within one)."""
    holdout_functions: float = Field(0.0, ge=0, lt=1)
    """format=sft: share of the training repositories' functions also held out (seeded per function; 0: off),
    since a team mostly asks the model about the repositories it trained on. Those functions' examples,
    training functions whose bodies nearly duplicate theirs, and every test file of a training repository
    never reach training; the eval stage scores them apart from the held-out repositories. Those of your own
    repositories (not of the stdlib / site-packages corpora) are all kept, beyond max_pairs. In a repository
    with tests the share is drawn among the functions its test files name: only those can become tasks."""
    validation_functions: float = Field(0.2, ge=0, lt=1)
    """format=sft, holdout_functions: the share of the held-out functions that only validates: their rows are the
    training's held-out loss (train.keep_best chooses the checkpoint on it, with the canary) and they are never
    reported as tasks; the other held-out functions are reported and never choose the checkpoint."""
    max_seq_len: int = Field(512, ge=32)
    """Tokens per example (or per packed row); longer examples are dropped and counted."""
    seed: int = 0
    """Seeds the split, the draw of functions and tasks, and fill-in-the-middle."""

    @field_validator("holdout_functions", "repo_files")
    @classmethod
    def _only_sft(cls, v: float, info):
        if v and info.data.get("format") not in (None, "sft"):
            raise ValueError("needs format=sft (cpt trains on whole files, held-out functions and all)")
        return v

    @field_validator("tasks", mode="before")
    @classmethod
    def _task_list(cls, v):
        return {t: 1.0 for t in v} if isinstance(v, (list, tuple)) else v

    @field_validator("tasks")
    @classmethod
    def _task_shares(cls, v: dict) -> dict:
        if not v or not any(share > 0 for share in v.values()) or any(not 0 <= s <= 1 for s in v.values()):
            raise ValueError(
                "each task's share must be in [0, 1] and at least one above 0, e.g. {generate: 1, explain: 1}"
            )
        return v
