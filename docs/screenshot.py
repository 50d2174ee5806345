"""Write the README's picture: the first screen of a real run's HTML report, in headless Chromium.

    .venv/bin/python docs/screenshot.py RUN_DIR      # writes docs/report_first_screen.png from RUN_DIR/eval/report.html

RUN_DIR: make demo's runs/default, or a GPU run's folder. The README's picture is the second corpus's run of the
team recipe with Go (220 steps, one H100), its report.html as that run wrote it: kept as
studies/python_own_code/results/recipe_go_second_h100/second_report.html (copy it to RUN_DIR/eval/report.html).

Chromium and its driver come from Debian's packages (`make chromium`, as root).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from PIL import Image
from selenium import webdriver

OUT = Path(__file__).with_name("report_first_screen.png")
WIDTH, HEIGHT = 1100, 760


def main(run_dir: str) -> None:
    report = Path(run_dir, "eval", "report.html").resolve()
    if not report.is_file():
        sys.exit(f"{report}: no report there (run make demo first)")
    opts = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},{HEIGHT}"):
        opts.add_argument(flag)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=opts, service=service)
    try:
        driver.get(report.as_uri())
        driver.save_screenshot(str(OUT))
    finally:
        driver.quit()
    # A palette of 64 colours keeps the committed picture small; the report is text and flat fills.
    Image.open(OUT).convert("RGB").quantize(64).save(OUT, optimize=True)
    print(f"{OUT} ({OUT.stat().st_size // 1024} KB) from {report}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/default")
