"""Records real SmolLM2-135M-Instruct chat replies to the first HumanEval-X tasks of each language
(greedy, 200 new tokens, stopping at the first closed code block, exactly as the eval stage asks),
into tests/eval/tasks/data/smollm2_humaneval_x_replies.json, which the extraction test reads.

    FERRYLM_HUMANEVAL_X=../shared/data/humaneval-x .venv/bin/python tests/eval/tasks/record_humaneval_x_replies.py
"""

import json
from pathlib import Path

from ferrylm.eval.generators import LocalGenerator
from ferrylm.eval.tasks import humaneval_x as hx
from ferrylm.models import convert_embedded
from ferrylm.prompts import code_block_closed, user_message

OUT = Path(__file__).resolve().parent / "data" / "smollm2_humaneval_x_replies.json"


def main(tasks_per_language: int = 3) -> None:
    generator = LocalGenerator(convert_embedded(Path(".cache/ferrylm")))
    replies = {}
    for lang in hx.LANGUAGES:
        for p in hx.load_problems(lang)[:tasks_per_language]:
            message = user_message(hx.LANGUAGES[lang].prompt(p), lang)
            replies[p["task_id"]] = generator.chat(
                [{"role": "user", "content": message}], 200, 0.0, until=code_block_closed
            )[0]
            print(p["task_id"], replies[p["task_id"]][:60].replace("\n", " "), flush=True)
    OUT.write_text(json.dumps(replies, indent=1) + "\n")


if __name__ == "__main__":
    main()
