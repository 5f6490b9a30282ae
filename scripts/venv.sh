# shellcheck shell=bash
# Sourced by ./run and ./test (one copy of each rule).

# apt_install PACKAGE PRESENT MESSAGE [optional [MARKER [NOTE]]]: install Debian's PACKAGE with
# `apt-get install -y --no-install-recommends` (and `apt-get update` first only when that fails) unless
# PRESENT shows it is there: an absolute path to an executable file, or a command on PATH ("": no check,
# always try). MESSAGE ("": none) is printed before apt runs. As root apt runs directly, otherwise
# through `sudo -n`: never a password prompt (a script that stops to ask for one hangs in CI and
# surprises a person who ran ./test); where sudo needs a password it fails, and NOTE says the fix.
# - required (the default): apt's (or sudo's) errors are shown. When the package lists cannot be
#   updated (offline, or sudo needs a password) NOTE (when given: what needs the package and how to
#   install it, or what to run instead) is printed to stderr and the script goes on without the package;
#   when they were updated and the package still cannot be installed, NOTE is printed and apt's status
#   returned, which stops a `set -e` script.
# - optional: apt's output hidden; never fails. On failure MARKER (when given) is touched, which skips
#   the package on later runs while it exists (tried once per .venv), and NOTE is printed.
# The install waits up to 2 minutes for dpkg's lock (on a fresh VM unattended-upgrades often holds it,
# and an install that failed at once stopped ./test after a successful update). Where there is no sudo
# at all (not root), NOTE's "sudo apt-get" reads "as root: apt-get".
apt_install() {
    local package="$1" present="$2" message="$3" optional="${4:-}" marker="${5:-}" note="${6:-}" sudo=""
    local install=(apt-get install -o DPkg::Lock::Timeout=120 -y --no-install-recommends "$package")
    case "$present" in
        "") ;;
        /*) [ -x "$present" ] && return 0 ;;
        *) command -v "$present" >/dev/null 2>&1 && return 0 ;;
    esac
    if [ -n "$optional" ] && [ -n "$marker" ] && [ -e "$marker" ]; then return 0; fi
    if [ -n "$message" ]; then echo "$message"; fi
    if [ "$(id -u)" != "0" ]; then
        sudo="sudo -n"
        command -v sudo >/dev/null 2>&1 || note="${note//sudo apt-get/as root: apt-get}"
    fi
    if [ -z "$optional" ]; then
        $sudo "${install[@]}" >/dev/null 2>&1 && return 0
        # package lists that cannot be updated (offline, sudo that needs a password): apt's or sudo's
        # message is shown and the script goes on without the package, whose tests then say what is missing
        $sudo apt-get update >/dev/null || { if [ -n "$note" ]; then echo "$note" >&2; fi; return 0; }
        $sudo "${install[@]}" >/dev/null && return 0
        local status=$?
        if [ -n "$note" ]; then echo "$note" >&2; fi
        return "$status"
    fi
    $sudo "${install[@]}" >/dev/null 2>&1 \
        || { $sudo apt-get update >/dev/null 2>&1 && $sudo "${install[@]}" >/dev/null 2>&1; } \
        || { if [ -n "$marker" ]; then touch "$marker"; fi
             if [ -n "$note" ]; then echo "$note"; fi; }
}

# selects MARKER DIR [PYTEST ARGS...]: whether pytest with these arguments may run tests marked MARKER,
# so that ./test installs only what the chosen tests need (chromium for e2e, Java for spark). No when
# `-m` says "not MARKER"; no when paths are named (files or folders that exist, `::test` ignored) and
# none of them holds DIR or lies inside it (DIR "": the marked tests may be anywhere). Otherwise yes:
# a whole run, `-k`, or a marker expression it cannot read installs as before.
selects() {
    local marker="$1" dir="$2" arg path prev="" paths=0 inside=0 want=""
    shift 2
    [ -n "$dir" ] && want=$(realpath -m "$dir")
    for arg in "$@"; do
        case "$prev" in -m) case "$arg" in *"not $marker"*) return 1 ;; esac ;; esac
        case "$arg" in -m*"not $marker"*) return 1 ;; esac
        case "$prev" in -m|-k|-n|-p|-c|-o|--rootdir|--durations|--maxfail|--dist|--deselect|--ignore) prev=""; continue ;; esac
        prev="$arg"
        case "$arg" in -*) continue ;; esac
        path="${arg%%::*}"
        [ -e "$path" ] || continue
        paths=1
        path=$(realpath -m "$path")
        if [ -z "$want" ] || [ "$path" = "$want" ] || [[ "$want" == "$path"/* ]] || [[ "$path" == "$want"/* ]]; then
            inside=1
        fi
    done
    [ "$paths" = 0 ] || [ "$inside" = 1 ]
}

# The oldest Python the project runs on: pyproject.toml's requires-python (tests/unit/test_scripts.py
# checks that they agree).
PYTHON_MIN=3.11

# make_venv: make .venv with $PYTHON (default python3) when it is missing; a Python older than
# $PYTHON_MIN is refused before anything is made, with a message naming the fix. Debian and Ubuntu
# ship venv apart from python3: it is installed through apt when needed (as root, or sudo without a
# prompt: optional, since a failure is followed by a message naming the fix).
make_venv() {
    local script="$1" py="${PYTHON:-python3}" version major minor
    [ -x .venv/bin/python ] && return 0
    local fix="or name another Python with PYTHON=/path/to/python$PYTHON_MIN ./${script##*/}"
    if ! version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
        echo "Could not run $py: install Python $PYTHON_MIN or newer, $fix" >&2
        exit 1
    fi
    if ! [[ "$version" =~ ^[0-9]+\.[0-9]+$ ]]; then
        echo "Could not read the version of $py (it printed '$version'): install Python $PYTHON_MIN or newer, $fix" >&2
        exit 1
    fi
    IFS=. read -r major minor <<< "$version"
    if [ "$major" -lt "${PYTHON_MIN%.*}" ] \
        || { [ "$major" -eq "${PYTHON_MIN%.*}" ] && [ "$minor" -lt "${PYTHON_MIN#*.}" ]; }; then
        echo "$py is Python $version; dpcore needs Python $PYTHON_MIN or newer: install it (on Debian or Ubuntu: sudo apt-get install python3, from Debian 12 or Ubuntu 24.04 on), $fix" >&2
        exit 1
    fi
    echo "Creating .venv ..."
    if "$py" -m venv .venv >/dev/null 2>&1; then
        return 0
    fi
    rm -rf .venv
    apt_install python3-venv "" "" optional
    "$py" -m venv .venv || {
        rm -rf .venv
        echo "Could not create .venv with $py: install Python $PYTHON_MIN+ with its venv module (on Debian or Ubuntu: sudo apt-get install python3-venv), $fix" >&2
        exit 1
    }
}

# Install the pinned requirements into .venv when they changed since the last install
# (`install_requirements STAMP MESSAGE REQ...`): the REQ files are concatenated and compared with the
# stamp; pip installs the last REQ, which includes the others. --no-compile: Python compiles the
# modules it imports on first use (about 1 s once) instead of pip compiling every file of every
# package at install (about 20 s of a 51-s install, Spark's and plotly's thousands of files among them).
install_requirements() {
    local stamp="$1" message="$2"; shift 2
    local last="${!#}"
    if cat "$@" | cmp -s - "$stamp" 2>/dev/null; then
        return 0
    fi
    echo "$message"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet --no-compile -r "$last"
    cat "$@" > "$stamp"
}
