"""Files read in place by the app stay under the data folder; sizes are bounded before reading
(dpcore.data.file_access, dpcore.data.limits; issue 18, items 5 and 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpcore.data import file_access
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_table
from dpcore.data.tables import read_table
from dpcore.errors import InputError, ParameterError

CSV = "lat,lon\n40.7,-74.0\n"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """``root`` with data (a file, a folder, links in and out) and a secret file beside it."""
    root = tmp_path / "root"
    (root / "pings").mkdir(parents=True)
    (root / "a.csv").write_text(CSV)
    (root / "pings" / "p1.csv").write_text(CSV)
    (root / "pings" / "p2.csv").write_text(CSV)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "s.csv").write_text(CSV)
    (root / "in_link.csv").symlink_to(root / "a.csv")
    (root / "out_link.csv").symlink_to(secret / "s.csv")
    (root / "out_dir").symlink_to(secret, target_is_directory=True)
    return root.resolve(), secret.resolve()


def test_off_unless_a_folder_is_set(tmp_path: Path) -> None:
    assert file_access.data_root({}) is None
    assert file_access.data_root({"DPCORE_DATA_ROOT": str(tmp_path)}) == tmp_path.resolve()
    with pytest.raises(ParameterError, match="names no folder"):
        file_access.data_root({"DPCORE_DATA_ROOT": str(tmp_path / "nope")})


def test_paths_inside_are_read_resolved(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    assert file_access.source_under_root("a.csv", root).paths == (str(root / "a.csv"),)
    assert file_access.source_under_root(str(root / "a.csv"), root).paths == (str(root / "a.csv"),)
    assert len(file_access.source_under_root("pings", root).paths) == 2
    assert len(file_access.source_under_root("pings/*.csv", root).paths) == 2
    # a link that stays inside is read as its target
    assert file_access.source_under_root("in_link.csv", root).paths == (str(root / "a.csv"),)


@pytest.mark.parametrize(("typed", "words"), [
    ("../secret/s.csv", "'..'"),
    ("pings/../../secret/s.csv", "'..'"),
    ("/etc/passwd", "outside the data folder"),
    ("/etc/*", "outside the data folder"),
    ("out_link.csv", "link to a file outside"),  # a symbolic link escaping the root
    ("out_dir/s.csv", "link to a file outside"),  # through a linked folder
    ("out_dir", "symbolic link to a folder outside"),
    ("out_dir/*.csv", "symbolic link to a folder outside"),  # a pattern under a linked folder
    ("*_link.csv", "link to a file outside"),  # a glob that matches an escaping link
    ("**/s.csv", "link to a file outside"),
    ("nope.csv", "does not exist"),
    ("zz*.csv", "No CSV or Parquet file matches"),
])
def test_paths_and_globs_never_leave_the_root(tree: tuple[Path, Path], typed: str, words: str) -> None:
    root, secret = tree
    if typed in ("**/s.csv",) and not any(
            os.path.realpath(p).startswith(str(secret)) for p in root.glob(typed)):
        pytest.skip("this Python's ** does not follow linked folders: nothing outside is matched")
    with pytest.raises(InputError, match=words) as err:
        file_access.source_under_root(typed, root)
    assert str(secret) not in str(err.value)  # the target of a link is not named


@pytest.mark.parametrize("typed", ["out_dir", "out_dir/", "out_dir/*.csv", "out_dir/**/*.csv", "sub/out_dir",
                                   "out_dir/s.csv", "ROOT/out_dir"])
def test_a_linked_folder_outside_is_refused_before_it_is_listed(tree: tuple[Path, Path], typed: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed folder (or file, or a pattern's folder) that a symbolic link leads out of the root
    is refused before anything is listed (no walk of up to DPCORE_MAX_SOURCE_FILES files outside),
    and the message names only what was typed, no file of the folder outside."""
    root, secret = tree
    for i in range(20):
        (secret / f"hidden_{i}.csv").write_text(CSV)
    (root / "sub").mkdir()
    (root / "sub" / "out_dir").symlink_to(secret, target_is_directory=True)
    typed = typed.replace("ROOT", str(root))

    def no_listing(self, *args, **kwargs):
        raise AssertionError(f"listed {self} before refusing it")

    monkeypatch.setattr(Path, "rglob", no_listing)
    monkeypatch.setattr(Path, "glob", no_listing)
    words = "link to a file outside" if typed.endswith("s.csv") else "symbolic link to a folder outside"
    with pytest.raises(InputError, match=words) as err:
        file_access.source_under_root(typed, root)
    msg = str(err.value)
    assert msg.startswith(f"'{typed.strip()}'") and str(secret) not in msg
    assert "hidden_" not in msg and "s.csv" not in msg.replace(typed, "")


def test_absolute_root_given_outside_is_refused(tree: tuple[Path, Path]) -> None:
    root, secret = tree
    with pytest.raises(InputError, match="outside"):
        file_access.source_under_root(str(secret / "s.csv"), root)


def test_number_of_files_and_bytes_are_bounded(tree: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = tree
    monkeypatch.setenv("DPCORE_MAX_SOURCE_FILES", "1")
    with pytest.raises(InputError, match=r"more than 1 files \(setting DPCORE_MAX_SOURCE_FILES\)"):
        file_access.source_under_root("pings/*.csv", root)
    monkeypatch.setenv("DPCORE_MAX_SOURCE_FILES", "10")
    monkeypatch.setenv("DPCORE_MAX_SOURCE_BYTES", "30")
    with pytest.raises(InputError, match=r"2 files of .* GB in all.*DPCORE_MAX_SOURCE_BYTES"):
        file_access.source_under_root("pings", root)
    assert file_access.source_under_root("a.csv", root).n_bytes == len(CSV)


def test_spark_master_comes_from_the_allow_list() -> None:
    assert file_access.spark_masters({}) == ("local[*]", "local[2]")
    env = {"DPCORE_SPARK_MASTERS": "spark://h:7077, local[*]"}
    assert file_access.check_spark_master("spark://h:7077", env) == "spark://h:7077"
    with pytest.raises(ParameterError, match="not allowed"):
        file_access.check_spark_master("spark://evil:7077", env)
    with pytest.raises(ParameterError, match="not allowed"):
        file_access.check_spark_master("local[*]; rm", {})


def test_messages_lose_the_files_values() -> None:
    msg = "Column 'lat' has 2 values that are not a number (data rows 1, 4: 'SECRET', '12,5'). Fix them."
    safe = file_access.safe_message(msg, ["lat"])
    assert "SECRET" not in safe and "12,5" not in safe and "'lat'" in safe and "data rows 1, 4" in safe


def test_sizes_are_checked_before_reading_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = ("state,pop\n" + "01,5\n" * 200).encode()
    monkeypatch.setenv("DPCORE_MAX_TABLE_BYTES", "100")
    for read in (lambda: read_code_table(big, "t.csv"), lambda: read_table(big, "t.csv")):
        with pytest.raises(InputError, match=r"'t.csv' is 0.0 MB, more than .* \(setting DPCORE_MAX_TABLE_BYTES\)"):
            read()
    (tmp_path / "t.csv").write_bytes(big)
    with pytest.raises(InputError, match="DPCORE_MAX_TABLE_BYTES"):
        read_code_table(tmp_path / "t.csv")
    monkeypatch.delenv("DPCORE_MAX_TABLE_BYTES")
    assert len(read_code_table(big, "t.csv")) == 200
    monkeypatch.setenv("DPCORE_MAX_BOUNDARY_BYTES", "10")
    with pytest.raises(InputError, match="DPCORE_MAX_BOUNDARY_BYTES"):
        read_boundaries(b'{"type": "FeatureCollection", "features": []}', "b.geojson")
    monkeypatch.setenv("DPCORE_MAX_BOUNDARY_BYTES", "not a number")  # a bad setting keeps the default
    with pytest.raises(InputError, match="no usable|empty|no feature|polygon"):
        read_boundaries(b'{"type": "FeatureCollection", "features": []}', "b.geojson")
