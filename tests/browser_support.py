"""A real browser for the status page's tests: Debian's headless Chromium driven through the
DevTools protocol over a pipe (``--remote-debugging-pipe``: JSON messages ended by a NUL byte on
file descriptors 3 and 4; no websocket, no driver, no browser download), so a test keeps one page
open and watches its own script redraw it; plus a small reader of the DOM it gives back (elements
with their attributes and text, by the standard library's HTML parser).

    with Browser() as browser:
        page = browser.open(url)
        page.wait_for("document.body.dataset.updates >= 1")
        root = parse(page.html())
        page.screenshot(path)

The page's uncaught script errors are collected (``Page.errors``) so a test can assert there are
none. Every wait is bounded; the browser is stopped by its pid.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from html.parser import HTMLParser

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
SKIP_REASON = "no chromium on the PATH (Debian: apt-get install -y chromium; .ci/run installs it)"
COMMAND_TIMEOUT_S = 30
# headless; no first-run work, no network of its own, no GPU, no sandbox (root in a container)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-breakpad", "--disable-crash-reporter", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe"]


class BrowserError(AssertionError):
    pass


def _above_9(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Browser:
    """A headless Chromium process; ``open`` gives pages to drive."""

    def __init__(self, chromium: str | None = None):
        self.chromium = chromium or CHROMIUM
        if self.chromium is None:
            raise BrowserError(SKIP_REASON)
        self.proc: subprocess.Popen | None = None
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self._events: list[dict] = []
        self._cond = threading.Condition()
        self._closed = False
        self._profile = None

    def start(self) -> "Browser":
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the child's ends above 9, so that the shell's redirections to 3 and 4 cannot close one of them
        to_browser_r, from_browser_w = (_above_9(fd) for fd in (to_browser_r, from_browser_w))
        # the browser reads commands on fd 3 and writes replies on fd 4: bash puts the pipe ends there
        wrapper = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-'
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(["bash", "-c", wrapper, self.chromium, *FLAGS,
                                      f"--user-data-dir={self._profile.name}", "about:blank"],
                                     pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._reader = threading.Thread(target=self._read, daemon=True, name="chromium-pipe")
        self._reader.start()
        self.call("Browser.getVersion")            # the pipe answers: the browser is up
        return self

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._cond:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self._events.append(message)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = COMMAND_TIMEOUT_S) -> dict:
        with self._cond:
            self._next_id += 1
            call_id = self._next_id
        message = {"id": call_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while call_id not in self._replies:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise BrowserError(f"chromium gave no answer to {method} within {timeout} s "
                                       f"(exit code {self.proc.poll()}):\n{self.stderr_text()}")
                self._cond.wait(left)
            reply = self._replies.pop(call_id)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def events(self, method: str, session: str | None = None) -> list[dict]:
        with self._cond:
            return [e["params"] for e in self._events
                    if e.get("method") == method and (session is None or e.get("sessionId") == session)]

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-3000:]

    def open(self, url: str, width: int = 1280, height: int = 900) -> "Page":
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.call("Runtime.enable")
        page.call("Page.enable")
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.navigate(url)
        return page

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", timeout=5)
                except BrowserError:
                    pass
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.stderr.close()
            self._profile.cleanup()
            self.proc = None

    def __enter__(self) -> "Browser":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class Page:
    """One tab, attached through a flat session."""

    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session

    def call(self, method: str, params: dict | None = None, timeout: float = COMMAND_TIMEOUT_S) -> dict:
        return self.browser.call(method, params, self.session, timeout)

    def navigate(self, url: str) -> None:
        reply = self.call("Page.navigate", {"url": url})
        if reply.get("errorText"):
            raise BrowserError(f"cannot load {url}: {reply['errorText']}")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-able), awaited if a promise."""
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails'].get('exception', {}).get('description')}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15, what: str | None = None):
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        failure = None
        while True:
            try:                        # (the document may not be there yet)
                value, failure = self.evaluate(expression), None
            except BrowserError as e:
                value, failure = None, e
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout} s waiting for {what or expression}"
                                   f"{f' ({failure})' if failure else ''}; page errors: {self.errors()}")
            time.sleep(0.1)

    def html(self) -> str:
        return self.evaluate("document.documentElement.outerHTML")

    def errors(self) -> list[str]:
        """The page's uncaught script errors so far."""
        return [e["exceptionDetails"].get("exception", {}).get("description") or e["exceptionDetails"].get("text")
                for e in self.browser.events("Runtime.exceptionThrown", self.session)]

    def screenshot(self, path: str) -> str:
        """A PNG of the whole page (not only the window) at ``path``."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
        path = os.path.abspath(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path


class Element:
    def __init__(self, tag: str, attrs: dict, parent: "Element | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.text_parts: list[str] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(self.text_parts + [c.text() for c in self.children])

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list["Element"]:
        """Descendants (self included) with that tag, class and attribute values (``data_x`` for
        ``data-x``)."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.iter()
                if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)
                and all(e.attrs.get(k) == v for k, v in want.items())]

    def find(self, *args, **kwargs) -> "Element":
        found = self.find_all(*args, **kwargs)
        if not found:
            raise AssertionError(f"no element {args} {kwargs}")
        return found[0]


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Builder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(el)
        if tag not in _VOID:
            self.current = el

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        el = self.current
        while el is not None and el.tag != tag:
            el = el.parent
        if el is not None and el.parent is not None:
            self.current = el.parent

    def handle_data(self, data):
        self.current.text_parts.append(data)


def parse(html: str) -> Element:
    b = _Builder()
    b.feed(html)
    b.close()
    return b.root
