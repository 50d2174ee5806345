"""The same train stage under DeepSpeed ZeRO-2, two processes on CPU (gloo), launched by torchrun."""
import json
import subprocess
import sys

from tests.conftest import free_port


def test_zero2_two_processes(copy_run, tiny_qwen2_dir, tiny_corpus):
    run = copy_run()
    overrides = [f"run_dir={run}", f"model.path={tiny_qwen2_dir}", f"data.sources=[{tiny_corpus}]",
                 "train.deepspeed=zero2", "train.max_steps=6", "train.save_steps=3", "train.logging_steps=1",
                 "train.per_device_batch_size=2", "train.learning_rate=3e-3", "train.lora_dropout=0",
                 "train.warmup_steps=0", "train.eval_batches=2"]
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", str(free_port()), "-m", "ferrylm", "train", *overrides],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((run / "train" / "record.json").read_text())["metrics"]
    assert m["deepspeed"] == "zero2" and m["world_size"] == 2 and m["steps"] == 6
    assert m["eval_loss"] < m["base_eval_loss"]
    # DeepSpeed wrote its own sharded engine state: the ZeRO path really ran.
    ckpt = run / "train" / "checkpoints" / "checkpoint-6"
    assert (ckpt / "COMPLETE").is_file()
    assert list(ckpt.glob("global_step6/*optim_states.pt"))
    assert (run / "train" / "adapter" / "adapter_model.safetensors").is_file()
