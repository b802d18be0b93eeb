"""The site test needs a built book (`make book`), so it runs only when asked for by path.

`make test-book` builds the site and then runs `pytest tests/book`; a plain `pytest tests`
(`make test`) leaves this directory out instead of failing on a site that was never built.
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from built_site import CHROMIUM, CHROMIUM_ARGS, SITE

HERE = Path(__file__).resolve().parent


def _named_on_command_line(config: pytest.Config) -> bool:
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if HERE in collection_path.parents and not _named_on_command_line(config):
        return True
    return None


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib signature)
        pass


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    """The built site, served on 127.0.0.1."""
    if not (SITE / "index.html").is_file():
        pytest.fail(f"no built site at {SITE}: run `make test-book` (it builds the book first)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: a free port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Debian Chromium, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium package")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
