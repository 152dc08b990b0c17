"""Weblate's own TBX export of a glossary, run by the Python of the Weblate venv (`make
weblate-venv`; tests/server/test_tbx_writers.py starts it) and written to stdout.

Weblate's TBXExporter (weblate.formats.exporters, the class behind a glossary's "TBX"
download) is given one en->fr glossary unit per `--term SOURCE=TARGET[=EXPLANATION[=FLAGS]]`
and
serialises them through translate-toolkit's tbxfile, as Weblate does. The units are
unsaved Weblate models: what the exporter would read from the database (the unit's
comments and suggestions) is set to none, and a unit's flags are the ones given with its
term (Weblate's own Flags class, e.g. `forbidden`), so no database is needed.

    python tbx_export.py --term "hard drive=disque dur=a disk" --term "pill=cachet==forbidden"
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def export(terms: list[list[str]]) -> bytes:
    from weblate.checks.flags import Flags
    from weblate.formats.exporters import TBXExporter
    from weblate.lang.models import Language, Plural
    from weblate.trans.models import Component, Project, Translation, Unit

    project = Project(name="Manual", slug="manual")
    english, french = Language(code="en", name="English"), Language(code="fr", name="French")
    french.plural = Plural(language=french)  # the exporter reads the target's plural
    component = Component(project=project, source_language=english, name="glossary",
                          slug="glossary", is_glossary=True, file_format="tbx")
    translation = Translation(component=component, language=french)
    exporter = TBXExporter(project=project, source_language=english, language=french,
                           url="http://localhost/projects/manual/glossary/fr/")
    for position, (source, target, *more) in enumerate(terms):
        explanation, flags = (more + ["", ""])[:2]
        unit = Unit(translation=translation, source=source, target=target,
                    explanation=explanation, position=position)
        unit.source_unit = unit  # a unit of the source language is its own source unit
        # what Weblate would query from its database: nothing is attached to these units
        unit.__dict__.update(all_comments=[], suggestions=[], all_flags=Flags(flags))
        exporter.add_unit(unit)
    return exporter.serialize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--term", action="append", required=True,
                        metavar="SOURCE=TARGET[=EXPLANATION[=FLAGS]]")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ["DJANGO_SETTINGS_MODULE"] = "django_settings"
    import django

    django.setup()
    sys.stdout.buffer.write(export([term.split("=", 3) for term in args.term]))


if __name__ == "__main__":
    main()
