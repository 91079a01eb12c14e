#!/usr/bin/env bash
# Set up and run the server on its embedded defaults: rule-based brain, no database, no key.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
exec "$root/.venv/bin/samvad" serve "$@"
