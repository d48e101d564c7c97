"""Headless Chromium through selenium, for the dashboard's browser test
(tests/automation/ui/test_ui_browser.py) and its benchmark (bench_dashboard.py).

Debian's Chromium and chromedriver (``.ci/browser.sh`` installs both; selenium is pointed at
them and downloads nothing). When selenium or either binary is missing, ``chrome`` raises
``BrowserMissing`` with what to do: the test turns it into a skip (a failure under CI=true,
``tests.conftest.missing``), the benchmark into ``_cli.missing`` (likewise exit 1 under
CI=true, EXIT_MISSING elsewhere). No import of selenium happens before ``chrome`` is called.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
OPTIONS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
           "--no-first-run", "--disable-extensions")


class BrowserMissing(Exception):
    """selenium, Chromium or chromedriver is not here; the message says how to get it."""


def chrome(width: int = 1280, height: int = 900) -> Any:
    """A headless Chromium of ``width`` x ``height`` driven by Debian's chromedriver."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise BrowserMissing("selenium is not installed (pip install -c constraints.txt -e "
                             "'.[dev]')") from None
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            raise BrowserMissing(f"{path} is missing: run .ci/browser.sh (Debian's chromium "
                                 "and chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (*OPTIONS, f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def version(driver: Any) -> str:
    """The browser's version as the driver reports it (e.g. ``156.0.8078.114``)."""
    caps = driver.capabilities
    found = caps.get("browserVersion") or caps.get("version")
    if found:
        return str(found)
    out = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True,
                         check=False).stdout
    match = re.search(r"\d+(\.\d+)+", out)
    return match.group(0) if match else "unknown"


def wait_for(what: str, check: Any, seconds: float = 30, every: float = 0.05) -> Any:
    """``check()``'s first truthy answer, asked every ``every`` s; ``TimeoutError`` naming
    ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError(f"waited {seconds}s for {what}")
