"""Check the built documentation site (`make docs` runs it after `mkdocs build`).

1. Every page's text, outside code and typeset maths, holds no raw reStructuredText: no Sphinx role
   (`:func:`, `:class:`, `:mod:`...), no field list (`:param x:`), no double backticks, no
   paragraph ending in `::` (a literal block left unconverted), and no TeX delimiters (`\\(`,
   `\\[`, `$$`) outside the elements that `pymdownx.arithmatex` marks for KaTeX.
2. In headless Chromium (Debian's `chromium` and `chromium-driver`, driven by Selenium; skipped
   with a note where they are missing, unless `--browser` demands them): every page with maths is
   opened and each formula must be typeset by KaTeX, without error; then a query is typed into the
   search box (mkdocs-material's lunr index, in a web worker) and results must appear. The site
   is served on 127.0.0.1 only; the browser runs with its background networking off.

Exit status 1, with one line per problem, when a check fails.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

#: Sphinx roles and field-list markers, as text (outside code) shows them unrendered.
ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|math|ref|const|term):")
FIELD = re.compile(r"(?:^|\n)\s*:(?:param|parameter|arg|type|returns?|rtype|raises?|yields?)\b")
#: TeX delimiters that only typeset maths may hold.
TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")
#: Elements whose text is not prose: code, scripts, and the maths KaTeX typesets.
VERBATIM = {"pre", "code", "script", "style", "textarea"}
#: The search check: a query typed into the search box, and a page its results must include.
QUERY = "mahalanobis"
EXPECTED = "concepts/"
#: Seconds to wait for the maths to be typeset and for search results.
WAIT = 30.0


class Page(HTMLParser):
    """The prose of one page, its paragraphs, and how many formulas arithmatex marked."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.prose: list[tuple[int, str]] = []
        self.paragraphs: list[tuple[int, str]] = []
        self.formulas = 0
        self._stack: list[tuple[str, bool]] = []
        self._paragraph: list[str] | None = None

    def _skipping(self) -> bool:
        return any(skip for _, skip in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        math = "arithmatex" in classes
        self.formulas += math
        if tag in {"br", "img", "hr", "input", "meta", "link", "wbr"}:
            return
        self._stack.append((tag, tag in VERBATIM or math))
        if tag == "p":
            self._paragraph = []

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            open_tag, _ = self._stack.pop()
            if open_tag == tag:
                break
        if tag == "p" and self._paragraph is not None:
            self.paragraphs.append((self.getpos()[0], "".join(self._paragraph)))
            self._paragraph = None

    def handle_data(self, data: str) -> None:
        if self._paragraph is not None:
            self._paragraph.append(data)
        if not self._skipping():
            self.prose.append((self.getpos()[0], data))


def scan(path: Path) -> tuple[list[str], int]:
    """The raw reST and stray TeX on page `path`, one line each, and its number of formulas."""
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    problems = []
    for line, text in page.prose:
        for pattern, what in (
            (ROLE, "a Sphinx role"),
            (FIELD, "a reST field list"),
            (re.compile("``"), "double backticks"),
            (TEX, "TeX outside typeset maths"),
        ):
            found = pattern.search(text)
            if found:
                snippet = text.strip().replace("\n", " ")[:80]
                problems.append(f"{path}:{line}: {what} ({found.group().strip()!r}): {snippet}")
    for line, text in page.paragraphs:
        if text.rstrip().endswith("::"):
            tail = text.strip().replace("\n", " ")[-80:]
            problems.append(
                f"{path}:{line}: a paragraph ending in '::' (a reST literal block): {tail}"
            )
    return problems, page.formulas


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve `site` on 127.0.0.1 (a free port) while the block runs; yields its address."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def browser_available() -> bool:
    """Whether Chromium, its driver and Selenium are all here."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return False
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


@contextmanager
def chromium(profile: Path) -> Iterator[object]:
    """Headless Chromium driven by Selenium, with Debian's driver (nothing is downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(executable_path=shutil.which("chromedriver")), options=options
    )
    try:
        yield driver
    finally:
        driver.quit()


def _poll(condition, timeout: float = WAIT):  # noqa: ANN001, ANN202
    """`condition()` once it is truthy, or its last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


#: In the page: the formulas arithmatex marked that KaTeX left untypeset, and KaTeX's errors.
UNTYPESET = """return [
  Array.from(document.querySelectorAll('.arithmatex'))
    .filter(e => !e.querySelector('.katex')).map(e => e.textContent.slice(0, 60)),
  Array.from(document.querySelectorAll('.katex-error')).map(e => e.textContent.slice(0, 60)),
  document.querySelectorAll('.arithmatex .katex').length];"""


def check_maths(driver, base: str, pages: list[str], shots: Path | None) -> list[str]:  # noqa: ANN001
    """Open each page with maths; every formula must be typeset by KaTeX, none in error."""
    problems = []
    for page in pages:
        driver.get(base + page)
        state = _poll(lambda: (s := driver.execute_script(UNTYPESET)) and not s[0] and s)
        untypeset, errors, typeset = state or driver.execute_script(UNTYPESET)
        problems += [f"{page}: formula not typeset: {text!r}" for text in untypeset]
        problems += [f"{page}: KaTeX error: {text!r}" for text in errors]
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(
                str(shots / (page.strip("/").replace("/", "_") or "index")) + ".png"
            )
        print(f"  {page}: {typeset} formulas typeset")
    return problems


def check_search(driver, base: str) -> list[str]:  # noqa: ANN001
    """Type `QUERY` into the search box of the home page; results, one on `EXPECTED`, appear."""
    from selenium.webdriver.common.by import By

    driver.get(base)
    box = driver.find_element(By.CSS_SELECTOR, "input[data-md-component=search-query]")
    _poll(lambda: box.get_attribute("placeholder") and box.is_enabled())
    box.click()
    box.send_keys(QUERY)
    links = _poll(
        lambda: [
            a.get_attribute("href")
            for a in driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
        ]
    )
    if not links:
        return [f"search: no results for {QUERY!r} typed into the search box"]
    print(f"  search {QUERY!r}: {len(links)} results")
    if not any(EXPECTED in link for link in links):
        return [f"search: no result for {QUERY!r} on {EXPECTED} among {links}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, nargs="?", default=Path("site"))
    browser = parser.add_mutually_exclusive_group()
    browser.add_argument("--browser", action="store_true", help="fail if Chromium is missing")
    browser.add_argument("--no-browser", action="store_true", help="skip the browser checks")
    parser.add_argument("--screenshots", type=Path, help="save each page with maths here")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"{args.site}: no built site (index.html) to check", file=sys.stderr)
        return 2
    problems: list[str] = []
    maths: list[str] = []
    pages = sorted(args.site.rglob("*.html"))
    for path in pages:
        found, formulas = scan(path)
        problems += found
        if formulas:
            maths.append(path.relative_to(args.site).as_posix().removesuffix("index.html"))
    print(f"{len(pages)} pages scanned for raw reST and stray TeX; {len(maths)} hold maths")
    if args.no_browser:
        pass
    elif browser_available():
        with (
            serve(args.site) as base,
            tempfile.TemporaryDirectory() as profile,
            chromium(Path(profile)) as driver,
        ):
            problems += check_maths(driver, base, maths, args.screenshots)
            problems += check_search(driver, base)
    elif args.browser:
        problems.append(
            "chromium, chromedriver or selenium missing (apt-get install chromium-driver)"
        )
    else:
        print("note: chromium, chromedriver or selenium missing; maths and search not checked")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
