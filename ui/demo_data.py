"""Where the app's real-data demos are read from: the compact public copies shipped in the
repository under ``assets/demo/`` (sources, licences, checksums: ``assets/demo/README.md``).

Every demo file the pages read goes through :func:`demo_file`, so a fresh clone offers every demo
and its map context without any other folder.  The full public files beside the repository
(``../shared/data``, or ``DPCORE_SHARED_DATA``) are for tests and benchmarks only; the app never
reads them.
"""

from __future__ import annotations

from pathlib import Path

#: the shipped demo data (``assets/demo`` of the repository)
DEMO_DIR = Path(__file__).resolve().parents[1] / "assets" / "demo"


def demo_file(relative: str) -> Path:
    """The path of a shipped demo file, e.g. ``demo_file("od/nyc_green_taxi_trips_2020-04.csv.gz")``.

    Parameters
    ----------
    relative : str
        The file's path inside ``assets/demo`` (``points/``, ``census/``, ``od/``, ``boundaries/``).

    Returns
    -------
    pathlib.Path
        The path (whether the file exists is for the caller to check: a demo whose files are
        missing is not offered).

    Examples
    --------
    >>> demo_file("boundaries/nyc_boroughs.geojson").relative_to(DEMO_DIR).as_posix()
    'boundaries/nyc_boroughs.geojson'
    """
    return DEMO_DIR / relative
