#!/usr/bin/env bash
# Create .venv and install the project (with the test extra when asked). Idempotent and quiet.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extra="${1:-}"
python="${PYTHON:-python3}"
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "setup: Python 3.11 or newer is needed (found $("$python" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.installed${extra:+-$extra}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  if [ -n "$extra" ]; then
    .venv/bin/python -m pip install -q -e ".[$extra]"
  else
    .venv/bin/python -m pip install -q -e .
  fi
  touch "$stamp"
fi
