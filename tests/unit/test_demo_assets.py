"""Issue 26, item 1: the demo data shipped in ``assets/demo`` is what its README says (checksums),
within the size budget of about 12 MB, and it is the only data the app's pages read."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "demo"
BUDGET_BYTES = 12_000_000


def readme_rows() -> dict[str, str]:
    """File -> sha256 from the README's table."""
    text = (DEMO / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", text, flags=re.M))


def data_files() -> list[str]:
    return sorted(p.relative_to(DEMO).as_posix() for p in DEMO.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".md") and "__pycache__" not in p.parts)


def test_every_demo_file_has_its_checksum_in_the_readme_and_matches_it() -> None:
    rows = readme_rows()
    assert sorted(rows) == data_files()
    for rel, digest in rows.items():
        assert hashlib.sha256((DEMO / rel).read_bytes()).hexdigest() == digest, rel


def test_the_demo_data_stays_within_its_size_budget() -> None:
    total = sum((DEMO / rel).stat().st_size for rel in data_files())
    assert 5_000_000 < total <= BUDGET_BYTES, total


def test_the_app_reads_no_data_folder_outside_the_repository() -> None:
    """Pages and ui modules reach data files only through ui.demo_data.demo_file (no ../shared/data,
    no DPCORE_SHARED_DATA): a fresh clone has nothing beside the repository."""
    offenders = []
    for path in [ROOT / "app.py", *(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").rglob("*.py"),
                 *(ROOT / "dpcore").rglob("*.py")]:
        code = path.read_text(encoding="utf-8")
        if path.name == "demo_data.py":
            code = code.split('"""', 2)[2]  # its docstring says what it does not read
        if re.search(r"DPCORE_SHARED_DATA|[\"']shared[\"']\s*/|shared/data", code):
            offenders.append(path.relative_to(ROOT).as_posix())
    assert offenders == []
