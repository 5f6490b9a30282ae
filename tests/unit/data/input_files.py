"""Shared by the tests of reading input files (dpcore.data.tables, .columns, .points, .boundaries):
the real data files and the rule that every refusal tells the curator what to do.

Real data is read from the shared data folder beside the checkout (never copied); tests that need
it are skipped when it is missing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import dpcore
from dpcore.errors import InputError

DATA = Path(dpcore.__file__).resolve().parents[2] / "shared" / "data"
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
UBER = DATA / "points" / "uber_nyc_pickups_2014-04.csv.gz"
QUAKES = DATA / "points" / "earthquakes_23k.csv"
BOROUGHS = DATA / "boundaries" / "nyc_boroughs.geojson"

# Every message must tell the curator what to do.
FIX = re.compile(
    r"\b(Export|Fix|Check|Choose|Add|Rename|Upload|Replace|Name them|Zip|Include|convert|"
    r"Save|remove|delete|Did you mean)\b",
    re.IGNORECASE,
)


def assert_actionable(err: pytest.ExceptionInfo[InputError], *names: str) -> str:
    """The message names the problem (file/column/values) and contains a fix."""
    msg = str(err.value)
    for name in names:
        assert name in msg, f"{name!r} not named in: {msg}"
    assert FIX.search(msg), f"no fix hint in: {msg}"
    assert "\n" not in msg  # the CLI prints it on one line
    return msg


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not available: {path}")
    return path


def feature_collection(features: list[dict]) -> bytes:
    """A GeoJSON FeatureCollection of ``features``, as the bytes of an uploaded file."""
    return json.dumps({"type": "FeatureCollection", "features": features}).encode()
