"""The app's Streamlit configuration (.streamlit/config.toml), read by ./run, the browser tests and
the benchmarks, which all start `streamlit run app.py` from the repository's root."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_toolbar_is_minimal_so_there_is_no_deploy_button() -> None:
    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text("utf-8"))
    assert conf["client"]["toolbarMode"] == "minimal"
    # Streamlit itself, started from the root as ./run starts it, reads the value (a misspelt
    # section or option would be ignored with a warning and leave "auto", which shows Deploy)
    out = subprocess.run([sys.executable, "-c", "from streamlit import config; "
                          "print(config.get_option('client.toolbarMode'))"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "minimal"
    run = (ROOT / "run").read_text("utf-8")
    assert 'cd "$(dirname "$0")"' in run and "-m ui.serve app.py" in run  # from the root: the config applies


def test_the_toolbar_mode_is_one_streamlit_knows() -> None:
    from streamlit import config

    option = config._config_options_template["client.toolbarMode"]
    assert '"minimal"' in option.description


def test_no_full_garbage_collection_after_every_script_run() -> None:
    # Streamlit's default collects all garbage after each run: 0.1-0.5 s of the server's CPU per step
    # with a few sessions open, on a server that runs one script at a time (issue 28 item 5)
    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text("utf-8"))
    assert conf["runner"]["postScriptGC"] is False
    out = subprocess.run([sys.executable, "-c", "from streamlit import config; "
                          "print(config.get_option('runner.postScriptGC'))"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False"
