# Sourced by ./run and ./test (one copy of the rule): make .venv with $PYTHON (default python3) when
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
