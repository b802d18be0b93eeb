import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
import book_outputs  # noqa: E402  (tools/book_outputs.py)

# Keep pytest away from build outputs and the environment (the book build writes executed
# copies of every notebook under book/_build).
collect_ignore_glob = [".venv/*", "book/_build/*", "build/*", "node_modules/*"]


def pytest_configure(config) -> None:
    """With nbval, each book notebook whose cells all pass is kept as the book's executed copy
    (tools/book_outputs.py), so `make book` after `make test` does not execute it again."""
    if config.getoption("nbval", default=False):
        config.pluginmanager.register(book_outputs.NbvalRecorder(), "book_outputs")


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `long` first: on several workers (`make test`) they then overlap the rest
    instead of running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
