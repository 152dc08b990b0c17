"""Every curl example of README.md and docs/API.md, read from the files' fenced code
blocks, run with the real `curl` against the app served by uvicorn; each must answer 2xx.

How a block is read: commands are joined across continuation lines and open quotes; a
line that starts with `curl` runs in bash (with the assignments seen before it in the
same file, e.g. `H="Authorization: Bearer $NMT_ADMIN_TOKEN"`), other commands (`make`,
`python -m ...`) are not run. The server stands in for `localhost:8000`: its address
replaces that one, `NMT_ADMIN_TOKEN` is its token (the files' `export NMT_ADMIN_TOKEN=...`
lines configure a server, so they are skipped), and placeholders a reader fills in (a
job id) are filled in from earlier answers. The store is the server tests' tiny one with
the domains the examples name, a word-level mixture served for requests without a domain
(the mixture section's example), tiny fr->en and en->de backbones beside it (the README's
French example, the Weblate section's German one), and the files the examples upload (the
README's TMX among them)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import (
    SEEDS,
    TOKEN,
    make_settings,
    module_archive,
    module_artifact,
    publish_module,
)
from office_files import word_by_python_docx
from test_libretranslate import build_store
from test_server_mixture import publish_mixture
from uvicorn_live import serving

from model_store import Store
from server.app import create_app
from tests.services import require_program
from tests.tiny import tiny_backbone_files

REPOSITORY = Path(__file__).resolve().parents[2]
# README.md, docs/API.md, and every other page of docs/ that shows a curl example
MAIN_DOCUMENTS = ("README.md", "docs/API.md")
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
ASSIGNMENT = re.compile(r"^(export\s+)?[A-Za-z_][A-Za-z0-9_]*=(\"[^\"]*\"|'[^']*'|\S*)$")
JOB_PLACEHOLDERS = ("<job_id>", "3f0c...e1")
EXTRA_DOMAINS = {"subtitles": 4}
PAIRS = "".join(f"{en}\t{fr}\n" for en, fr in [
    ("Open the file.", "Ouvrez le fichier."), ("Save the file.", "Enregistrez le fichier."),
    ("Click the button.", "Cliquez sur le bouton."), ("Close the window.", "Fermez la fenêtre.")])
DOCUMENT_FILES = {
    "leaflet.srt": "1\n00:00:01,000 --> 00:00:02,000\nTake one tablet a day.\n",
    "messages.po": 'msgid "Open the file"\nmsgstr ""\n',
    # over NMT_DOCUMENTS__SYNC_CHARS (set to 2,000 below): a job
    "manual.md": "# Manual\n\n" + "Open the file. Click the button. Close the window. "
                 "Save the changes before you leave the page.\n\n" * 25,
    "leaflet.docx": word_by_python_docx(),
    "terms.tbx": '<tbx type="TBX-Basic" xml:lang="en"><text><body><conceptEntry>'
                 '<langSec xml:lang="en"><termSec><term>file</term></termSec></langSec>'
                 '<langSec xml:lang="fr"><termSec><term>fichier</term></termSec></langSec>'
                 '</conceptEntry></body></text></tbx>',
}


@dataclass(frozen=True)
class Command:
    where: str  # file:line, for failure messages
    text: str


def commands(document: str) -> list[Command]:
    """The shell commands of the document's shell code blocks, in order."""
    found: list[Command] = []
    fence: str | None = None
    pending: list[str] = []
    start = 0
    for number, line in enumerate((REPOSITORY / document).read_text().splitlines(), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            pending = []
            continue
        if fence not in SHELL_FENCES:
            continue
        if not pending:
            start = number
        pending.append(line)
        text = "\n".join(pending)
        if text.endswith("\\") or not _complete(text):
            continue
        if text.strip() and not text.lstrip().startswith("#"):
            found.append(Command(f"{document}:{start}", text))
        pending = []
    return found


def _complete(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:  # an open quote: the command goes on
        return False
    return True


def is_assignment(command: Command) -> bool:
    return bool(ASSIGNMENT.match(command.text.strip()))


def readme_tmx() -> str:
    """The README's translation memory (its one `xml` block), which its examples import."""
    text = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```xml\n(.*?)```", text, flags=re.DOTALL)
    return str(block)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store and the files the examples upload."""
    scratch = tmp_path_factory.mktemp("docs")
    root = build_store(scratch / "store")
    with Store.open(root, builtin_dir=None) as store:
        for name, seed in EXTRA_DOMAINS.items():
            publish_module(store, name, seed)
        fingerprint = store.record("backbone", "tiny").fingerprint
        # The refresh example's domain names its training data, as shipped modules do.
        config, module = module_artifact(SEEDS["medical"])
        shipped = store.publish("module", "medical", module, config=config,
                                backbone_fingerprint=fingerprint,
                                provenance={"data": "shared/data en-fr/domains/medical/train"})
        store.activate("module", "medical", shipped.version)
        # the README's French example (`source: auto`) needs a fr->en direction, as the
        # package ships one; published last, so `tiny` stays the default direction
        files = tiny_backbone_files(seed=7)
        french = store.publish("backbone", "tiny-fr-en", files,
                               config=json.loads(files["config.json"]))
        store.activate("backbone", "tiny-fr-en", french.version)
        # docs/API.md's Weblate example translates English into German, as Weblate's check
        files = tiny_backbone_files(seed=8)
        german = store.publish("backbone", "tiny-en-de", files,
                               config=json.loads(files["config.json"]))
        store.activate("backbone", "tiny-en-de", german.version)
    publish_mixture(root)
    files = scratch / "files"
    files.mkdir()
    for name in ("finance.tsv", "finance-dev.tsv", "cooking.train.tsv", "cooking.dev.tsv"):
        (files / name).write_text(PAIRS)
    for name, text in DOCUMENT_FILES.items():
        (files / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    (files / "acme.tmx").write_text(readme_tmx(), encoding="utf-8")
    for domain in ("law", "medical"):
        (files / ("module.tar.gz" if domain == "law" else "medical.tar.gz")).write_bytes(
            module_archive(scratch / f"archive-{domain}", domain, SEEDS[domain],
                           fingerprint=fingerprint))
    return scratch


@pytest.fixture
def base(workdir: Path) -> Iterator[str]:
    """A fresh server per document: the examples change what is served."""
    settings = make_settings(workdir / "store", routing={"mixture": "mixed"},
                             limits={"min_domain_pairs": 1},
                             documents={"sync_chars": 2000},
                             decoding={"max_length": 256})  # the server's default limit
    store = workdir / "store"
    copy = workdir / f"store-{len(list(workdir.glob('store-*')))}"
    subprocess.run(["cp", "-a", str(store), str(copy)], check=True)
    with serving(create_app(settings.model_copy(update={"store_dir": copy}))) as url:
        yield url


def is_curl(command: Command) -> bool:
    return command.text.lstrip().startswith("curl")


# Pages whose examples need more than this store (an en->de backbone too): their own
# tests serve them.
NEEDS_ANOTHER_STORE = ("docs/DIRECTIONS.md",)
DOCUMENTS = [*MAIN_DOCUMENTS, *(
    name for name in sorted(str(path.relative_to(REPOSITORY))
                            for path in (REPOSITORY / "docs").glob("*.md"))
    if name not in (*MAIN_DOCUMENTS, *NEEDS_ANOTHER_STORE)
    and any(map(is_curl, commands(name))))]


def test_the_other_docs_with_curl_examples_are_found() -> None:
    assert "docs/DEPLOY.md" in DOCUMENTS


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_curl_example_answers_2xx(document: str, base: str, workdir: Path) -> None:
    require_program("curl")
    found = commands(document)
    runnable = [c for c in found if is_curl(c)]
    least = 5 if document in MAIN_DOCUMENTS else 1
    assert len(runnable) >= least, f"{document}: only {len(runnable)} curl examples found"
    assignments: list[str] = []
    job_id: str | None = None
    address = base.removeprefix("http://")
    for command in found:
        if is_assignment(command):
            if "NMT_ADMIN_TOKEN=" not in command.text:
                assignments.append(command.text)
            continue
        if command not in runnable:
            continue
        text = command.text.replace("localhost:8000", address)
        for placeholder in JOB_PLACEHOLDERS:
            if placeholder in text:
                assert job_id is not None, f"{command.where}: no job was created before"
                text = text.replace(placeholder, job_id)
        answers = run_curl(text, assignments, cwd=workdir / "files")
        assert answers, f"{command.where}: curl did not run"
        for status, body in answers:
            assert 200 <= status < 300, f"{command.where}: {status} {body[:500]!r}"
            if status == 202:  # a queued training job, or a document job
                job_id = json.loads(body)["id"]


def run_curl(command: str, assignments: list[str], *, cwd: Path) -> list[tuple[int, bytes]]:
    """Run the command in bash, `curl` writing each answer's status and body to files."""
    answers = cwd / "answers"
    subprocess.run(["rm", "-rf", str(answers)], check=True)
    answers.mkdir()
    wrapper = (f'curl() {{ N=$((N+1)); command curl --silent --show-error --max-time 60 '
               f'--output "{answers}/$N.body" --write-out "%{{http_code}}" "$@" '
               f'> "{answers}/$N.status"; }}')
    script = "\n".join(["set -e", "N=0", wrapper, *assignments, command])
    result = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "NMT_ADMIN_TOKEN": TOKEN})
    assert result.returncode == 0, f"{command}\n{result.stderr.decode()}"
    count = len(list(answers.glob("*.status")))
    return [(int((answers / f"{n}.status").read_text()),
             (answers / f"{n}.body").read_bytes() if (answers / f"{n}.body").exists() else b"")
            for n in range(1, count + 1)]
