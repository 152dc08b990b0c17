"""Small modules with one job each: no Python file of the repository passes 400 lines, and
none is named for being shared rather than for its job (the naming rule is in
test_import_rules.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
SKIPPED = {".venv", ".git", "node_modules", "build", "dist"}


def python_files() -> list[Path]:
    return sorted(path for path in ROOT.rglob("*.py")
                  if not SKIPPED & set(path.relative_to(ROOT).parts))


def too_long(paths: list[Path], root: Path = ROOT, limit: int = MAX_LINES) -> dict[str, int]:
    """Each file over `limit` lines -> its line count."""
    out = {}
    for path in paths:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            out[str(path.relative_to(root))] = lines
    return out


def test_no_module_is_over_400_lines() -> None:
    assert too_long(python_files()) == {}


def test_the_check_finds_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert too_long(sorted(tmp_path.glob("*.py")), root=tmp_path) == {"long.py": MAX_LINES + 1}
