"""The built book, opened page by page in a real browser (headless Debian Chromium via Playwright).

Run by `make test-book`, which first builds the site (`make book`). Every HTML page of
book/_build/html is served on 127.0.0.1 and loaded; a page fails on a JavaScript error, a failed
or outside-the-site request, a broken image, raw TeX left after MathJax ran, an internal link to a
file (or anchor) that does not exist, a markdown table left as pipe-and-dash text, a code cell with
more than MAX_OUTPUTS output boxes, an error traceback or a stderr output (warnings) in a cell not
tagged as showing one on purpose, or a notebook page without outputs. The site-wide checks:
search returns results, the prev/next navigation follows _toc.yml in learning order, and a
screenshot of the landing page and of one lesson page goes to test-artifacts/.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from built_site import ARTIFACTS, ROOT, SETTLE_JS, SITE

# The parts of the book in learning order; each caption in _toc.yml must match one of these,
# and they must appear in this order.
LEARNING_ORDER = [
    r"getting started|welcome|setup",
    r"neuroncore",
    r"gelu|track 1",
    r"layernorm|track 2",
    r"capstone",
    r"exercise",
    r"reference",
    r"troubleshoot|faq",
    r"instructor",
]
SEARCH_WORD = "PSUM"  # defined in the NeuronCore chapter and the glossary
# Raw TeX a reader would see if MathJax did not run: \( \) \[ \] $$ or an inline $...$ pair.
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|(?<![\\\w])\$[^\s$][^$\n]{0,200}?\$")
# Two cells of a markdown table's delimiter row (---|:--:) left as text: what CommonMark makes of a
# table in a markdown output (the browser's innerText may join the rows into one line).
RAW_TABLE = re.compile(r"\|[ \t]*:?-+:?[ \t]*\|[ \t]*:?-+:?[ \t]*\||:?-{3,}:?[ \t]*\|[ \t]*:?-{3,}:?")
MAX_OUTPUTS = 10  # output boxes per code cell; more is a wall (a redrawn progress bar, a print loop)
# Cell tags (myst-nb writes them as `tag_<name>` classes) that show an error or a warning on purpose.
SHOWS_ERROR = {"raises-exception"}
SHOWS_WARNING = {"raises-exception", "shows-warning"}


def site_pages() -> list[str]:
    """Every HTML page of the site, relative to its root (theme templates excluded)."""
    if not (SITE / "index.html").is_file():
        return []
    skip = ("_static", "_sources", "_images", ".doctrees", "jupyter_execute")
    return sorted(
        str(p.relative_to(SITE)) for p in SITE.rglob("*.html") if not set(p.relative_to(SITE).parts) & set(skip)
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "page" in metafunc.fixturenames:
        metafunc.parametrize("page", site_pages() or ["<site not built>"])


class Visit:
    """One page load with everything that went wrong while loading it."""

    def __init__(self, browser: object, base_url: str, path: str) -> None:
        self.base_url = base_url
        self.errors: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught JS error: {exc}"))
        self.page.on("console", self._console)
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url} ({r.failure})"))
        self.page.on("response", self._response)
        self.page.route("**/*", self._only_this_site)
        self.page.goto(base_url + path, wait_until="load", timeout=60_000)
        redirect = _meta_refresh_target(path)
        if redirect:  # index.html forwards to the landing page: follow it like a reader would
            self.page.wait_for_url(base_url + redirect, wait_until="load", timeout=30_000)
        self.page.evaluate(SETTLE_JS)

    def _console(self, msg: object) -> None:
        if msg.type == "error":
            self.errors.append(f"console error: {msg.text}")

    def _response(self, response: object) -> None:
        if response.status >= 400:
            self.errors.append(f"HTTP {response.status}: {response.url}")

    def _only_this_site(self, route: object) -> None:
        url = route.request.url
        if url.startswith(self.base_url) or url.startswith(("data:", "blob:", "about:")):
            route.continue_()
        else:
            self.errors.append(f"request outside the site (offline readers would not get it): {url}")
            route.abort()

    def close(self) -> None:
        self.page.close()


def _meta_refresh_target(path: str) -> str | None:
    """The page a `<meta http-equiv="refresh">` page forwards to, relative to the site root."""
    file = SITE / path.split("?")[0]
    if not file.is_file():
        return None
    m = re.search(r'http-equiv="refresh"[^>]*url=([^"]+)"', file.read_text(encoding="utf-8"), re.I)
    return str(file.parent.joinpath(m.group(1)).resolve().relative_to(SITE)) if m else None


# The article's visible prose, without code, rendered math or scripts.
_PROSE_JS = """() => {
  const main = document.querySelector('main') || document.body;
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, mjx-container, script, style, .highlight, .cell_output .output')
      .forEach(e => e.remove());
  return copy.innerText;
}"""

# The article's rendered text as a reader sees it, markdown outputs of cells included; code and
# plain-text outputs (<pre>) left out, where pipes and dollar signs are literal.
_RENDERED_JS = _PROSE_JS.replace(", .cell_output .output", "")

# Per code cell: its tags, how many output boxes it shows, its tracebacks and stderr texts.
_CELLS_JS = """() => Array.from(document.querySelectorAll('div.cell')).map((cell, index) => {
  const out = cell.querySelector(':scope > .cell_output');
  const code = cell.querySelector('.cell_input pre');
  return {
    index: index + 1,
    first_line: code ? code.innerText.split('\\n')[0].slice(0, 80) : '',
    tags: Array.from(cell.classList).filter(c => c.startsWith('tag_')).map(c => c.slice(4)),
    outputs: out ? out.children.length : 0,
    tracebacks: out ? out.querySelectorAll('.output.traceback').length : 0,
    stderr: out ? Array.from(out.querySelectorAll('.output.stderr')).map(e => e.innerText.slice(0, 200)) : [],
  };
})"""


class PageReport:
    """What the checks need from one loaded page, collected in one visit (a page loads once)."""

    def __init__(self, v: Visit) -> None:
        self.errors = list(v.errors)
        self.broken_images = v.page.evaluate(
            "() => Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)")
        self.prose = v.page.evaluate(_PROSE_JS)
        self.rendered = v.page.evaluate(_RENDERED_JS)
        self.code_cells = v.page.evaluate(_CELLS_JS)
        self.hrefs = v.page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
        self.cells, self.outputs = v.page.evaluate(
            "() => [document.querySelectorAll('div.cell').length, document.querySelectorAll('.cell_output').length]")
        self.base_url = v.base_url


_REPORTS: dict[str, PageReport] = {}


@pytest.fixture
def report(browser: object, base_url: str, page: str) -> PageReport:
    if page not in _REPORTS:
        v = Visit(browser, base_url, page)
        try:
            _REPORTS[page] = PageReport(v)
        finally:
            v.close()
    return _REPORTS[page]


# ---------------------------------------------------------------- per-page checks

def test_page_loads_without_errors(report: PageReport, page: str) -> None:
    assert not report.errors, f"{page}:\n" + "\n".join(report.errors)


def test_page_images_render(report: PageReport, page: str) -> None:
    assert not report.broken_images, f"{page}: images that did not render: {report.broken_images}"


def test_page_has_no_raw_tex(report: PageReport, page: str) -> None:
    leftovers = sorted({m.group(0) for m in RAW_TEX.finditer(report.rendered)})
    assert not leftovers, f"{page}: TeX left unrendered after MathJax ran: {leftovers[:10]}"


def test_page_has_no_raw_markdown_tables(report: PageReport, page: str) -> None:
    rows = [m.group(0).strip() for m in RAW_TABLE.finditer(report.rendered)]
    assert not rows, f"{page}: markdown tables shown as text (delimiter rows {rows[:3]})"


def test_code_cells_show_at_most_a_few_outputs(report: PageReport, page: str) -> None:
    walls = [f"cell {c['index']} ({c['first_line']!r}): {c['outputs']} outputs"
             for c in report.code_cells if c["outputs"] > MAX_OUTPUTS]
    assert not walls, f"{page}: code cells with more than {MAX_OUTPUTS} outputs: {walls}"


def test_outputs_show_no_error_or_warning_unless_meant_to(report: PageReport, page: str) -> None:
    found = []
    for c in report.code_cells:
        where = f"cell {c['index']} ({c['first_line']!r})"
        if c["tracebacks"] and not SHOWS_ERROR & set(c["tags"]):
            found.append(f"{where}: an error traceback (tag the cell raises-exception if it is on purpose)")
        if c["stderr"] and not SHOWS_WARNING & set(c["tags"]):
            found.append(f"{where}: stderr output {c['stderr'][0]!r} (tag the cell shows-warning if on purpose)")
    assert not found, f"{page}:\n" + "\n".join(found)


def test_page_internal_links_resolve(report: PageReport, page: str) -> None:
    missing = [h for h in report.hrefs
               if h.startswith(report.base_url) and not _link_target_exists(h, report.base_url)]
    assert not missing, f"{page}: internal links to missing files or anchors: {sorted(set(missing))}"


def test_notebook_page_shows_outputs(report: PageReport, page: str) -> None:
    assert report.cells == 0 or report.outputs > 0, \
        f"{page}: {report.cells} code cells but no outputs (was it executed?)"


def _link_target_exists(url: str, base_url: str) -> bool:
    parts = urlsplit(url)
    rel = unquote(parts.path)[len(urlsplit(base_url).path):]
    target = SITE / rel
    if rel == "" or rel.endswith("/"):
        target = target / "index.html"
    if not target.is_file():
        return False
    if parts.fragment.startswith("/"):  # a reveal.js slide route (the lesson decks), not an anchor
        return True
    if parts.fragment and target.suffix == ".html":
        return unquote(parts.fragment) in _anchor_ids(target)
    return True


@functools.cache
def _anchor_ids(path: Path) -> frozenset[str]:
    html = path.read_text(encoding="utf-8", errors="replace")
    return frozenset(re.findall(r'\b(?:id|name)="([^"]+)"', html))


# ---------------------------------------------------------------- site-wide checks

def test_search_finds_a_known_word(browser: object, base_url: str) -> None:
    v = Visit(browser, base_url, f"search.html?q={SEARCH_WORD}")
    try:
        v.page.wait_for_selector("#search-results ul.search li", timeout=30_000)
        hits = v.page.evaluate("() => Array.from(document.querySelectorAll('#search-results ul.search li a')).map(a => a.href)")
        assert not v.errors, "\n".join(v.errors)
    finally:
        v.close()
    assert hits, f"search for {SEARCH_WORD!r} returned nothing"
    assert all(_link_target_exists(h.split("?")[0], base_url) for h in hits), hits


def test_screenshots_of_landing_and_lesson_page(browser: object, base_url: str) -> None:
    pages = site_pages()
    lessons = [p for p in pages if re.match(r"notebooks/(0[1-9]|1\d)_", p)] or [p for p in pages if p.startswith("notebooks/")]
    assert lessons, "no lesson page in the site"
    ARTIFACTS.mkdir(exist_ok=True)
    for name, path in (("landing", "index.html"), ("lesson", lessons[0])):
        v = Visit(browser, base_url, path)
        try:
            out = ARTIFACTS / f"{name}.png"
            v.page.screenshot(path=str(out))
            assert out.stat().st_size > 10_000, f"{out} looks empty"
        finally:
            v.close()


def _toc_files() -> list[tuple[str, str]]:
    """(part caption, file) for every page of _toc.yml in order; the root has caption ''."""
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    out = [("", toc["root"])]

    def walk(caption: str, entries: list[dict]) -> None:
        for entry in entries:
            if "file" in entry:
                out.append((caption, entry["file"]))
            walk(caption, entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part["caption"], part.get("chapters", []))
    return out


def test_parts_are_in_learning_order() -> None:
    captions = [c for c in dict.fromkeys(c for c, _ in _toc_files()) if c]
    ranks = []
    for caption in captions:
        matches = [i for i, pattern in enumerate(LEARNING_ORDER) if re.search(pattern, caption, re.I)]
        assert matches, f"part {caption!r} fits nowhere in the learning order {LEARNING_ORDER}"
        ranks.append(matches[0])
    assert ranks == sorted(ranks), f"parts out of learning order: {captions}"
    numbered = [int(m.group(1)) for _, f in _toc_files() if (m := re.match(r"notebooks/(\d+)_", f))]
    assert numbered == sorted(numbered), f"lessons out of order in _toc.yml: {numbered}"


def test_next_links_walk_the_toc_in_order() -> None:
    expected = [f + ".html" for _, f in _toc_files()]
    assert (SITE / expected[0]).is_file(), f"landing page {expected[0]} was not built"
    walked, page = [], expected[0]
    while page and len(walked) <= len(expected):
        walked.append(page)
        html = (SITE / page).read_text(encoding="utf-8")
        m = re.search(r'<a[^>]*class="right-next"[^>]*href="([^"]+)"', html) or re.search(
            r'<a[^>]*href="([^"]+)"[^>]*class="right-next"', html)
        page = str((SITE / page).parent.joinpath(m.group(1)).resolve().relative_to(SITE)) if m else None
    assert walked == expected, "the 'next' links do not follow book/_toc.yml"


def test_every_page_has_a_title() -> None:
    untitled = [p for p in site_pages() if "&lt;no title&gt;" in (SITE / p).read_text(encoding="utf-8")]
    assert not untitled, f"pages without a title: {untitled}"
