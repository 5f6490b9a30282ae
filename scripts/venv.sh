# Sourced by ./run and ./test (one copy of each rule). make_venv: make .venv with $PYTHON (default python3) when
# it is missing. Debian and Ubuntu ship venv apart from python3: it is installed through apt when
# needed (as root, or sudo without a prompt); otherwise a message names the fix.
make_venv() {
    local script="$1" py="${PYTHON:-python3}" sudo=""
    [ -x .venv/bin/python ] && return 0
    echo "Creating .venv ..."
    if "$py" -m venv .venv >/dev/null 2>&1; then
        return 0
    fi
    rm -rf .venv
    if [ "$(id -u)" != "0" ]; then sudo="sudo -n"; fi
    { $sudo apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1 \
        || { $sudo apt-get update >/dev/null 2>&1 \
             && $sudo apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1; }; } || true
    "$py" -m venv .venv || {
        rm -rf .venv
        echo "Could not create .venv with $py: install Python 3.11+ with its venv module (on Debian or Ubuntu: sudo apt-get install python3-venv), or name another Python with PYTHON=/path/to/python3 ./${script##*/}" >&2
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
