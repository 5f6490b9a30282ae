"""The Export step's files for data users and reviewers, offered the same way for every kind (issue 25).

A release's files (made once, with the release) hold, besides release.csv and release.json, the data
users' files (the noisy measurements before post-processing, the design, the unbiased estimates, the
replicate columns) and the review record (deployment.yaml, review.html).  :func:`offer` gives each a
download button with one line on what it holds; the points, areas and trips Export steps call it.
Everything offered is a published file of the release: no data read, no budget spent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import streamlit as st

#: The files offered here, in order, with their media type and what each holds.
OFFERED: dict[str, tuple[str, str]] = {
    "measurements.csv": ("text/csv", "every noisy measurement before post-processing (for your own inference)"),
    "measurements.parquet": ("application/vnd.apache.parquet", "every noisy measurement before post-processing "
                             "(for your own inference), as Parquet: a large release's measurements"),
    "design.json": ("application/json", "which cells each measurement sums, the public totals, and the "
                                        "statement that the noise draws are independent"),
    "estimates.csv": ("text/csv", "the unbiased least-squares estimate of every cell, with its variance "
                                  "(release.csv holds the published values)"),
    "replicates.csv": ("text/csv", "80 replicate columns: the variance of any sum of cells in a spreadsheet"),
    "deployment.yaml": ("application/yaml", "the review record in the OpenDP Deployments Registry's fields"),
    "review.html": ("text/html", "a one-page summary a disclosure officer can read and sign"),
}


def offered(files: Mapping[str, bytes]) -> list[str]:
    """The names of :data:`OFFERED` among a release's files, in the order offered.

    >>> offered({"review.html": b"", "release.csv": b"", "measurements.csv": b""})
    ['measurements.csv', 'review.html']
    """
    return [name for name in OFFERED if name in files]


def _why_not(files: Mapping[str, bytes]) -> str | None:
    """The record's reason for offering no measurements (``data_users.why``), if it gives one.

    >>> _why_not({"release.json": b'{"data_users": {"measurements_offered": false, "why": "groups"}}'})
    'groups'
    >>> _why_not({"release.json": b'{"data_users": {"files": []}}'}) is None, _why_not({}) is None
    (True, True)
    """
    try:
        users = json.loads(files["release.json"]).get("data_users") or {}
    except (KeyError, ValueError):
        return None
    return users.get("why") if users.get("measurements_offered") is False else None


#: A file larger than this is handed to Streamlit only when its download button is clicked (a
#: release of a million blocks has files of about 100 MB each: registered and hashed on every run of
#: the Export step otherwise; issue 28 item 1).
LAZY_BYTES = 8_000_000


def served(data: bytes, limit: int | None = None) -> bytes | Callable[[], bytes]:
    """``data`` for ``st.download_button``: the bytes, or above ``limit`` (:data:`LAZY_BYTES`) a callable
    Streamlit calls on the click (deferred download).

    >>> served(b"abc"), served(b"abcd", limit=3)() == b"abcd"
    (b'abc', True)
    """
    return data if len(data) <= (LAZY_BYTES if limit is None else limit) else (lambda: data)


def offer(files: Mapping[str, bytes], key: str) -> None:
    """Download buttons for the data users' and review files among ``files`` (``key``: the kind's
    widget-key prefix), each with what it holds; nothing when the release has none of them."""
    names = offered(files)
    if not names:
        return
    st.subheader("For data users and reviewers")
    for row in range(0, len(names), 3):  # rows of three, read left to right
        for col, name in zip(st.columns(3), names[row:row + 3], strict=False):
            col.download_button(f"Download {name}", served(files[name]), name, OFFERED[name][0], on_click="ignore",
                                key=f"{key}_dl_users_{name}")
    st.markdown("\n".join(f"- **{name}**: {OFFERED[name][1]}" for name in names))
    why = _why_not(files)
    if why:
        st.caption(f"This release offers no measurements for inference: {why}")
    st.caption("Made from the release only, with it: no data read, no budget spent.")
