#!/usr/bin/env bash
# Set up everything the tests need and run the whole suite:
#   system packages (chromium, mono, Java/Maven, espeak-ng, HAProxy) when missing, .venv with the test
#   extra, helm built from its Go module with the machine's Go (scripts/tools.sh),
#   a real Neo4j built from Maven Central and started on a loopback port, then ruff and pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k rules -x`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mkdir -p var artifacts

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v mcs >/dev/null 2>&1 || need+=(mono-devel)
# Debian 12 installs it as /usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll (see its .pc file).
compgen -G "/usr/lib/cli/Newtonsoft.Json*/Newtonsoft.Json.dll" >/dev/null || need+=(libnewtonsoft-json-cil-dev)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
{ [ -x /usr/sbin/haproxy ] || command -v haproxy >/dev/null 2>&1; } || need+=(haproxy)  # tests/test_cluster.py routes through the real HAProxy
command -v curl >/dev/null 2>&1 || need+=(curl)  # scripts/cluster.sh
command -v espeak-ng >/dev/null 2>&1 || need+=(espeak-ng)  # the embedded TTS (docs/voice.md)
# Its library, loaded through ctypes for phoneme timings (voice/espeak_lib.py); espeak-ng depends on it.
compgen -G "/usr/lib/*/libespeak-ng.so.1" >/dev/null || need+=(libespeak-ng1)
if [ ${#need[@]} -gt 0 ]; then
  echo "test: installing system packages: ${need[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >var/apt.log 2>&1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >>var/apt.log 2>&1 \
    || { tail -n 30 var/apt.log; echo "test: apt-get install failed" >&2; exit 1; }
fi

bash scripts/setup.sh test
export PATH="$root/.venv/bin:$PATH"
# helm for the chart's tests (tests/test_helm_chart.py), built once and cached in var/tools. Debian's
# Go is too old for it; this kind of machine has Go 1.26 in /usr/local/go. Without it the chart's tests
# fail (in CI) or skip (elsewhere) saying so, and the rest of the suite still runs.
bash scripts/tools.sh >/dev/null || echo "test: helm could not be built (scripts/tools.sh); the chart's tests will say so" >&2

if [ -f scripts/neo4j.sh ]; then
  export NEO4J_PORT="${NEO4J_TEST_PORT:-7688}"
  export NEO4J_DATA_DIR="${NEO4J_TEST_DATA_DIR:-$root/var/neo4j-test}"
  # A run killed outright (SIGKILL: the EXIT trap below never runs) leaves its Neo4j on 7688, and
  # another checkout's would then refuse to start. Unless a port was asked for, take a free one.
  if [ -z "${NEO4J_TEST_PORT:-}" ] && (exec 3<>"/dev/tcp/127.0.0.1/$NEO4J_PORT") 2>/dev/null \
      && ! bash scripts/neo4j.sh status >/dev/null 2>&1; then
    taken="$NEO4J_PORT"
    NEO4J_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    echo "test: port $taken is in use by another process (a Neo4j left by a killed run?); using $NEO4J_PORT" >&2
  fi
  bash scripts/neo4j.sh start
  trap 'bash scripts/neo4j.sh stop >/dev/null 2>&1 || true' EXIT
  export SAMVAD_TEST_NEO4J_URI="bolt://127.0.0.1:${NEO4J_PORT}"
fi

echo "test: ruff"
ruff check schemas session brain server voice clients privates tests benchmarks

echo "test: mypy (strict)"
mypy

echo "test: pytest"
set +e
python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$status"
