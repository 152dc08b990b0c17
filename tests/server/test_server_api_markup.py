"""format html, placeholders and glossaries through the HTTP API on the tiny models.

The tiny backbone has random weights: it never copies a marker, so every sentence with
markup goes through the run-by-run retry: the strictest path for "everything comes back".
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from conftest import admin_headers
from fastapi.testclient import TestClient

from server.textproc.html import translated_spans

PAGE = ('<div class="card"><h2 id="t">Open the file</h2>\n'
        '<p>Click <b>the button</b> to save <a href="/f?id=1&amp;x=2" title="Save">all '
        'files</a>.&nbsp;Then <em>close</em> the window.</p>\n<!-- footer -->\n'
        '<pre>keep  this</pre><script>var a = "<b>x</b>";</script></div>')
GETTEXT = ["Could not open %s: %d errors", "Delete {name}? This removes %1$s and %2$s.",
           "{count, plural, one {# file} other {# files}} selected",
           "See https://example.org/help or mail help@example.org &amp; retry 3 times"]


class Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.tokens: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or ""  # translated values (title, alt) cut out
        spans = translated_spans(raw, tag, attrs)
        self.tokens.append("".join(raw[a:b] for a, b in zip(
            [0] + [end for _, end, _ in spans], [start for start, _, _ in spans] + [len(raw)],
            strict=True)))

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(f"</{tag}>")

    def handle_entityref(self, name: str) -> None:
        self.tokens.append(f"&{name};")

    def handle_comment(self, data: str) -> None:
        self.tokens.append(f"<!--{data}-->")


def markup(document: str) -> list[str]:
    parser = Markup()
    parser.feed(document)
    parser.close()
    return parser.tokens


def post(client: TestClient, path: str, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    return response.json()


def test_html_comes_back_with_every_tag_in_place(shared_client: TestClient) -> None:
    out = post(shared_client, "/translate", {"text": PAGE, "format": "html",
                                             "domain": "it"})["translation"]
    assert markup(out) == markup(PAGE)
    assert '<pre>keep  this</pre><script>var a = "<b>x</b>";</script></div>' in out
    assert out.startswith('<div class="card"><h2 id="t">') and "\n<!-- footer -->\n" in out
    # the inline tags still wrap something (their words' translation), text was translated
    assert re.search(r"<b>[^<]+</b>", out) and "Click" not in out


def test_translatable_attributes_are_translated(shared_client: TestClient) -> None:
    page = ('<p><img src="a.png" alt="Open the file"> <input type="submit" '
            'value="Save all files" data-x="Open the file"></p>')
    out = post(shared_client, "/translate", {"text": page, "format": "html",
                                             "domain": "it"})["translation"]
    assert markup(out) == markup(page)
    assert 'alt="Open the file"' not in out and 'value="Save all files"' not in out
    assert 'src="a.png"' in out and 'data-x="Open the file"' in out


def test_plain_text_is_not_parsed_as_html(shared_client: TestClient) -> None:
    out = post(shared_client, "/translate", {"text": "Press <b>OK</b> now", "domain": "it"})
    assert "<b>" in out["translation"] and "</b>" in out["translation"]


@pytest.mark.parametrize("text", GETTEXT)
def test_placeholders_come_back_verbatim(shared_client: TestClient, text: str) -> None:
    out = post(shared_client, "/translate", {"text": text, "domain": "it"})["translation"]
    for span in re.findall(r"%\d?\$?[sd]|\{name\}|https://\S+|help@example\.org|&amp;|\b3\b",
                           text):
        assert span in out
    if text.startswith("{count"):
        assert "{count, plural, one {# file} other {# files}}" in out


def test_batch_formats_and_glossaries_per_item(shared_client: TestClient) -> None:
    body = {"format": "html", "glossary": {"button": "bouton"}, "domain": "it", "items": [
        {"text": "<p>Click the <b>button</b>.</p>"},
        {"text": "Click the <b>button</b>.", "format": "text", "glossary": None},
        {"text": "Open the file.", "glossary": {"file": "fichier"}}]}
    results = post(shared_client, "/translate/batch", body)["results"]
    assert results[0]["translation"].startswith("<p>")
    assert "<b>bouton</b>" in results[0]["translation"]
    assert results[0]["glossary"] == {"applied": ["button"], "missed": []}
    assert results[1]["glossary"] is None and "<b>" in results[1]["translation"]
    assert "fichier" in results[2]["translation"]
    assert results[2]["glossary"] == {"applied": ["file"], "missed": []}


def test_glossary_longest_first_ignoring_case(shared_client: TestClient) -> None:
    out = post(shared_client, "/translate", {
        "text": "The Blood Pressure and the blood.", "domain": "medical",
        "glossary": {"blood": "sang", "blood pressure": "tension artérielle",
                     "absent": "absent"}})
    assert "tension artérielle" in out["translation"] and "sang" in out["translation"]
    assert out["glossary"] == {"applied": ["blood pressure", "blood"], "missed": []}


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"glossary": {"": "x"}}, "glossary[0]", "source term is empty"),
    ({"glossary": {"ok": "bien", "dose": ""}}, "glossary[1]", "entry 1 ('dose')"),
    ({"glossary": {"x" * 201: "y"}}, "glossary[0]", "at most 200"),
    ({"glossary": {f"t{i}": "x" for i in range(1001)}}, "glossary", "at most 1000"),
    ({"glossary": {"a": "b"}, "glossary_id": "g"}, "body", "not both"),
    ({"format": "markdown"}, "format", "text"),
])
def test_bad_glossaries_and_formats(shared_client: TestClient, body: dict[str, Any],
                                    field: str, words: str) -> None:
    error = post(shared_client, "/translate", {"text": "Hello.", **body}, 422)["error"]
    assert error["field"] == field and words in error["message"]


def test_batch_item_glossary_errors_name_the_item(shared_client: TestClient) -> None:
    error = post(shared_client, "/translate/batch", {"items": [
        {"text": "a"}, {"text": "b", "glossary": {" x": "y"}}]}, 422)["error"]
    assert error["field"] == "items[1].glossary[0]"


def test_unknown_glossary_id(shared_client: TestClient) -> None:
    error = post(shared_client, "/translate", {"text": "Hello.", "glossary_id": "nope"},
                 404)["error"]
    assert error["field"] == "glossary_id" and "nope" in error["message"]


def test_stored_glossaries(client: TestClient) -> None:
    headers = admin_headers()
    created = client.put("/admin/glossaries/med", headers=headers, json={
        "entries": {"tablet": "comprimé", "patient": "malade"}, "default_for": "medical"})
    assert created.status_code == 201, created.text
    assert created.json()["entries"] == {"tablet": "comprimé", "patient": "malade"}
    csv_body = b'tablet,cachet\n"blood, pressure",tension\n'
    replaced = client.put("/admin/glossaries/med", headers=headers | {
        "content-type": "text/csv"}, content=csv_body, params={"default_for": "medical"})
    assert replaced.status_code == 200 and replaced.json()["size"] == 2
    tsv = client.put("/admin/glossaries/it-terms", headers=headers | {
        "content-type": "text/tab-separated-values"}, content=b"file\tfichier\n")
    assert tsv.status_code == 201
    listed = client.get("/admin/glossaries", headers=headers).json()["glossaries"]
    assert [(g["name"], g["size"], g["default_for"]) for g in listed] == [
        ("it-terms", 1, None), ("med", 2, "medical")]
    by_id = post(client, "/translate", {"text": "Open the file.", "glossary_id": "it-terms",
                                        "domain": "law"})
    assert "fichier" in by_id["translation"] and by_id["glossary"]["applied"] == ["file"]
    default = post(client, "/translate", {"text": "One tablet.", "domain": "medical"})
    assert "cachet" in default["translation"]
    assert default["glossary"] == {"applied": ["tablet"], "missed": []}
    other = post(client, "/translate", {"text": "One tablet.", "domain": "law"})
    assert other["glossary"] is None
    conflict = client.put("/admin/glossaries/other", headers=headers, json={
        "entries": {"a": "b"}, "default_for": "medical"})
    assert conflict.status_code == 409 and conflict.json()["error"]["field"] == "default_for"
    assert client.delete("/admin/glossaries/med", headers=headers).json() == {
        "name": "med", "deleted": True}
    assert client.get("/admin/glossaries/med", headers=headers).status_code == 404
    assert post(client, "/translate", {"text": "One tablet.", "domain": "medical"})[
        "glossary"] is None


@pytest.mark.parametrize(("headers", "content", "status", "field"), [
    ({"content-type": "text/csv"}, b"a,b,c\n", 422, "entries[line 1]"),
    ({"content-type": "text/csv"}, b"a,b\n,c\n", 422, "entries[1]"),
    ({"content-type": "text/csv"}, b"dose,dose\nDose,posologie\n", 422, "entries[1]"),
    ({"content-type": "application/json"}, b'{"entries": {"a": 1}}', 422, "entries.a"),
    ({"content-type": "application/json"}, b"{", 422, "body"),
    ({"content-type": "text/plain"}, b"a,b", 422, "body"),
    ({"content-type": "text/csv"}, b"", 422, "body"),
])
def test_bad_uploads(client: TestClient, headers: dict[str, str], content: bytes,
                     status: int, field: str) -> None:
    response = client.put("/admin/glossaries/g", headers=admin_headers() | headers,
                          content=content)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field
    assert client.get("/admin/glossaries", headers=admin_headers()).json()[
        "glossaries"] == []  # nothing half-written


def test_glossary_admin_needs_the_token(shared_client: TestClient) -> None:
    assert shared_client.get("/admin/glossaries").status_code == 401
    assert shared_client.put("/admin/glossaries/x", json={"entries": {}},
                             headers=admin_headers("wrong")).status_code == 403
    bad_name = shared_client.put("/admin/glossaries/-x", json={"entries": {"a": "b"}},
                                 headers=admin_headers())
    assert bad_name.status_code == 422 and bad_name.json()["error"]["field"] == "name"
