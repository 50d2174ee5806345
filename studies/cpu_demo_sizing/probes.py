"""The probes vllm_probe.sh runs against a vLLM server on 127.0.0.1:8123 (served name "m")."""

import concurrent.futures as cf
import json
import sys
import time
import urllib.request

from ferrylm.eval.generators import EndpointGenerator
from ferrylm.eval.tasks import humaneval
from ferrylm.prompts import user_message

URL = "http://127.0.0.1:8123"


def _post(path: str, body: dict) -> dict:
    req = urllib.request.Request(URL + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())


def throughput(levels: str = "1,8,16") -> None:
    def one(i):
        return _post(
            "/v1/completions",
            {
                "model": "m",
                "prompt": f'def function_{i}(x):\n    """Sort the list x."""\n',
                "max_tokens": 128,
                "min_tokens": 128,
                "temperature": 0,
            },
        )["usage"]["completion_tokens"]

    for conc in map(int, levels.split(",")):
        t = time.time()
        with cf.ThreadPoolExecutor(conc) as ex:
            n = sum(ex.map(one, range(conc)))
        print(f"conc {conc}: {n / (time.time() - t):.1f} tok/s", flush=True)


def fence() -> None:
    def one(p):
        r = _post(
            "/v1/chat/completions",
            {
                "model": "m",
                "messages": [{"role": "user", "content": user_message(p["prompt"])}],
                "max_tokens": 192,
                "temperature": 0,
            },
        )
        text, toks = r["choices"][0]["message"]["content"], r["usage"]["completion_tokens"]
        i = text.find("```")
        j = text.find("\n```", i + 3) if i >= 0 else -1
        return toks, (j + 4) / len(text) if j >= 0 else 1.0

    with cf.ThreadPoolExecutor(16) as ex:
        rows = list(ex.map(one, humaneval.load_problems()[::8]))
    total = sum(t for t, _ in rows)
    print(f"tokens {total}, up to the closing fence ~{round(sum(t * f for t, f in rows))}")


def he40(concurrency: str = "16") -> None:
    t = time.time()
    problems = humaneval.load_problems(40, seed=0)
    humaneval.generate(EndpointGenerator(URL, "m"), problems, 192, int(concurrency), what="he40")
    print(f"HE40 wall {time.time() - t:.1f} s at concurrency {concurrency}")


if __name__ == "__main__":
    {"throughput": throughput, "fence": fence, "he40": he40}[sys.argv[1]](*sys.argv[2:])
