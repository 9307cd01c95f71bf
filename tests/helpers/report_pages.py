"""What the report tests share: an HTML parser of a report page, and loading a page in headless
Chromium (where installed) with its console checked."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path


class Page(HTMLParser):
    """The parts of a report a test reads: img sources, link targets, tables by id (rows of
    cell texts, and each row's attributes), the body's attributes, section ids in order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.srcs, self.hrefs, self.sections = [], [], []
        self.tables: dict[str, list[list[str]]] = {}
        self.row_attrs: dict[str, list[dict[str, str]]] = {}
        self.body: dict[str, str] = {}
        self.csp = ""
        self._table = self._cell = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "src" in a:
            self.srcs.append(a["src"])
        if "href" in a:
            self.hrefs.append(a["href"])
        if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy":
            self.csp = a["content"]
        if tag == "body":
            self.body = a
        elif tag == "section":
            self.sections.append(a.get("id", ""))
        elif tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table], self.row_attrs[self._table] = [], []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
            self.row_attrs[self._table].append(a)
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def chromium() -> str | None:
    """The Chromium binary, or None where none is installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return found or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def load_in_chromium(path: Path, profile_dir: Path, window: str = "") -> str:
    """The DOM of `path` after headless Chromium ran its scripts (in a `window` of "W,H" pixels
    when given); fails the test on a non-zero exit, a console message (errors, CSP violations)
    or an uncaught exception."""
    proc = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         f"--user-data-dir={profile_dir}", "--enable-logging=stderr", "--v=0",
         *([f"--window-size={window}"] if window else []),
         "--dump-dom", path.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Console messages are logged as `...:INFO:CONSOLE:<line>] "message", source: ...`
    # (older: `CONSOLE(<line>)`).
    console = [ln for ln in proc.stderr.splitlines() if re.search(r":CONSOLE[(:]", ln)]
    assert not console and "Uncaught" not in proc.stderr, console
    return proc.stdout
