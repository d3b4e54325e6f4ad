"""A page opened in headless Chromium through the DevTools protocol (websocket-client),
as a user's browser shows it: its DOM after the scripts ran for ``wait`` seconds of real
time (Material's search runs in a web worker, which ``--virtual-time-budget`` does not
advance) and every error it reported: uncaught exceptions, ``console.error`` and resources
that failed to load (a missing figure, a font fetched from the network)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field

import pytest

#: headless, as root in a container, without a GPU or a large /dev/shm
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
#: Chromium 111 and later refuse a DevTools websocket whose request carries an Origin header
#: unless its origin is allowed (Debian's 150 answers 403 Forbidden); websocket-client sends
#: one by default. Both sides are set: the flag allows it, ``suppress_origin`` drops it.
DEVTOOLS_FLAGS = ["--remote-allow-origins=*"]


def chromium() -> str:
    """The path of the machine's Chromium; a skip without one, a failure in CI (``CI`` set),
    where ``.ci/run`` installs Debian's package."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    if os.environ.get("CI"):
        pytest.fail("Chromium is missing; .ci/run installs Debian's chromium package")
    pytest.skip("no Chromium on this machine (CI installs Debian's)")


def headless(*args: str, timeout: float = 120) -> str:
    """Run Chromium headless with ``args`` (``--dump-dom URL``, ``--screenshot=...``) and
    return its standard output."""
    return subprocess.run(
        [chromium(), *FLAGS, *args], capture_output=True, text=True, timeout=timeout, check=True
    ).stdout


@dataclass
class Page:
    dom: str
    errors: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _error(message: dict) -> str | None:
    """The text of an error event, or None for any other message."""
    method, params = message.get("method"), message.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        return details.get("exception", {}).get("description") or details.get("text")
    if method == "Runtime.consoleAPICalled" and params.get("type") == "error":
        return " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
    if method == "Log.entryAdded" and params["entry"]["level"] == "error":
        return f"{params['entry']['text']} ({params['entry'].get('url', '')})"
    return None


def open_page(browser: str, url: str, wait: float = 3.0) -> Page:
    """Load ``url``, let it run ``wait`` seconds, return its DOM and the errors it reported."""
    import websocket

    port = _free_port()
    proc = subprocess.Popen(
        [browser, *FLAGS, *DEVTOOLS_FLAGS, f"--remote-debugging-port={port}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json") as r:
                    targets = json.load(r)
                break
            except OSError as err:
                if time.monotonic() > deadline:
                    pytest.fail(f"{browser} opened no DevTools port in 30 s: {err}")
                time.sleep(0.1)
        target = next(t for t in targets if t["type"] == "page")
        try:
            ws = websocket.create_connection(
                target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True
            )
        except (OSError, websocket.WebSocketException) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            pytest.fail(f"{browser} cannot be driven over DevTools: {first}")
        errors: list[str] = []
        ids = iter(range(1, 1 << 30))

        def call(method: str, **params) -> dict:
            i = next(ids)
            ws.send(json.dumps({"id": i, "method": method, "params": params}))
            while True:
                message = json.loads(ws.recv())
                if (text := _error(message)) is not None:
                    errors.append(text)
                if message.get("id") == i:
                    return message.get("result", {})

        for domain in ("Runtime", "Log", "Page"):
            call(f"{domain}.enable")
        call("Page.navigate", url=url)
        end = time.monotonic() + wait
        ws.settimeout(0.2)
        while time.monotonic() < end:
            try:
                message = json.loads(ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if (text := _error(message)) is not None:
                errors.append(text)
        ws.settimeout(30)
        dom = call("Runtime.evaluate", expression="document.documentElement.outerHTML")
        ws.close()
        return Page(dom["result"]["value"], errors)
    finally:
        proc.kill()
        proc.wait()
