"""The page's files (optimizer/server/static) without a browser: answer text never goes in as HTML, every
field has a label, and nothing inline runs (the page's Content-Security-Policy would block it)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from paths import ROOT

STATIC = ROOT / "optimizer" / "server" / "static"
FIELDS = {"input", "select", "textarea"}


class _Page(HTMLParser):
    """The fields of index.html and whether each has a label: inside a <label>, named by one, or aria-label."""

    def __init__(self) -> None:
        super().__init__()
        self.open_labels = 0
        self.label_for: set[str] = set()
        self.fields: list[tuple[str, bool]] = []
        self.inline: list[str] = []
        self.buttons: list[str] = []
        self._button: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = dict(attrs)
        self.inline += [f"{tag} {name}" for name, _ in attrs if name.startswith("on") or name == "style"]
        if tag == "script" and not given.get("src"):
            self.inline.append("script without src")
        if tag == "label":
            self.open_labels += 1
            if given.get("for"):
                self.label_for.add(given["for"])
        if tag in FIELDS and given.get("type") != "hidden":
            labelled = self.open_labels > 0 or bool(given.get("aria-label"))
            self.fields.append((given.get("id") or tag, labelled))
        if tag == "button":
            self._button = [given.get("aria-label") or ""]

    def handle_data(self, data: str) -> None:
        if self._button is not None:
            self._button.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self.open_labels -= 1
        if tag == "button" and self._button is not None:
            self.buttons.append("".join(self._button).strip())
            self._button = None


def _page() -> _Page:
    page = _Page()
    page.feed((STATIC / "index.html").read_text(encoding="utf-8"))
    return page


def test_the_script_puts_no_text_in_as_html():
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    found = re.findall(r"\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\s*\(|new Function)", script)
    assert not found, f"app.js builds HTML from text ({', '.join(sorted(set(found)))}): use textContent and elements"


def test_every_field_of_the_page_has_a_label():
    page = _page()
    assert len(page.fields) > 20  # the job, constraints, what-if, check and export fields
    unlabelled = [name for name, labelled in page.fields if not labelled and name not in page.label_for]
    assert not unlabelled, f"fields without a label: {unlabelled}"
    assert page.buttons and all(page.buttons), f"a button without a name: {page.buttons}"


def test_nothing_inline_runs_or_styles():
    assert _page().inline == []


def test_each_id_the_script_asks_for_is_on_the_page():
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    ids = set(re.findall(r"""\$\(["']([A-Za-z0-9_-]+)["']\)""", script))
    ids |= {f"check-{name}" for name in re.findall(r'"(\w+)"', script.split("const CHECK_COUNTS = [")[1].split("]")[0])}
    present = set(re.findall(r'\bid="([^"]+)"', html))
    assert ids and not ids - present, f"app.js asks for ids index.html lacks: {sorted(ids - present)}"
