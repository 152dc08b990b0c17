"""Weblate's own settings check of a machine-translation service, run by the Python of the
Weblate venv (`make weblate-venv`; tests/server/test_weblate_machinery.py starts it).

For each service named on the command line it fills in Weblate's settings form of that
service, as Weblate's page does when an administrator saves the service: the form's
clean() builds the machinery object and runs its validate_settings() (list the service's
languages, translate "test" from English into German). A service that passes is then asked
for `--text` from English into German, as Weblate asks when a translator opens a string.
One JSON line per service: {"service", "valid", "errors", "translation"}.

With `--term SOURCE=TARGET` (repeatable), a service that syncs glossaries (Weblate's
GlossaryMachineTranslationMixin: DeepL, ModernMT) is then asked again for `--text` with a
unit of a project whose glossary holds those terms, as Weblate asks for a unit's
suggestions: its get_glossary_id() lists the service's glossaries, creates the project's
(named `weblate:PROJECT:en:de:CHECKSUM`) and names it in the request; then once more
after the last term is dropped, so the stale glossary is replaced. Added to the line:
"synced": per round, the glossary's name, the translation and what list_glossaries()
answers after it; or {"error"} when the service refused a call. The project's
glossary is what Weblate's get_glossary_tsv() returns, placed in the cache it reads
first (Weblate's own key and TSV rendering), so no database is needed: the unit, its
translation, component and project are unsaved Weblate models.

    python machinery_check.py --text TEXT [--term S=T ...] SERVICE URL KEY [...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

# Weblate's machinery classes, by the name the test uses
CLASSES = {
    "libretranslate": "weblate.machinery.libretranslate.LibreTranslateTranslation",
    "deepl": "weblate.machinery.deepl.DeepLTranslation",
    "modernmt": "weblate.machinery.modernmt.ModernMTTranslation",
}


def machinery_class(service: str) -> type:
    module, name = CLASSES[service].rsplit(".", 1)
    found: type = getattr(importlib.import_module(module), name)
    return found


PROJECT_ID = 7  # the project whose glossary is synced


def glossary_unit(terms: list[tuple[str, str]], text: str) -> Any:
    """An (unsaved) unit of an en->de translation of project PROJECT_ID, whose glossary
    is `terms`, rendered as Weblate's render_glossary_units_tsv() renders it."""
    from django.core.cache import cache
    from weblate.lang.models import Language
    from weblate.trans.models import Component, Project, Translation, Unit

    project = Project(pk=PROJECT_ID, name="Manual", slug="manual")
    english, german = Language(code="en"), Language(code="de")
    component = Component(project=project, source_language=english, name="leaflet",
                          slug="leaflet")
    unit = Unit(translation=Translation(component=component, language=german), source=text)
    tsv = "\n".join(f"{source}\t{target}" for source, target in terms)
    cache.set(project.get_glossary_tsv_cache_key(english, german), tsv, 3600)
    return unit


def sync(machinery: Any, text: str, terms: list[tuple[str, str]]) -> dict[str, object]:
    """One suggestion of `text` with the project's glossary `terms`, as Weblate asks for
    it (the machinery's own glossary sync runs inside)."""
    unit = glossary_unit(terms, text)
    # the codes as Weblate's translate() passes them: the service's own (DeepL's "EN")
    source, target = machinery.map_language_code("en"), machinery.map_language_code("de")
    translations = machinery.download_multiple_translations(source, target, [(text, unit)],
                                                            None, 75)
    name = machinery.glossary_name_format.format(
        project=PROJECT_ID, source_language=source, target_language=target,
        checksum=machinery.tsv_checksum("\n".join(f"{s}\t{t}" for s, t in terms)))
    return {"name": name, "translation": translations[text][0]["text"],
            "listed": machinery.list_glossaries()}


def check(service: str, url: str, key: str, text: str,
          terms: list[tuple[str, str]]) -> dict[str, object]:
    cls = machinery_class(service)
    form = cls.settings_form(cls, data={"url": url, "key": key})
    valid = form.is_valid()
    errors = [str(message) for messages in form.errors.values() for message in messages]
    translation = None
    if valid:
        machinery = cls(form.cleaned_data)
        translations = machinery.download_multiple_translations(
            "en", "de", [(text, None)], None, 75)
        translation = translations[text][0]["text"]
    found: dict[str, object] = {"service": service, "valid": valid, "errors": errors,
                                "translation": translation}
    if valid and terms and cls.glossary_support:
        try:
            found["synced"] = [sync(machinery, text, terms),
                               sync(machinery, text, terms[:-1])]
        except Exception as refused:  # noqa: BLE001 (what Weblate would show the user)
            found["synced"] = {"error": f"{type(refused).__name__}: {refused}"}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", required=True)
    parser.add_argument("--term", action="append", default=[], metavar="SOURCE=TARGET",
                        help="a term of the project's glossary")
    parser.add_argument("services", nargs="+", help="SERVICE URL KEY triples")
    args = parser.parse_args()
    if len(args.services) % 3:
        parser.error("services come as SERVICE URL KEY triples")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ["DJANGO_SETTINGS_MODULE"] = "django_settings"
    import django

    django.setup()
    terms = [tuple(term.split("=", 1)) for term in args.term]
    triples = args.services
    for index in range(0, len(triples), 3):
        service, url, key = triples[index:index + 3]
        sys.stdout.write(json.dumps(check(service, url, key, args.text, terms)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
