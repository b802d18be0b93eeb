"""The site test needs a built book (`make book`), so it runs only when asked for by path.

`make test-book` builds the site and then runs `pytest tests/book`; a plain `pytest tests`
(`make test`) leaves this directory out instead of failing on a site that was never built.
"""
from __future__ import annotations

from pathlib import Path

import pytest

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
