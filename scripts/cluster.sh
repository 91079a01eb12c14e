#!/usr/bin/env bash
# A Samvad cluster on one machine: Neo4j, N nodes and HAProxy (deploy/haproxy.cfg), on loopback.
#
#   bash scripts/cluster.sh start        Neo4j (unless NEO4J_URI is given), the nodes, HAProxy
#   bash scripts/cluster.sh status       each node's /health and HAProxy's view
#   bash scripts/cluster.sh drain N      POST /admin/drain on node N (its sessions move, 4307)
#   bash scripts/cluster.sh restart N    drain node N, stop it (SIGTERM), start it again
#   bash scripts/cluster.sh rolling      restart every node in turn, each once HAProxy sees the last up
#   bash scripts/cluster.sh stop         stop HAProxy and the nodes (and Neo4j if this script started it)
#
# Settings (environment): CLUSTER_DIR (var/cluster: pids, logs, the shared secret), CLUSTER_PORT (19100:
# HAProxy; nodes on +1..+N, HAProxy's stats on +99), CLUSTER_NODES (3; deploy/haproxy.cfg names three),
# NEO4J_URI, and any Samvad setting, passed to every node. Every node gets the same SAMVAD_SECRET (a
# token issued by one is checked by another) and its own CLUSTER_NODE_ID (n1..nN).
# Then: `samvad bots --url http://127.0.0.1:19100 --sessions 300` drives it through HAProxy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dir="${CLUSTER_DIR:-$root/var/cluster}"
port="${CLUSTER_PORT:-19100}"
nodes="${CLUSTER_NODES:-3}"
python="${PYTHON:-$root/.venv/bin/python}"
mkdir -p "$dir"

[ -f "$dir/secret" ] || "$python" -c 'import secrets; print(secrets.token_urlsafe(48))' >"$dir/secret"
export SAMVAD_SECRET="${SAMVAD_SECRET:-$(cat "$dir/secret")}"
export SAMVAD_LB_BIND="127.0.0.1:$port" SAMVAD_LB_STATS="127.0.0.1:$((port + 99))"
for i in 1 2 3; do export "SAMVAD_NODE$i=127.0.0.1:$((port + i))"; done

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

healthy() {  # wait until node $1 answers /health with 200
  local deadline=$((SECONDS + ${2:-60}))
  until curl -fs -o /dev/null "http://127.0.0.1:$((port + $1))/health"; do
    alive "$dir/n$1.pid" || { echo "cluster: node n$1 exited:"; tail -n 30 "$dir/n$1.log"; return 1; } >&2
    [ $SECONDS -lt $deadline ] || { echo "cluster: node n$1 not healthy" >&2; return 1; }
    sleep 0.2
  done
}

lb_sees_up() {  # wait until HAProxy marks node $1 UP (or DOWN with $2=DOWN)
  local want="${2:-UP}" deadline=$((SECONDS + 30))
  until curl -fsS "http://$SAMVAD_LB_STATS/stats;csv" 2>/dev/null | grep -q "^nodes,n$1,.*,$want,"; do
    [ $SECONDS -lt $deadline ] || { echo "cluster: HAProxy does not see n$1 $want" >&2; return 1; }
    sleep 0.2
  done
}

start_node() {
  local i="$1"
  alive "$dir/n$i.pid" && return 0
  # HAProxy on loopback is the one proxy whose X-Forwarded-For the nodes believe.
  CLUSTER_NODE_ID="n$i" MIRROR=neo4j NEO4J_URI="$NEO4J_URI" HOST=127.0.0.1 \
    TRUSTED_PROXIES="${TRUSTED_PROXIES:-127.0.0.1/32}" \
    setsid "$python" -m server.cli serve --port "$((port + i))" >>"$dir/n$i.log" 2>&1 &
  echo $! >"$dir/n$i.pid"
}

stop_pid() {  # SIGTERM, then SIGKILL after $2 seconds
  local file="$1" wait="${2:-20}"
  alive "$file" || { rm -f "$file"; return 0; }
  local pid; pid="$(cat "$file")"
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $((wait * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

admin() { [ -n "${ADMIN_KEY:-}" ] && echo "Authorization: Bearer $ADMIN_KEY" || echo "X-No-Admin: 1"; }

case "${1:-}" in
  start)
    if [ -z "${NEO4J_URI:-}" ]; then
      NEO4J_PORT="${NEO4J_PORT:-$((port + 98))}" NEO4J_DATA_DIR="${NEO4J_DATA_DIR:-$dir/neo4j}" \
        bash scripts/neo4j.sh start >/dev/null
      export NEO4J_URI="bolt://127.0.0.1:${NEO4J_PORT:-$((port + 98))}"
      echo "${NEO4J_PORT:-$((port + 98))}" >"$dir/neo4j.port"
    fi
    echo "$NEO4J_URI" >"$dir/neo4j.uri"
    for i in $(seq "$nodes"); do start_node "$i"; done
    for i in $(seq "$nodes"); do healthy "$i"; done
    if ! alive "$dir/haproxy.pid"; then
      "${HAPROXY:-$(command -v haproxy || echo /usr/sbin/haproxy)}" -db -f deploy/haproxy.cfg >>"$dir/haproxy.log" 2>&1 &
      echo $! >"$dir/haproxy.pid"
    fi
    for i in $(seq "$nodes"); do lb_sees_up "$i"; done
    echo "cluster: $nodes nodes behind http://$SAMVAD_LB_BIND (stats http://$SAMVAD_LB_STATS/stats)"
    ;;
  status)
    for i in $(seq "$nodes"); do
      printf 'n%s ' "$i"; curl -sS "http://127.0.0.1:$((port + i))/health" || echo "(down)"; echo
    done
    curl -fsS "http://$SAMVAD_LB_STATS/stats;csv" | awk -F, '$1=="nodes" && $2!="BACKEND" {print $2, $18}'
    ;;
  drain)
    curl -fsS -X POST -H "$(admin)" "http://127.0.0.1:$((port + $2))/admin/drain"; echo
    ;;
  restart)
    NEO4J_URI="$(cat "$dir/neo4j.uri")"
    curl -fsS -X POST -H "$(admin)" "http://127.0.0.1:$((port + $2))/admin/drain" >/dev/null || true
    stop_pid "$dir/n$2.pid"
    start_node "$2"
    healthy "$2"
    lb_sees_up "$2"
    ;;
  rolling)
    for i in $(seq "$nodes"); do bash "$0" restart "$i"; done
    ;;
  stop)
    stop_pid "$dir/haproxy.pid" 5
    for i in $(seq "$nodes"); do stop_pid "$dir/n$i.pid"; done
    if [ -f "$dir/neo4j.port" ]; then
      NEO4J_PORT="$(cat "$dir/neo4j.port")" NEO4J_DATA_DIR="${NEO4J_DATA_DIR:-$dir/neo4j}" \
        bash scripts/neo4j.sh stop >/dev/null || true
      rm -f "$dir/neo4j.port"
    fi
    ;;
  *)
    sed -n '2,17p' "$0"; exit 2
    ;;
esac
