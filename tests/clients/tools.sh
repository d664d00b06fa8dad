# shellcheck shell=bash
# Shared by tests/clients/lint and tests/clients/run (sourced, not run): checks for Node and
# Python and installs the pinned tools. Expects $here (tests/clients). Sets $work, a temporary
# directory removed on exit, and $venv.

: "${here:?tools.sh expects \$here}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv="$here/python/.venv"

need_node() {
  # Redocly CLI 2 needs Node.js 20.19 or later.
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1 \
    || ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
    cat >&2 <<'EOF'
clients: node and npm are needed (Node.js 20.19 or later, npm 10 or later); they were not found, or are older.
Install Node.js, then run this again:
  - Debian or Ubuntu:  apt-get install nodejs npm   (check `node --version`; if it is older,
                       use NodeSource's packages or nvm)
  - macOS:             brew install node
  - any system:        https://nodejs.org/en/download, or nvm: `nvm install 22`
EOF
    exit 2
  fi
}

need_python() {
  if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    cat >&2 <<'EOF'
clients: python3 (3.11 or later, with the venv module) is needed and was not found.
  - Debian or Ubuntu:  apt-get install python3 python3-venv
  - macOS:             brew install python
EOF
    exit 2
  fi
}

# `npm ci` from package-lock.json, skipped while node_modules holds what that lock file names.
npm_tools() {
  local stamp="$here/node_modules/.intent-lock-stamp"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$here/package-lock.json"; then
    echo "node_modules matches package-lock.json"
    return
  fi
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$stamp"
}

# A venv at python/.venv with python/requirements.txt, skipped while it holds that file's pins.
python_tools() {
  local requirements="$here/python/requirements.txt" stamp="$venv/.intent-requirements-stamp"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$requirements"; then
    echo "python/.venv matches python/requirements.txt"
    return
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  "$venv/bin/python" -m pip check --disable-pip-version-check >/dev/null
  cp "$requirements" "$stamp"
}

# Redocly CLI's own notices: no telemetry, no update check.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
