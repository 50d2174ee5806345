"""The review page for real: `ferrylm review` as a process on loopback, its API under concurrent
reviewers and malformed requests, and a headless Chromium voting with the mouse and the keyboard
across a restart, then the report's numbers against the database by hand."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import psutil
import pytest
import requests

from ferrylm.serve.process import free_port


@contextmanager
def serving(run, port, *extra):
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferrylm.cli", "review", f"run_dir={run}", f"review.port={port}", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except requests.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"review did not start: {proc.stdout.read()}")
                time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


def _token(url: str) -> str:
    """The token the page holds (what its script sends with each vote)."""
    page = requests.get(f"{url}/item/1?reviewer=probe", timeout=30).text
    return json.loads(page.split('<script id="state" type="application/json">', 1)[1].split("</script>", 1)[0])["token"]


def _count(run) -> int:
    with sqlite3.connect(run / "review" / "votes.sqlite") as con:
        return con.execute("SELECT COUNT(*) FROM votes").fetchone()[0]


def test_api_takes_concurrent_reviewers_refuses_malformed_votes_and_binds_loopback(review_run):
    cfg, out = review_run
    run, port = out.parent, free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(run, port) as proc:
        items = json.loads((run / "review" / "items.json").read_text())
        assert len(items) == 10  # all 4 held-out pairs and 6 tasks (< 60)
        listening = {c.laddr.ip for c in psutil.Process(proc.pid).net_connections() if c.status == "LISTEN"}
        assert listening == {"127.0.0.1"}

        token = {"X-Review-Token": _token(url)}

        def reviewer(name):
            for item in items:
                r = requests.post(
                    f"{url}/api/vote",
                    json={"reviewer": name, "item": item["id"], "a": "correct", "b": "partly", "preference": "tie"},
                    headers=token,
                    timeout=30,
                )
                assert r.status_code == 200 and r.json()["saved"], r.text

        threads = [threading.Thread(target=reviewer, args=(f"r{i}",)) for i in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert _count(run) == 40
        bad = [
            ("not json", 400, "not JSON"),
            ([1, 2], 400, "JSON object"),
            ({"reviewer": "x", "item": "nope", "a": "correct", "b": "correct", "preference": "a"}, 404, "not one of"),
            (
                {"reviewer": "x", "item": items[0]["id"], "a": "great", "b": "correct", "preference": "a"},
                422,
                "verdict",
            ),
            (
                {"reviewer": "", "item": items[0]["id"], "a": "correct", "b": "correct", "preference": "a"},
                422,
                "reviewer",
            ),
            (
                {"reviewer": "x", "item": items[0]["id"], "a": "correct", "b": "correct", "preference": "c"},
                422,
                "preference",
            ),
        ]
        for body, status, says in bad:
            r = requests.post(
                f"{url}/api/vote",
                data=body if isinstance(body, str) else json.dumps(body),
                timeout=30,
                headers={**token, "Content-Type": "application/json"},
            )
            assert (r.status_code, says in r.json()["error"]) == (status, True), (body, r.status_code, r.text)
        assert _count(run) == 40  # nothing written by a refused vote
        r = requests.get(f"{url}/?reviewer=r0", allow_redirects=False, timeout=30)
        assert r.status_code == 303 and r.headers["location"] == "/item/10?reviewer=r0"  # all done: the last one
        # the same port again: one line naming the key
        busy = subprocess.run(
            [sys.executable, "-m", "ferrylm.cli", "review", f"run_dir={run}", f"review.port={port}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert busy.returncode == 2 and "review.port: 127.0.0.1:" in busy.stderr and "already in use" in busy.stderr


def _chrome(tmp_path):
    from selenium import webdriver

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1300,1000",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        opts.add_argument(a)
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")))


@pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="chromium and chromium-driver are installed by `make test` (needs root for apt-get)",
)
@pytest.mark.slow
def test_a_reviewer_votes_with_mouse_and_keys_the_votes_survive_a_restart_and_reach_the_report(review_run, tmp_path):
    from PIL import Image, ImageStat
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    from ferrylm.eval import rewrite_report

    cfg, out = review_run
    run, port = out.parent, free_port()
    url = f"http://127.0.0.1:{port}"
    driver = _chrome(tmp_path)
    wait = WebDriverWait(driver, 30)

    def text(css):
        return driver.find_element(By.CSS_SELECTOR, css).text

    try:
        with serving(run, port):
            driver.get(f"{url}/")
            driver.find_element(By.ID, "reviewer").send_keys("ann", Keys.ENTER)  # the name form
            wait.until(lambda d: "/item/1?" in d.current_url)
            assert text("#progress") == "0 / 10" and text("#exec-a") == ""  # tests hidden before the vote
            for button in ("a-correct", "b-incorrect", "preference-a"):  # item 1 with the mouse
                driver.find_element(By.ID, button).click()
            driver.find_element(By.ID, "comment").send_keys("A is right")
            driver.find_element(By.ID, "save").click()
            wait.until(lambda d: text("#status") == "saved")
            assert text("#progress") == "1 / 10"
            driver.find_element(By.ID, "next").click()
            wait.until(lambda d: "/item/2?" in d.current_url)
            body = driver.find_element(By.TAG_NAME, "body")
            body.send_keys(Keys.ENTER)  # nothing chosen: refused
            wait.until(lambda d: "judge A and B" in text("#status"))
            for n, keys in ((2, "29t"), (3, "17b")):  # items 2 and 3 with the keys
                driver.find_element(By.TAG_NAME, "body").send_keys(*keys, Keys.ENTER)
                wait.until(lambda d: text("#status") == "saved")
                driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ENTER)
                wait.until(lambda d, n=n: f"/item/{n + 1}?" in d.current_url)
            items = json.loads((run / "review" / "items.json").read_text())
            driver.get(
                f"{url}/item/{next(i for i, it in enumerate(items) if it['execution'] and i >= 3) + 1}?reviewer=ann"
            )
            for key in ("3", "9", "t", Keys.ENTER):
                driver.find_element(By.TAG_NAME, "body").send_keys(key)
            wait.until(lambda d: text("#status") == "saved")
            assert text("#exec-a").startswith("tests: ") and text("#exec-b").startswith("tests: ")  # shown after
            shot = tmp_path / "review.png"
            driver.save_screenshot(str(shot))
            if os.environ.get("FERRYLM_SCREENSHOTS"):  # to look at it yourself
                shutil.copy(shot, os.environ["FERRYLM_SCREENSHOTS"])
        with serving(run, port):  # a restart
            driver.get(f"{url}/?reviewer=ann")
            wait.until(lambda d: "/item/" in d.current_url)
            assert text("#progress") == "4 / 10" and "/item/1?" not in driver.current_url  # resumes past the judged
            driver.get(f"{url}/item/1?reviewer=ann")
            assert "on" in driver.find_element(By.ID, "a-correct").get_attribute("class")  # the vote survived
            assert driver.find_element(By.ID, "comment").get_attribute("value") == "A is right"
    finally:
        driver.quit()
    img = Image.open(shot).convert("RGB")
    assert max(ImageStat.Stat(img).stddev) > 20 and len(img.getcolors(1 << 20)) > 50  # highlighted code, not blank
    # item 1: A correct, B incorrect, A preferred, stored by model
    with sqlite3.connect(run / "review" / "votes.sqlite") as con:
        rows = con.execute(
            "SELECT item, fine_tuned, base, preference, shown_as_a FROM votes WHERE reviewer='ann'"
        ).fetchall()
    first = next(r for r in rows if r[0] == items[0]["id"])
    a_model = items[0]["a"]
    assert first[4] == a_model and first[3] == a_model
    assert (first[1], first[2]) == (("correct", "incorrect") if a_model == "fine-tuned" else ("incorrect", "correct"))
    report = rewrite_report(cfg(f"review.port={port}"))  # the links name the port the page is served on
    human = report["details"]["human"]
    for m, col in (("fine-tuned", 1), ("base", 2)):
        assert human["models"][m]["rate"] == sum(r[col] == "correct" for r in rows) / len(rows)
        assert report["models"][m]["human_correct"] == human["models"][m]["rate"]
    assert human["votes"] == len(rows) == 4 and human["reviewers"] == ["ann"]
    row = next(r for r in report["criteria"] if r["criterion"] == "human_correct")
    assert row["gate"] is False and row["fine-tuned"]["verdict"] in ("pass", "fail")
    md = (out / "report.md").read_text()
    assert "## Human-judged correctness" in md and "4 items judged by 1 reviewer(s) (ann), 4 votes." in md
    assert f'href="{url}/item/1"' in (out / "report.html").read_text()


VOTE = {"a": "correct", "b": "incorrect", "preference": "a"}


def test_votes_only_from_the_page_itself(review_run):
    """A cross-site 'simple' request, another Origin, a rebound Host, a missing or foreign token: each
    refused with 4xx and nothing written; the page's own token votes."""
    cfg, out = review_run
    run, port = out.parent, free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(run, port):
        items = json.loads((run / "review" / "items.json").read_text())
        body = {"reviewer": "eve", "item": items[0]["id"], **VOTE}
        token = _token(url)
        before = _count(run) if (run / "review" / "votes.sqlite").exists() else 0
        attempts = {
            # what any page the reviewer opens can send without a CORS preflight
            "text/plain from another site": dict(
                data=json.dumps(body), headers={"Content-Type": "text/plain", "Origin": "http://evil.example"}
            ),
            "a form post": dict(data={"reviewer": "eve"}, headers={"Origin": "http://evil.example"}),
            "JSON from another origin": dict(
                json=body, headers={"Origin": "http://evil.example", "X-Review-Token": token}
            ),
            "another page's referer": dict(
                json=body, headers={"Referer": "http://evil.example/x", "X-Review-Token": token}
            ),
            "a rebound host": dict(json=body, headers={"Host": f"evil.example:{port}", "X-Review-Token": token}),
            "no token": dict(json=body),
            "a foreign token": dict(json=body, headers={"X-Review-Token": "not-this-servers"}),
        }
        got = {k: requests.post(f"{url}/api/vote", timeout=30, **kw).status_code for k, kw in attempts.items()}
        assert got == {
            "text/plain from another site": 415,
            "a form post": 415,
            "JSON from another origin": 403,
            "another page's referer": 403,
            "a rebound host": 421,
            "no token": 403,
            "a foreign token": 403,
        }
        assert (
            requests.get(f"{url}/item/1?reviewer=eve", headers={"Host": f"evil.example:{port}"}, timeout=30).status_code
            == 421
        )
        after = _count(run) if (run / "review" / "votes.sqlite").exists() else 0
        assert after == before  # nothing written
        ok = requests.post(
            f"{url}/api/vote", json=body, timeout=30, headers={"Origin": url, "X-Review-Token": token}
        )  # the page's own request
        assert ok.status_code == 200 and _count(run) == before + 1


def test_invited_reviewers_vote_as_themselves_only(review_run):
    cfg, out = review_run
    run, port = out.parent, free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(run, port, "--invite", "alice,bob"):
        tokens = json.loads((run / "review" / "invites.json").read_text())
        assert set(tokens) == {"alice", "bob"} and oct((run / "review" / "invites.json").stat().st_mode)[-3:] == "600"
        items = json.loads((run / "review" / "items.json").read_text())
        item = items[1]["id"]
        alice, bob = ({"X-Review-Token": tokens[n]} for n in ("alice", "bob"))
        assert requests.get(f"{url}/?reviewer=alice", timeout=30).status_code == 403  # no invitation: no page
        page = requests.get(f"{url}/?token={tokens['alice']}", allow_redirects=False, timeout=30)
        assert page.status_code == 303 and page.headers["location"] == f"/item/1?token={tokens['alice']}"
        assert (
            requests.post(f"{url}/api/vote", json={"item": item, **VOTE}, headers=alice, timeout=30).status_code == 200
        )
        # bob cannot vote as alice, nor replace her vote; an invented name gets nothing
        as_alice = requests.post(
            f"{url}/api/vote", json={"reviewer": "alice", "item": item, **VOTE}, headers=bob, timeout=30
        )
        assert as_alice.status_code == 403 and "votes as bob" in as_alice.json()["error"]
        typed = requests.post(f"{url}/api/vote", json={"reviewer": "alice", "item": item, **VOTE}, timeout=30)
        assert typed.status_code == 403
        mine = {"item": item, "a": "incorrect", "b": "incorrect", "preference": "tie"}
        assert requests.post(f"{url}/api/vote", json=mine, headers=bob, timeout=30).status_code == 200
        with sqlite3.connect(run / "review" / "votes.sqlite") as con:
            rows = dict(con.execute("SELECT reviewer, preference FROM votes WHERE item=?", (item,)).fetchall())
        a_model = items[1]["a"]
        assert rows == {"alice": a_model, "bob": "tie"}  # alice's vote stands beside bob's
    # restarted with the same names: the links already sent still work
    with serving(run, port, "--invite", "alice,bob"):
        assert json.loads((run / "review" / "invites.json").read_text()) == tokens
        assert requests.get(f"{url}/?token={tokens['bob']}", timeout=30).status_code == 200


def test_a_page_open_to_others_needs_invited_reviewers(review_run):
    cfg, out = review_run
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferrylm.cli",
            "review",
            f"run_dir={out.parent}",
            f"review.port={free_port()}",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "review.host: 0.0.0.0 opens the page to others; invite its reviewers" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
