"""What tests share beyond fixtures: the rule for tests that need root and binaries, and scenario
pieces more than one kind of test runs (``ATP_CHAIN_TOPOLOGY``).

Outside CI such a test skips with the reason; under CI (``CI=true``, which
runs as root on a machine the bootstrap prepared) a missing requirement FAILS
it, so an emulation or packet test can never be silently skipped there. bmv2
cases skip with the reason where bmv2 and p4c are absent, and fail instead
when ``INATB_REQUIRE_BMV2=1`` (``.ci/run`` sets it once it has put the p4
toolchain on PATH).
"""

import contextlib
import importlib.util
import os
import shutil
import signal

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: Four workers under two ToRs that reach their PS through two more switches (t1, t2 -> a1 -> c1 -> p1):
#: ATP's two levels skip a1, ``levels: all`` aggregates there (the policy's unit test and the emulation test).
ATP_CHAIN_TOPOLOGY = """topology:
  kind: explicit
  link_rate: 100Gbps
  switches: [t1, t2, a1, c1]
  hosts: [w1, w2, w3, w4, p1]
  links: [[w1, t1], [w2, t1], [w3, t2], [w4, t2], [t1, a1], [t2, a1], [a1, c1], [p1, c1]]
"""


def sigint_at_its_default():
    """``preexec_fn`` of a command a test will Ctrl-C: SIGINT at its default, as a command started from a
    terminal has it. A shell without job control starts a background command (``.ci/run &``) with SIGINT
    ignored, its children inherit that, and Python then raises no KeyboardInterrupt for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def require_emulation(*binaries):
    """Skip (or, under CI, fail) unless running as root with every binary present."""
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root")
    problems += [f"{b} not found" for b in binaries if shutil.which(b) is None]
    if problems:
        reason = "emulation test: " + ", ".join(problems)
        if IN_CI:
            pytest.fail(reason + " (CI must run emulation tests)")
        pytest.skip(reason)


BMV2_SKIP_REASON = "bmv2 (simple_switch) and p4c not found"


def bmv2_available():
    return shutil.which("simple_switch") is not None and shutil.which("p4c") is not None


def skip_bmv2_case(reason=BMV2_SKIP_REASON):
    """Skip a case that needs bmv2 or p4c, or fail it when ``INATB_REQUIRE_BMV2=1`` (set by .ci/run
    once it put the toolchain on PATH: there a bmv2 case that cannot run is a failure)."""
    if os.environ.get("INATB_REQUIRE_BMV2") == "1":
        pytest.fail(f"{reason} (INATB_REQUIRE_BMV2=1: the bmv2 cases must run)")
    pytest.skip(reason)


def require_bmv2():
    if not bmv2_available():
        skip_bmv2_case()


def require_browser():
    """Headless Chromium and its WebDriver (Debian's chromium, chromium-driver; ``bootstrap.sh --test``
    installs them), and Selenium (the [test] extra): skip without them, fail under CI."""
    problems = [f"{b} not found" for b in ("chromium", "chromedriver") if shutil.which(b) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        problems.append("selenium not installed")
    if problems:
        reason = "browser test: " + ", ".join(problems)
        if IN_CI:
            pytest.fail(reason + " (CI must load the HTML reports in Chromium)")
        pytest.skip(reason)


@contextlib.contextmanager
def chromium(path, window=(1280, 800)):
    """A headless Chromium WebDriver with the local HTML file ``path`` loaded in a ``window`` (width, height) of
    CSS pixels; quit on leaving."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size={},{}".format(*window), "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(f"file://{os.path.abspath(path)}")
        yield driver
    finally:
        driver.quit()


def open_in_chromium(path):
    """Load a local HTML file in headless Chromium; (severe console messages, one dict per <img>:
    alt, complete, naturalWidth)."""
    with chromium(path) as driver:
        images = driver.execute_script(
            "return Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, "
            "naturalWidth: i.naturalWidth}));")
        severe = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        return severe, images


def tops_in_chromium(path, selectors, window=(1280, 800)) -> dict:
    """Where the first element of each CSS selector starts on the page loaded in a ``window``: its bounding
    box's top, in CSS pixels from the top of the window before any scrolling (None: no such element), and the
    window's inner height under ``"window"``."""
    with chromium(path, window) as driver:
        return driver.execute_script(
            "const tops = {window: window.innerHeight};"
            "for (const s of arguments[0]) { const e = document.querySelector(s);"
            "  tops[s] = e ? e.getBoundingClientRect().top : null; }"
            "return tops;", list(selectors))


def require_torch():
    """PyTorch (the [training] extra, which [test] includes): skip without it, fail under CI."""
    if importlib.util.find_spec("torch") is None:
        reason = "training test: torch not installed (pip install -e '.[training]')"
        if IN_CI:
            pytest.fail(reason + " (CI must train: [test] includes [training])")
        pytest.skip(reason)
