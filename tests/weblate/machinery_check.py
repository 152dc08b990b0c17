"""Weblate's own settings check of a machine-translation service, run by the Python of the
Weblate venv (`make weblate-venv`; tests/server/test_weblate_machinery.py starts it).

For each service named on the command line it fills in Weblate's settings form of that
service, as Weblate's page does when an administrator saves the service: the form's
clean() builds the machinery object and runs its validate_settings() (list the service's
languages, translate "test" from English into German). A service that passes is then asked
for `--text` from English into German, as Weblate asks when a translator opens a string.
One JSON line per service: {"service", "valid", "errors", "translation"}.

    python machinery_check.py --text TEXT SERVICE URL KEY [SERVICE URL KEY ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

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


def check(service: str, url: str, key: str, text: str) -> dict[str, object]:
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
    return {"service": service, "valid": valid, "errors": errors,
            "translation": translation}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", required=True)
    parser.add_argument("services", nargs="+", help="SERVICE URL KEY triples")
    args = parser.parse_args()
    if len(args.services) % 3:
        parser.error("services come as SERVICE URL KEY triples")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ["DJANGO_SETTINGS_MODULE"] = "django_settings"
    import django

    django.setup()
    triples = args.services
    for index in range(0, len(triples), 3):
        service, url, key = triples[index:index + 3]
        sys.stdout.write(json.dumps(check(service, url, key, args.text)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
