#!/usr/bin/env bash
# Executed Pass@1 on a team's own functions, on real weights, by the product's own commands: the
# demo-gpu preset (SmolLM2-135M-Instruct, LoRA r16, 2 epochs at 2e-4) over the demo's three real projects
# (make demo-repos) beside the standard library and the installed packages, a quarter of every
# training repository's functions held out (data.holdout_functions=0.25); then the eval stage
# in-process, base against fine-tuned, including each model's bodies run against the projects' own
# tests (eval/repo/). studies/real_smollm2_finetune/gpu_finetune.sh does each stage.
#
#   RESULTS=DIR ARGS="..." studies/real_smollm2_finetune/gpu_repo_pass1.sh      # ARGS: more dotted overrides for every stage
set -euo pipefail
cd "$(dirname "$0")/../.."
REPOS=${REPOS:-$PWD/.cache/ferrylm/demo-repos}
export RESULTS=${RESULTS:-studies/real_smollm2_finetune/results/gpu_repo_pass1}
export ARGS="data.sources=[$REPOS,stdlib,site-packages] data.holdout_functions=0.25 eval.repo_task_limit=20 ${ARGS:-}"
bash studies/real_smollm2_finetune/gpu_finetune.sh data
bash studies/real_smollm2_finetune/gpu_finetune.sh train 2e-4 2
bash studies/real_smollm2_finetune/gpu_finetune.sh eval 2e-4 2
