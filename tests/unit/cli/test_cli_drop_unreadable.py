"""``release points --drop-unreadable`` (and ``drop_unreadable = true`` under a config's ``[input]``):
rows whose coordinate is text that is not a number left out and counted on stderr for the curator;
without it the refusal names the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcore.cli import main
from dpcore.errors import CURATOR_ONLY

CSV = ("lat,lon,when\n40.5,-73.5,2024-01-01\nnorth,-73.2,2024-01-01\n40.1,-73.1,2024-01-02\n"
       "40.2,east,2024-01-02\n,-73.4,2024-01-02\n40.3,-73.3,2024-01-01\n")
REFUSAL = ("Column 'lat' has 1 value that is not a number (data row 2: 'north'). Fix or remove those rows, "
           "or give --drop-unreadable to leave those rows out.")


def _argv(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "p.csv").write_text(CSV, "utf-8")
    return ["release", "points", "--input", str(tmp_path / "p.csv"), "--bounds=-74,40,-73,41", "--grid", "4,4",
            "--mechanism", "ug", "--epsilon", "1", "--no-budget", "--out", str(tmp_path / "o"), *extra]


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_refused_with_the_option_named(tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(tmp_path, "--engine", engine)) == 2
    err = capsys.readouterr().err
    assert CURATOR_ONLY in err and "not a number" in err and "or give --drop-unreadable to leave those rows out." in err
    if engine == "numpy":  # the library's message, its first part unchanged
        assert REFUSAL in err


@pytest.mark.parametrize("engine", ["numpy", "duckdb"])
def test_dropped_and_counted_for_the_curator(tmp_path: Path, engine: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(tmp_path, "--engine", engine, "--drop-unreadable")) == 0
    err = capsys.readouterr().err
    assert (CURATOR_ONLY + "Dropped 2 rows whose latitude or longitude is not a number (--drop-unreadable; "
            "not in the export).") in err.splitlines()
    public = "".join(p.read_text("utf-8") for p in (tmp_path / "o").iterdir() if p.suffix in (".json", ".csv"))
    assert "not a number" not in public and "unreadable" not in public


def test_config_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.csv").write_text(CSV, "utf-8")
    cfg = ('release = "points"\n[input]\npath = "p.csv"\ndrop_unreadable = true\n[engine]\nname = "numpy"\n'
           '[domain]\nbounds = [-74, 40, -73, 41]\ngrid = [4, 4]\n[mechanism]\nname = "ug"\n'
           '[budget]\nepsilon = 1\nledger = "l.json"\n[output]\ndir = "o"\n')
    (tmp_path / "c.toml").write_text(cfg, "utf-8")
    assert main(["run", str(tmp_path / "c.toml")]) == 0
    assert "Dropped 2 rows whose latitude" in capsys.readouterr().err
    (tmp_path / "c.toml").write_text(cfg.replace("drop_unreadable = true\n", ""), "utf-8")
    assert main(["run", str(tmp_path / "c.toml")]) == 2
    assert "or give --drop-unreadable" in capsys.readouterr().err


def test_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(tmp_path, "--time-col", "when", "--time-range", "2024-01-01,2024-01-02")
    assert main(argv) == 2
    assert "or give --drop-unreadable" in capsys.readouterr().err
    assert main([*argv, "--drop-unreadable"]) == 0
    assert "Dropped 2 rows whose latitude" in capsys.readouterr().err
