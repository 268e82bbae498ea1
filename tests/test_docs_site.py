"""The built docs site reads offline: formulas typeset in a real browser, navigation on every page.

Run by ``make docs-test`` after ``make docs`` (``.ci/run`` does both). The pages are opened from
disk (``file://``) in headless Chromium, which has no network to reach a CDN: a formula is typeset
only by the MathJax copy the site serves itself. Without a build (``docs/_build/html``) or a
Chromium binary the tests skip and say why (and so they do in a plain ``make test`` when the build
is older than ``docs/conf.py``, ``docs/index.md``, ``docs/_static`` or ``docs/_templates``), unless
``PYMC_DP_DOCS_SITE_REQUIRED=1`` (set by ``make docs-test``), which turns a missing build or browser
into a failure.

The checks are exact (counts of typeset formulas, links and remote references); no statistics, so
no false-alarm rate. Each check has a negative control through the same code (the browser checks
through the same browser): a page whose MathJax script is missing keeps its raw TeX and is
flagged, a page without the sidebar, a page loading a CDN script and broken [source] / [docs]
links are flagged.
"""

import html
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("PYMC_DP_DOCS_HTML", ROOT / "docs" / "_build" / "html"))
REQUIRED = os.environ.get("PYMC_DP_DOCS_SITE_REQUIRED") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")

# pages opened in the browser: the math-heavy ones and a page outside the API reference
MATH_PAGES = (
    "theory.html",
    "notebooks/quickstart.html",
    "notebooks/foulds2016_private_bayesian.html",
)
NAV_PAGES = ("index.html", "user_guide.html", "theory.html", "notebooks/quickstart.html")
# the site's notebooks and top-level pages, every one of which the sidebar must reach
NAV_TARGETS = ("notebooks/quickstart.html", "user_guide.html", "theory.html", "api/index.html")
MIN_NAV_LINKS = 10

_RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{")
_REMOTE = re.compile(r"""<(?:script|link|img)\b[^>]*?\b(?:src|href)=["'](?:https?:)?//""", re.I)


def _need(condition, reason):
    """Skip with ``reason`` when ``condition`` fails, or fail when the site is required."""
    if condition:
        return
    if REQUIRED:
        pytest.fail(f"{reason} (PYMC_DP_DOCS_SITE_REQUIRED=1)")
    pytest.skip(reason)


def _browser():
    path = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    _need(path is not None, "no headless browser: install Debian's chromium package")
    return path


def _site():
    index = SITE / "index.html"
    _need(index.is_file(), f"no built site at {SITE}: run `make docs` first")
    if not REQUIRED:  # in a plain `make test`, an old build says nothing about the sources
        sources = [ROOT / "docs" / "conf.py", ROOT / "docs" / "index.md"]
        sources += [p for d in ("_static", "_templates") for p in (ROOT / "docs" / d).rglob("*")]
        newest = max(p.stat().st_mtime for p in sources if p.is_file())
        if index.stat().st_mtime < newest:
            pytest.skip(f"the site at {SITE} is older than docs/: run `make docs` first")
    return SITE


def _dump_dom(browser, page, profile):
    """The page's DOM after its scripts ran (MathJax included), from headless Chromium."""
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        Path(page).resolve().as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{browser} failed on {page}: {done.stderr[-2000:]}"
    assert "<html" in done.stdout, f"{browser} returned no DOM for {page}"
    return done.stdout


class _Page(HTMLParser):
    """What a reader sees: the text outside scripts, code and typeset math; math and nav counts."""

    SKIP = frozenset({"script", "style", "pre", "code", "textarea", "mjx-container"})

    def __init__(self):
        super().__init__()
        self.text = []
        self.typeset = 0
        self.errors = 0
        self.math_spans = 0
        self.nav_links = []
        self.logs = 0
        self.folded_logs = 0
        self._skip = 0
        self._nav = 0
        self._fold = 0
        self._stack = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        flags = (
            tag in self.SKIP,
            tag == "nav" and "bd-docs-nav" in classes,
            tag == "details" and "pymc-dp-log" in classes,
        )
        self._stack.append((tag, flags))
        self._skip += flags[0]
        self._nav += flags[1]
        self._fold += flags[2]
        if tag == "div" and {"output", "stderr"} <= set(classes):
            self.logs += 1
            self.folded_logs += self._fold > 0
        self.typeset += tag == "mjx-container"
        self.errors += tag == "mjx-merror"
        self.math_spans += "math" in classes and "nohighlight" in classes
        if self._nav and tag == "a" and attrs.get("href"):
            self.nav_links.append(attrs["href"])

    def handle_endtag(self, tag):
        if all(name != tag for name, _ in self._stack):
            return  # a stray end tag closes nothing
        while self._stack:
            name, (skip, nav, fold) = self._stack.pop()
            self._skip -= skip
            self._nav -= nav
            self._fold -= fold
            if name == tag:
                break

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)

    def raw_tex(self):
        """Snippets of visible text that still hold TeX delimiters."""
        text = "".join(self.text)
        return [text[max(m.start() - 30, 0) : m.end() + 30] for m in _RAW_TEX.finditer(text)]


def _parse(dom):
    page = _Page()
    page.feed(dom)
    page.close()
    return page


def _math_problems(page):
    """Why a rendered page's formulas are not all typeset (empty when they are)."""
    problems = []
    if page.math_spans == 0:
        problems.append("no math on the page")
    if page.typeset < page.math_spans:
        problems.append(f"{page.typeset} typeset formulas for {page.math_spans} math elements")
    if page.errors:
        problems.append(f"{page.errors} MathJax errors")
    if raw := page.raw_tex():
        problems.append(f"raw TeX in the text: {raw[:3]}")
    return problems


def _nav_problems(page, site_page):
    """Why a rendered page has no usable site navigation (empty when it has)."""
    if len(page.nav_links) < MIN_NAV_LINKS:
        return [f"{len(page.nav_links)} sidebar links, fewer than {MIN_NAV_LINKS}"]
    base = Path(site_page).parent
    reached = {
        (base / href.split("#")[0]).resolve() for href in page.nav_links if not href.startswith("#")
    }
    reached.add(Path(site_page).resolve())
    missing = [t for t in NAV_TARGETS if (SITE / t).resolve() not in reached]
    return [f"sidebar does not reach {missing}"] if missing else []


def _first_nav_target(page, site_page):
    href = page.nav_links[0].split("#")[0]  # "#" alone: the page itself
    return (Path(site_page).parent / href).resolve() if href else Path(site_page).resolve()


@pytest.mark.parametrize("name", MATH_PAGES)
def test_formulas_are_typeset_offline(name, tmp_path):
    """Every math element of the page is a MathJax container; no raw TeX, no MathJax error."""
    site, browser = _site(), _browser()
    page = _parse(_dump_dom(browser, site / name, tmp_path / "profile"))
    assert _math_problems(page) == [], name


@pytest.mark.parametrize("name", NAV_PAGES)
def test_every_page_has_navigation(name, tmp_path):
    """The sidebar of a rendered page links the whole site, the quickstart first."""
    site, browser = _site(), _browser()
    page = _parse(_dump_dom(browser, site / name, tmp_path / "profile"))
    assert _nav_problems(page, site / name) == [], name
    assert _first_nav_target(page, site / name) == (site / "notebooks/quickstart.html").resolve()


def test_controls_are_flagged(tmp_path):
    """Negative controls, same browser and checks: missing MathJax leaves raw TeX; no sidebar."""
    site, browser = _site(), _browser()
    source = (site / "theory.html").read_text(encoding="utf-8")
    assert "_static/mathjax/tex-chtml.js" in source
    # the same page with its MathJax script gone (what a CDN script is with no network)
    broken = site / "_w_no_mathjax_control.html"
    stripped = source.replace("_static/mathjax/tex-chtml.js", "_static/mathjax/missing.js")
    no_nav = re.sub(r'<nav class="bd-docs-nav.*?</nav>', "", source, flags=re.S)
    nav_less = site / "_w_no_nav_control.html"
    try:
        broken.write_text(stripped, encoding="utf-8")
        nav_less.write_text(no_nav, encoding="utf-8")
        page = _parse(_dump_dom(browser, broken, tmp_path / "p1"))
        flagged = _math_problems(page)
        assert any("typeset formulas" in p for p in flagged), flagged
        assert any("raw TeX" in p for p in flagged), flagged
        page = _parse(_dump_dom(browser, nav_less, tmp_path / "p2"))
        assert _math_problems(page) == []  # the control differs only in its navigation
        assert _nav_problems(page, nav_less) != []
    finally:
        broken.unlink(missing_ok=True)
        nav_less.unlink(missing_ok=True)


def _remote_loads(pages, site):
    """{page: the start of its first tag that loads a script, stylesheet or image remotely}."""
    found = {str(p.relative_to(site)): _REMOTE.search(p.read_text("utf-8")) for p in pages}
    return {name: m.group(0) for name, m in found.items() if m}


def _without_nav(pages, site):
    return [
        str(p.relative_to(site)) for p in pages if 'class="bd-docs-nav' not in p.read_text("utf-8")
    ]


def test_pages_load_nothing_remote():
    """No built page loads a script, stylesheet or image from another host; all have a sidebar."""
    site = _site()
    pages = [p for p in sorted(site.rglob("*.html")) if "_static" not in p.parts]
    assert _remote_loads(pages, site) == {}
    assert _without_nav(pages, site) == []
    # negative control, same checks: a page loading the CDN script the site used to load, with
    # no sidebar
    control = site / "_w_remote_control.html"
    tag = '<script defer src="https://cdn.example.org/mathjax/tex-chtml.js">'
    try:
        control.write_text(f"<html><head>{tag}</script></head><body></body></html>", "utf-8")
        assert list(_remote_loads([control], site)) == [control.name]
        assert _without_nav([control], site) == [control.name]
    finally:
        control.unlink(missing_ok=True)


_IDS = re.compile(r'\bid="([^"]+)"')
_SOURCE_LINK = re.compile(r'href="([^"#]*_modules/[^"]*)"')  # an API page's [source] link
_DOCS_LINK = re.compile(r'href="([^"]+)"[^>]*>\[docs\]')  # a source page's [docs] back-link


LOG_PAGE = "notebooks/quickstart.html"


def test_sampler_logs_are_folded(tmp_path):
    """Every stderr output (a sampler's log) of a notebook is folded into a <details> box."""
    site, browser = _site(), _browser()
    page = _parse(_dump_dom(browser, site / LOG_PAGE, tmp_path / "p1"))
    assert page.logs > 0 and page.folded_logs == page.logs, (page.logs, page.folded_logs)
    # negative control: the same page without the folding script leaves its logs open
    control = (site / LOG_PAGE).with_name("_w_no_fold_control.html")
    source = (site / LOG_PAGE).read_text("utf-8")
    assert "collapse-logs.js" in source
    try:
        control.write_text(source.replace("collapse-logs.js", "missing.js"), encoding="utf-8")
        page = _parse(_dump_dom(browser, control, tmp_path / "p2"))
        assert page.logs > 0 and page.folded_logs == 0, (page.logs, page.folded_logs)
    finally:
        control.unlink(missing_ok=True)


def _broken_links(pages, pattern, site):
    """Links (page, href) matched by ``pattern`` whose page or anchor does not exist."""
    ids, broken = {}, []
    for page in pages:
        for href in pattern.findall(page.read_text("utf-8")):
            path, _, frag = href.partition("#")
            target = (page.parent / path).resolve()
            if target not in ids:
                text = target.read_text("utf-8") if target.is_file() else None
                ids[target] = None if text is None else set(_IDS.findall(text))
            if ids[target] is None or (frag and html.unescape(frag) not in ids[target]):
                broken.append((str(page.relative_to(site)), href))
    return broken


def test_source_and_docs_links_resolve():
    """Every [source] link and every [docs] back-link lands on an anchor that exists."""
    site = _site()
    modules = sorted((site / "_modules").rglob("*.html"))
    api = sorted((site / "api").rglob("*.html"))
    assert modules and api
    assert _broken_links(modules, _DOCS_LINK, site) == []
    assert _broken_links(api, _SOURCE_LINK, site) == []
    # negative controls: a back-link to an anchor that is not there (the old viewcode output),
    # a [source] link to a module page that is not there
    page = site / "_w_broken_link_control.html"
    try:
        page.write_text(
            '<a href="index.html#pymc_dp.no_such_name">[docs]</a>'
            '<a href="_modules/pymc_dp/no_such_module.html#f">[source]</a>',
            encoding="utf-8",
        )
        assert _broken_links([page], _DOCS_LINK, site) == [
            (page.name, "index.html#pymc_dp.no_such_name")
        ]
        assert _broken_links([page], _SOURCE_LINK, site) == [
            (page.name, "_modules/pymc_dp/no_such_module.html#f")
        ]
    finally:
        page.unlink(missing_ok=True)
