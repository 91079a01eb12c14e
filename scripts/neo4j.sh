#!/usr/bin/env bash
# Local Neo4j 5 (Community, embedded) for development and CI, without Docker.
#
#   scripts/neo4j.sh build                          build neo4j-launcher if needed
#   scripts/neo4j.sh start [--port P] [--data DIR]  start in the background, print the bolt URI
#   scripts/neo4j.sh stop                           SIGTERM, wait, SIGKILL as a last resort
#   scripts/neo4j.sh status                         exit 0 running, 3 not running, 1 not answering
#   scripts/neo4j.sh run [--port P] [--data DIR]    run in the foreground (Ctrl-C stops it)
#
# Environment: NEO4J_PORT (7687), NEO4J_DATA_DIR (<repo>/var/neo4j), NEO4J_HEAP (768m),
# NEO4J_START_TIMEOUT (120 s), NEO4J_STOP_TIMEOUT (60 s), NEO4J_JAVA_OPTS (extra JVM flags).
# See docs/neo4j.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAUNCHER_DIR="$ROOT/neo4j-launcher"
JAR="$LAUNCHER_DIR/target/neo4j-launcher.jar"
VAR_DIR="$ROOT/var"
PID_FILE="$VAR_DIR/neo4j.pid"
LOG_FILE="$VAR_DIR/neo4j.log"
LOCK_FILE="$VAR_DIR/neo4j.lock"

PORT="${NEO4J_PORT:-7687}"
DATA_DIR="${NEO4J_DATA_DIR:-$ROOT/var/neo4j}"
HEAP="${NEO4J_HEAP:-768m}"
START_TIMEOUT="${NEO4J_START_TIMEOUT:-120}"
STOP_TIMEOUT="${NEO4J_STOP_TIMEOUT:-60}"

die() { echo "neo4j.sh: $*" >&2; exit 1; }
say() { echo "neo4j.sh: $*" >&2; }

usage() {
    sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

parse_opts() {
    while (($#)); do
        case "$1" in
            --port) (($# >= 2)) || die "--port needs a value"; PORT="$2"; shift 2 ;;
            --data) (($# >= 2)) || die "--data needs a value"; DATA_DIR="$2"; shift 2 ;;
            *) die "unknown option: $1" ;;
        esac
    done
    [[ "$PORT" =~ ^[0-9]{1,5}$ ]] || die "invalid port: $PORT"
    PORT=$((10#$PORT))
    ((PORT >= 1 && PORT <= 65535)) || die "invalid port: $PORT"
    [[ "$DATA_DIR" == /* ]] || DATA_DIR="$PWD/$DATA_DIR"
}

require_java() {
    command -v java >/dev/null 2>&1 ||
        die "java not found; install a JDK 17+ (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)"
    local version major
    version="$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
    major="${version%%.*}"
    if ! [[ "$major" =~ ^[0-9]+$ ]] || ((major < 17)); then
        die "java 17+ required, found '$version'"
    fi
}

require_mvn() {
    command -v mvn >/dev/null 2>&1 ||
        die "mvn not found; install Maven 3.6.3+ (Debian/Ubuntu: apt-get install maven)"
}

needs_build() {
    [[ ! -f "$JAR" || ! -d "$LAUNCHER_DIR/target/lib" ]] && return 0
    [[ -n "$(find "$LAUNCHER_DIR/pom.xml" "$LAUNCHER_DIR/src" -newer "$JAR" -print -quit)" ]]
}

build() {
    needs_build || return 0
    require_java
    require_mvn
    local mvn=(mvn -q -B -f "$LAUNCHER_DIR/pom.xml" -DskipTests)
    local started=$SECONDS
    # With a warm ~/.m2 build offline (no network needed); otherwise let Maven download.
    if [[ -d "$HOME/.m2/repository/org/neo4j/neo4j" ]]; then
        say "building neo4j-launcher"
        if ! "${mvn[@]}" -o package >/dev/null 2>&1; then
            say "offline build failed; retrying online"
            "${mvn[@]}" package || die "maven build failed"
        fi
    else
        say "building neo4j-launcher (first build: ~175 MB from Maven Central into ~/.m2, ~1 min)"
        "${mvn[@]}" package || die "maven build failed"
    fi
    # The jar plugin leaves an up-to-date jar untouched; mark it as built now.
    touch "$JAR"
    say "built $JAR in $((SECONDS - started)) s"
}

java_opts() {
    # Keep -Xms <= -Xmx when NEO4J_HEAP is small.
    local xms=128m
    local n="${HEAP%[mMgG]}" unit="${HEAP: -1}"
    if [[ "$n" =~ ^[0-9]+$ ]]; then
        [[ "$unit" == [gG] ]] && n=$((n * 1024))
        ((n < 128)) && xms="$HEAP"
    fi
    JAVA_OPTS=(
        "-Xms$xms" "-Xmx$HEAP"
        -XX:+ExitOnOutOfMemoryError
        -XX:-OmitStackTraceInFastThrow
        -Dio.netty.tryReflectionSetAccessible=true
        -Djdk.nio.maxCachedBufferSize=1024
        -Dlog4j2.disable.jmx=true
        -Dfile.encoding=UTF-8
    )
    # Serial GC unless NEO4J_JAVA_OPTS picks another collector: on a small shared
    # machine it needs ~120 MB less RSS than G1 and no concurrent GC threads.
    [[ "${NEO4J_JAVA_OPTS:-}" == *-XX:+Use*GC* ]] || JAVA_OPTS+=(-XX:+UseSerialGC)
    # shellcheck disable=SC2206  # deliberate word splitting of user-supplied flags
    [[ -n "${NEO4J_JAVA_OPTS:-}" ]] && JAVA_OPTS+=(${NEO4J_JAVA_OPTS})
    # The jar's manifest carries the classpath (target/lib) and the --add-opens flags.
    JAVA_OPTS+=(-jar "$JAR" --port "$PORT" --data "$DATA_DIR")
}

alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local stat
    stat="$(ps -p "$1" -o stat= 2>/dev/null || true)"
    [[ -n "$stat" && "$stat" != Z* ]]
}

# Prints the pid from the pid file if that process is alive and is our launcher.
running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" ]] && alive "$pid" || return 1
    ps -p "$pid" -o args= 2>/dev/null | grep -q 'neo4j-launcher\.jar' || return 1
    echo "$pid"
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

ready_port() {
    sed -n 's|^NEO4J READY bolt://[^:]*:\([0-9]*\).*|\1|p' "$LOG_FILE" 2>/dev/null | tail -n 1
}

wait_ready() {
    local pid="$1" deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        grep -q '^NEO4J READY ' "$LOG_FILE" 2>/dev/null && return 0
        alive "$pid" || return 1
        sleep 0.2
    done
    return 1
}

lock() {
    mkdir -p "$VAR_DIR"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$LOCK_FILE"
        flock -w $((START_TIMEOUT + STOP_TIMEOUT)) 9 || die "another neo4j.sh holds $LOCK_FILE"
    fi
}

cmd_start() {
    parse_opts "$@"
    lock
    local pid
    if pid="$(running_pid)"; then
        wait_ready "$pid" || die "pid $pid is running but never became ready; see $LOG_FILE"
        local actual
        actual="$(ready_port)"
        [[ "$actual" == "$PORT" ]] ||
            die "already running (pid $pid) on port $actual, not $PORT; run '$0 stop' first"
        port_open "$actual" || die "pid $pid is running but port $actual does not answer; see $LOG_FILE"
        say "already running (pid $pid)"
        echo "bolt://127.0.0.1:$actual"
        return 0
    fi
    rm -f "$PID_FILE"
    port_open "$PORT" && die "port $PORT is already in use by another process"

    build
    require_java
    java_opts
    mkdir -p "$DATA_DIR"
    [[ -f "$LOG_FILE" ]] && mv -f "$LOG_FILE" "$LOG_FILE.1"
    local detach=()
    command -v setsid >/dev/null 2>&1 && detach=(setsid)
    local started=$SECONDS
    # Own session (no terminal signals), stdin closed, the lock fd not inherited.
    (cd "$ROOT" && exec nohup "${detach[@]}" java "${JAVA_OPTS[@]}" </dev/null >"$LOG_FILE" 2>&1 9>&-) &
    pid=$!
    echo "$pid" >"$PID_FILE"
    say "starting (pid $pid, data $DATA_DIR, log $LOG_FILE)"
    if ! wait_ready "$pid"; then
        if alive "$pid"; then
            say "neo4j did not become ready within ${START_TIMEOUT} s; last lines of $LOG_FILE:"
        else
            say "neo4j exited during start-up; last lines of $LOG_FILE:"
        fi
        tail -n 40 "$LOG_FILE" >&2 || true
        say "Neo4j's own log: $DATA_DIR/logs/debug.log"
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
            sleep 5
            if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
        fi
        rm -f "$PID_FILE"
        exit 1
    fi
    say "ready in $((SECONDS - started)) s"
    echo "bolt://127.0.0.1:$PORT"
}

cmd_stop() {
    (($# == 0)) || die "stop takes no options"
    lock
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PID_FILE"
        say "not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid" && ((SECONDS < deadline)); do
        sleep 0.2
    done
    if alive "$pid"; then
        say "pid $pid did not stop within ${STOP_TIMEOUT} s; sending SIGKILL (next start runs recovery)"
        kill -KILL "$pid" 2>/dev/null || true
        while alive "$pid"; do sleep 0.2; done
        rm -f "$PID_FILE"
        die "killed pid $pid: it did not shut down cleanly"
    fi
    rm -f "$PID_FILE"
    # The launcher's shutdown hook prints NEO4J STOPPED once the stores are closed.
    if ! grep -q '^NEO4J STOPPED' "$LOG_FILE" 2>/dev/null; then
        tail -n 20 "$LOG_FILE" >&2 2>/dev/null || true
        die "pid $pid exited without a clean shutdown; see $LOG_FILE"
    fi
    say "stopped cleanly (pid $pid)"
}

cmd_status() {
    (($# == 0)) || die "status takes no options"
    local pid port
    if ! pid="$(running_pid)"; then
        echo "neo4j: not running"
        return 3
    fi
    port="$(ready_port)"
    if [[ -n "$port" ]] && port_open "$port"; then
        echo "neo4j: running (pid $pid) at bolt://127.0.0.1:$port"
        return 0
    fi
    echo "neo4j: pid $pid alive but Bolt not answering (starting, or see $LOG_FILE)"
    return 1
}

cmd_run() {
    parse_opts "$@"
    if pid="$(running_pid)"; then
        die "already running in the background (pid $pid); run '$0 stop' first"
    fi
    build
    require_java
    java_opts
    mkdir -p "$DATA_DIR"
    cd "$ROOT"
    exec java "${JAVA_OPTS[@]}"
}

(($# >= 1)) || usage
command="$1"
shift
case "$command" in
    build) (($# == 0)) || die "build takes no options"; build ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    run) cmd_run "$@" ;;
    -h | --help | help) usage ;;
    *) say "unknown command: $command"; usage ;;
esac
