"""scripts/venv.sh, which ./run and ./test source: ``apt_install`` (Debian packages the scripts need), run by
bash with stub ``apt-get``, ``sudo`` and ``id`` first on PATH that log their arguments; apt never runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_SH = ROOT / "scripts" / "venv.sh"
#: how apt_install runs apt-get: waiting up to 2 minutes for dpkg's lock (unattended-upgrades on a fresh VM)
INSTALL = "apt-get install -o DPkg::Lock::Timeout=120 -y --no-install-recommends"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the scripts are bash scripts")

#: ``apt-get``: logs its arguments; ``install`` fails while $STUB/install-fails holds a positive count (one
#: less each time), ``update`` fails when $STUB/update-fails exists; it writes to stdout and, failing, stderr.
APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$STUB/log"
echo "Reading package lists..."
if [ "$1" = update ] && [ -e "$STUB/update-fails" ]; then echo "E: update failed" >&2; exit 100; fi
if [ "$1" = install ] && [ -s "$STUB/install-fails" ]; then
    n=$(cat "$STUB/install-fails")
    if [ "$n" -gt 0 ]; then echo $((n - 1)) > "$STUB/install-fails"; echo "E: Unable to locate package" >&2; exit 100; fi
fi
if [ "$1" = install ]; then for package; do :; done; touch "$STUB/installed-$package"; fi
exit 0
"""
#: ``sudo``: logs its arguments and runs the command (without ``-n``)
SUDO = """#!/bin/sh
echo "sudo $*" >> "$STUB/log"
if [ "$1" = -n ]; then shift; fi
exec "$@"
"""
#: ``python3``: logs its arguments; says it is Python $STUB_PY (the version query of make_venv); ``-m venv DIR``
#: makes DIR/bin/python, unless $STUB/venv-fails exists and python3-venv was not installed (Debian's case)
PYTHON3 = """#!/bin/sh
echo "python3 $*" >> "$STUB/log"
if [ "$1" = -c ]; then echo "$STUB_PY"; exit 0; fi
if [ "$1" = -m ] && [ "$2" = venv ]; then
    if [ -e "$STUB/venv-fails" ] && [ ! -e "$STUB/installed-python3-venv" ]; then
        echo "The virtual environment was not created successfully because ensurepip is not available." >&2
        exit 1
    fi
    mkdir -p "$3/bin" && touch "$3/bin/python" && chmod +x "$3/bin/python"
fi
exit 0
"""
#: ``id -u``: $STUB_UID
ID = """#!/bin/sh
echo "${STUB_UID:-1000}"
"""


@pytest.fixture
def stub(tmp_path: Path) -> Path:
    """A folder of stub commands (bin/) and their log; the scripts' working directory is tmp_path."""
    bin_dir = tmp_path / "stub" / "bin"
    bin_dir.mkdir(parents=True)
    stubs = {"apt-get": APT_GET, "sudo": SUDO, "id": ID, "python3": PYTHON3, "present-tool": "#!/bin/sh\n"}
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return tmp_path / "stub"


def run_bash(stub: Path, script: str, *args: str, uid: int = 1000, python: str = "3.11",
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` after sourcing scripts/venv.sh, in `set -euo pipefail` as ./run and ./test run it."""
    env = {"PATH": f"{stub / 'bin'}:/usr/bin:/bin", "STUB": str(stub), "STUB_UID": str(uid), "STUB_PY": python,
           "LC_ALL": "C", **(env or {})}
    return subprocess.run([shutil.which("bash"), "-c", f"set -euo pipefail; . '{VENV_SH}'; {script}", "bash", *args],
                          cwd=stub.parent, env=env, capture_output=True, text=True, timeout=60)


def log(stub: Path) -> list[str]:
    path = stub / "log"
    return path.read_text().splitlines() if path.exists() else []


def apt_install(stub: Path, *args: str, uid: int = 1000) -> subprocess.CompletedProcess[str]:
    return run_bash(stub, 'apt_install "$@"; echo "after"', *args, uid=uid)


def test_a_package_already_there_is_not_installed(stub: Path) -> None:
    exe = stub.parent / "chromium"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    for present in (str(exe), "present-tool"):  # an executable file, a command on PATH
        for mode in ((), ("optional",)):
            r = apt_install(stub, "pkg", present, "Installing pkg ...", *mode)
            assert (r.returncode, r.stdout, r.stderr) == (0, "after\n", "")
    assert log(stub) == []


def test_a_required_package_goes_through_sudo_without_a_prompt(stub: Path) -> None:
    """Review finding: ./test ran plain sudo for chromium and Java, which may stop to ask for a password,
    where the other installs used sudo -n."""
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "Installing Debian's chromium ...")
    assert (r.returncode, r.stdout, r.stderr) == (0, "Installing Debian's chromium ...\nafter\n", "")
    assert log(stub) == [f"sudo -n {INSTALL} chromium", f"{INSTALL} chromium"]


def test_as_root_apt_runs_without_sudo(stub: Path) -> None:
    for mode in ((), ("optional",)):
        r = apt_install(stub, "java17", "dpcore-no-such-tool", "", *mode, uid=0)
        assert (r.returncode, r.stdout) == (0, "after\n")
    assert log(stub) == [f"{INSTALL} java17"] * 2


def test_every_install_waits_for_dpkgs_lock(stub: Path) -> None:
    """Review finding: on a fresh VM unattended-upgrades often holds dpkg's lock, so a required install
    failed at once after a successful update and ./test stopped.  Every install, required or optional,
    first try or after the update, waits for the lock; the update is as before."""
    for mode in ((), ("optional",)):
        (stub / "install-fails").write_text("1")
        r = apt_install(stub, "chromium", "/nonexistent/chromium", "", *mode)
        assert (r.returncode, r.stdout) == (0, "after\n")
    installs = [line for line in log(stub) if line.startswith("apt-get install ")]
    assert len(installs) == 4 and all(" -o DPkg::Lock::Timeout=120 " in line for line in installs)
    assert [line for line in log(stub) if line.startswith("apt-get update")] == ["apt-get update"] * 2


def test_without_sudo_the_note_says_to_run_apt_as_root(stub: Path) -> None:
    """Review finding: where there is no sudo at all the note said "sudo apt-get install ..."; it says to
    run apt-get as root.  PATH holds only the stubs, without sudo, and the tools they run."""
    bare = stub / "bare"
    bare.mkdir()
    for name in ("apt-get", "id"):
        (bare / name).symlink_to(stub / "bin" / name)
    for tool in ("cat", "touch"):
        (bare / tool).symlink_to(shutil.which(tool))
    fix = "Could not install chromium: install it (sudo apt-get install chromium), or use ./test -m \"not e2e\"."
    script = 'apt_install "$@"; echo "after"'
    r = subprocess.run([shutil.which("bash"), "-c", f"set -euo pipefail; . '{VENV_SH}'; {script}", "bash",
                        "chromium", "/nonexistent/chromium", "", "", "", fix],
                       cwd=stub.parent, env={"PATH": str(bare), "STUB": str(stub), "STUB_UID": "1000", "LC_ALL": "C"},
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "after\n")
    assert r.stderr.splitlines()[-1] == ("Could not install chromium: install it (as root: apt-get install chromium), "
                                         "or use ./test -m \"not e2e\".")
    assert "sudo: command not found" in r.stderr  # the update's error, shown as before
    assert log(stub) == []  # apt-get never ran
    (stub / "update-fails").touch()
    (stub / "install-fails").write_text("1")
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "", "", "", fix)  # sudo there: the note as given
    assert r.stderr == f"E: update failed\n{fix}\n"


def test_the_package_lists_are_updated_only_when_the_first_install_fails(stub: Path) -> None:
    (stub / "install-fails").write_text("1")
    r = apt_install(stub, "openjdk-17-jre-headless", "dpcore-no-such-tool", "Installing Java ...")
    assert (r.returncode, r.stdout, r.stderr) == (0, "Installing Java ...\nafter\n", "")
    assert log(stub) == [f"sudo -n {INSTALL} openjdk-17-jre-headless", f"{INSTALL} openjdk-17-jre-headless",
                         "sudo -n apt-get update", "apt-get update",
                         f"sudo -n {INSTALL} openjdk-17-jre-headless", f"{INSTALL} openjdk-17-jre-headless"]


def test_a_required_install_that_fails_shows_apts_error_and_stops_the_script(stub: Path) -> None:
    (stub / "install-fails").write_text("2")
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "Installing Debian's chromium ...")
    assert r.returncode == 100
    assert r.stdout == "Installing Debian's chromium ...\n"  # not "after": set -e stops there
    assert r.stderr == "E: Unable to locate package\n"  # the second try's, for the person at the keyboard
    (stub / "install-fails").write_text("2")
    hint = "Could not install chromium, which the browser tests need: ... ./test -m \"not e2e\"."
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "", "", "", hint)  # with what needs it and the fix
    assert (r.returncode, r.stdout, r.stderr) == (100, "", f"E: Unable to locate package\n{hint}\n")


def test_test_names_what_needs_each_required_package_and_the_way_around() -> None:
    text = (ROOT / "test").read_text()
    assert 'or run the other tests with ./test -m \\"not e2e\\"' in text
    assert 'or run the other tests with ./test -m \\"not spark\\"' in text



def test_a_required_install_without_updated_package_lists_goes_on(stub: Path) -> None:
    """Offline, or no sudo: the package lists cannot be updated; apt's (or sudo's) message is shown and
    the script goes on without the package (as ./test always did: its tests then say what is missing)."""
    (stub / "update-fails").touch()
    (stub / "install-fails").write_text("1")
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "")
    assert (r.returncode, r.stdout, r.stderr) == (0, "after\n", "E: update failed\n")
    assert log(stub) == [f"sudo -n {INSTALL} chromium", f"{INSTALL} chromium", "sudo -n apt-get update",
                         "apt-get update"]
    # sudo that needs a password: sudo -n fails as the real one does (a stub, never a deletion, which
    # would leave the machine's own sudo and apt-get on PATH, review finding); nothing is asked, sudo's
    # message is shown and the script goes on
    (stub / "bin" / "sudo").write_text('#!/bin/sh\necho "sudo $*" >> "$STUB/log"\n'
                                       'echo "sudo: a password is required" >&2\nexit 1\n')
    (stub / "log").unlink()
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "")
    assert (r.returncode, r.stdout, r.stderr) == (0, "after\n", "sudo: a password is required\n")
    assert log(stub) == [f"sudo -n {INSTALL} chromium", "sudo -n apt-get update"]
    # with what needs the package and the fix: said there too (it was said only when the install itself failed)
    fix = "Could not install chromium: install it (sudo apt-get install chromium), or use ./test -m \"not e2e\"."
    r = apt_install(stub, "chromium", "/nonexistent/chromium", "", "", "", fix)
    assert (r.returncode, r.stdout, r.stderr) == (0, "after\n", f"sudo: a password is required\n{fix}\n")


def test_an_optional_package_never_prompts_never_fails_and_is_tried_once_per_venv(stub: Path) -> None:
    (stub / "install-fails").write_text("2")
    args = ("chromium-headless-shell", "/nonexistent/chromium-headless-shell", "Installing the shell ...",
            "optional", ".venv/.no-headless-shell", "(not installed: the tests use chromium)")
    (stub.parent / ".venv").mkdir()
    r = apt_install(stub, *args)
    assert (r.returncode, r.stderr) == (0, "")  # apt's output hidden, the script goes on
    assert r.stdout == "Installing the shell ...\n(not installed: the tests use chromium)\nafter\n"
    assert log(stub) == [f"sudo -n {INSTALL} chromium-headless-shell", f"{INSTALL} chromium-headless-shell",
                         "sudo -n apt-get update", "apt-get update",
                         f"sudo -n {INSTALL} chromium-headless-shell", f"{INSTALL} chromium-headless-shell"]
    assert (stub.parent / ".venv" / ".no-headless-shell").exists()
    r = apt_install(stub, *args)  # the next run: not tried again
    assert (r.returncode, r.stdout, r.stderr) == (0, "after\n", "")
    assert len(log(stub)) == 6
    (stub.parent / ".venv" / ".no-headless-shell").unlink()  # a new .venv: tried again, and installed
    r = apt_install(stub, *args)
    assert (r.returncode, r.stdout) == (0, "Installing the shell ...\nafter\n")
    assert not (stub.parent / ".venv" / ".no-headless-shell").exists()
    (stub / "update-fails").touch()  # without a marker or a note: only the status says nothing happened
    (stub / "install-fails").write_text("2")
    r = apt_install(stub, "python3-venv", "", "", "optional")
    assert (r.returncode, r.stdout, r.stderr) == (0, "after\n", "")
    assert log(stub)[-3:] == [f"{INSTALL} python3-venv", "sudo -n apt-get update", "apt-get update"]


def test_apt_is_called_only_through_apt_install() -> None:
    """One copy of the rule: ./run, ./test and the scripts call apt_install, which alone runs apt-get."""
    for path in (ROOT / "run", ROOT / "test", *sorted((ROOT / "scripts").glob("*.sh"))):
        body = path.read_text()
        if path == VENV_SH:
            start = body.index("apt_install() {")
            body = body[:start] + body[body.index("\n}\n", start):]
        body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
        assert "--no-install-recommends" not in body and "apt-get update" not in body, path


def make_venv(stub: Path, python: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_bash(stub, 'make_venv ./run; echo "after"', python=python, env=env)


def test_the_scripts_python_bound_is_pyprojects() -> None:
    import tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f"PYTHON_MIN={requires.removeprefix('>=')}\n" in VENV_SH.read_text()


@pytest.mark.parametrize("version", ["3.10", "3.9", "2.7"])
def test_make_venv_refuses_a_python_older_than_the_projects(stub: Path, version: str) -> None:
    r = make_venv(stub, version)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"python3 is Python {version}; dpcore needs Python 3.11 or newer: install it (on Debian or "
                        "Ubuntu: sudo apt-get install python3, from Debian 12 or Ubuntu 24.04 on), or name another "
                        "Python with PYTHON=/path/to/python3.11 ./run\n")
    assert not (stub.parent / ".venv").exists()
    assert [line for line in log(stub) if "venv" in line or "apt" in line] == []  # nothing made, nothing installed


@pytest.mark.parametrize("version", ["3.11", "3.13", "4.0"])
def test_make_venv_makes_the_venv_with_a_recent_python(stub: Path, version: str) -> None:
    r = make_venv(stub, version)
    assert (r.returncode, r.stdout, r.stderr) == (0, "Creating .venv ...\nafter\n", "")
    assert (stub.parent / ".venv" / "bin" / "python").exists()
    assert log(stub)[-1] == "python3 -m venv .venv"
    r = make_venv(stub, "3.9")  # an existing .venv is used as it is, whatever python3 is now
    assert (r.returncode, r.stdout) == (0, "after\n")


def test_make_venv_names_the_python_it_could_not_run(stub: Path) -> None:
    r = make_venv(stub, "3.12", PYTHON="/nonexistent/python3")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == ("Could not run /nonexistent/python3: install Python 3.11 or newer, or name another Python "
                        "with PYTHON=/path/to/python3.11 ./run\n")
    assert not (stub.parent / ".venv").exists()


@pytest.mark.parametrize("version", ["PyPy 7.3", "3", "", "3.x"])
def test_make_venv_refuses_a_version_it_cannot_read(stub: Path, version: str) -> None:
    """Before, ``[`` failed on such text, ``if`` read the failure as false, and the check passed."""
    r = make_venv(stub, version)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"Could not read the version of python3 (it printed '{version}'): install Python 3.11 or "
                        "newer, or name another Python with PYTHON=/path/to/python3.11 ./run\n")
    assert not (stub.parent / ".venv").exists()


def test_make_venv_installs_debians_venv_module_without_a_prompt(stub: Path) -> None:
    (stub / "venv-fails").touch()
    r = make_venv(stub, "3.11")
    assert (r.returncode, r.stdout, r.stderr) == (0, "Creating .venv ...\nafter\n", "")
    assert [line for line in log(stub) if "python3 -c" not in line] == [
        "python3 -m venv .venv", f"sudo -n {INSTALL} python3-venv", f"{INSTALL} python3-venv", "python3 -m venv .venv"]
    assert (stub.parent / ".venv" / "bin" / "python").exists()


def test_make_venv_without_the_venv_module_names_the_fix(stub: Path) -> None:
    (stub / "venv-fails").touch()
    (stub / "install-fails").write_text("2")
    r = make_venv(stub, "3.11")
    assert r.returncode == 1 and r.stdout == "Creating .venv ...\n"
    assert r.stderr.endswith("Could not create .venv with python3: install Python 3.11+ with its venv module (on "
                             "Debian or Ubuntu: sudo apt-get install python3-venv), or name another Python with "
                             "PYTHON=/path/to/python3.11 ./run\n")
    assert not (stub.parent / ".venv").exists()


def _selected(*args: str) -> tuple[bool, bool]:
    """What ./test would install for ``args`` (chromium, Java), from the repository's root."""
    out = subprocess.run([shutil.which("bash"), "-c",
                          f". '{VENV_SH}'; selects e2e tests/e2e \"$@\" && echo chromium; "
                          "selects spark '' \"$@\" && echo java; true", "bash", *args],
                         cwd=VENV_SH.parents[1], capture_output=True, text=True, timeout=60, check=True)
    return "chromium" in out.stdout.split(), "java" in out.stdout.split()


@pytest.mark.parametrize(("args", "chromium", "java"), [
    ((), True, True),  # the whole suite (CI)
    (("tests",), True, True),
    ((".",), True, True),
    (("tests/e2e/test_workers_browser.py::test_two",), True, True),
    (("--durations", "5", "tests/e2e"), True, True),
    (("-m", "e2e"), True, True),
    (("no/such/path",), True, True),  # not a path: not read as one
    (("tests/unit",), False, True),  # Spark's tests are among the unit tests
    (("-n", "0", "tests/app/test_serve.py"), False, True),
    (("-k", "tests/e2e", "tests/app"), False, True),  # -k's value is no path
    (("-m", "not e2e"), False, True),
    (("-mnot e2e",), False, True),
    (("tests/unit", "-m", "not spark"), False, False),
    (("-m", "not e2e and not spark", "tests"), False, False),
])
def test_test_installs_only_what_the_chosen_tests_may_need(args: tuple[str, ...], chromium: bool, java: bool) -> None:
    """./test tests/unit needs no browser: no sudo for chromium (review leftover); a whole run installs both."""
    assert _selected(*args) == (chromium, java)
    script = (VENV_SH.parents[1] / "test").read_text()
    assert 'if selects e2e tests/e2e "$@"; then\n    apt_install chromium ' in script
    assert 'if selects spark "" "$@"; then\n    apt_install openjdk-17-jre-headless ' in script
