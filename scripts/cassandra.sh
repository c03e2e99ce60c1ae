#!/usr/bin/env bash
# A single local Apache Cassandra 5.0 node for airflow-atlas: tests, CI and users.
#
#   scripts/cassandra.sh fetch          resolve cassandra-all + runtime deps from Maven Central (cached)
#   scripts/cassandra.sh start [--fresh] start the node on 127.0.0.1 (9042 CQL, 7199 JMX), wait for CQL
#   scripts/cassandra.sh status         exit 0 when the node answers CQL
#   scripts/cassandra.sh stop           stop the node
#   scripts/cassandra.sh nodetool ARGS  run nodetool against the node
#   scripts/cassandra.sh log            print the tail of the node's system.log
#
# Environment (all optional):
#   ATLAS_CACHE_DIR          cache for jars (default ~/.cache/airflow-atlas)
#   ATLAS_CASSANDRA_DIR      node directory: data, logs, pid (default ${TMPDIR:-/tmp}/airflow-atlas-cassandra)
#   ATLAS_CASSANDRA_HEAP     heap size (default 1G)
#   ATLAS_CASSANDRA_TIMEOUT  seconds to wait for CQL (default 240)
#   ATLAS_CASSANDRA_JIT      c1 (default: quick start-up, what tests and CI use) or full (the JVM's normal
#                            tiered C1+C2 compilation, as a production node runs: slower to start, less CPU
#                            per request once warm; bench/run.py starts the node this way)
#   ATLAS_CASSANDRA_PORT_OFFSET  run a second, private node: adds N to every port (CQL 9042, storage 7000,
#                                JMX 7199); use it with its own ATLAS_CASSANDRA_DIR
#   ATLAS_CASSANDRA_CQL_PORT / ATLAS_CASSANDRA_STORAGE_PORT / ATLAS_CASSANDRA_JMX_PORT  one port explicitly
# With any port variable set, the node runs on a copy of cassandra.yaml rendered into its node directory
# (ports, seed and cluster name changed, so it never joins another local node); without, nothing changes.
set -euo pipefail

CASSANDRA_VERSION=5.0.7
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONF_SRC="$HERE/cassandra/conf"
CACHE_DIR="${ATLAS_CACHE_DIR:-$HOME/.cache/airflow-atlas}"
LIB_DIR="$CACHE_DIR/cassandra-$CASSANDRA_VERSION/lib"
NODE_DIR="${ATLAS_CASSANDRA_DIR:-${TMPDIR:-/tmp}/airflow-atlas-cassandra}"
PID_FILE="$NODE_DIR/cassandra.pid"
LOG_DIR="$NODE_DIR/logs"
HEAP="${ATLAS_CASSANDRA_HEAP:-1G}"
JIT="${ATLAS_CASSANDRA_JIT:-c1}"
TIMEOUT="${ATLAS_CASSANDRA_TIMEOUT:-240}"
CQL_HOST=127.0.0.1
PORT_OFFSET="${ATLAS_CASSANDRA_PORT_OFFSET:-0}"
[[ "$PORT_OFFSET" =~ ^[0-9]+$ ]] || { echo "[cassandra] ERROR: ATLAS_CASSANDRA_PORT_OFFSET must be a number" >&2; exit 64; }
CQL_PORT="${ATLAS_CASSANDRA_CQL_PORT:-$((9042 + PORT_OFFSET))}"
STORAGE_PORT="${ATLAS_CASSANDRA_STORAGE_PORT:-$((7000 + PORT_OFFSET))}"
JMX_PORT="${ATLAS_CASSANDRA_JMX_PORT:-$((7199 + PORT_OFFSET))}"
CONFIG_FILE="$CONF_SRC/cassandra.yaml"
if [[ "$CQL_PORT:$STORAGE_PORT:$JMX_PORT" != "9042:7000:7199" ]]; then
  CONFIG_FILE="$NODE_DIR/cassandra.yaml"
fi

say() { echo "[cassandra] $*" >&2; }
die() { echo "[cassandra] ERROR: $*" >&2; exit 1; }

case "$JIT" in c1 | full) ;; *) die "ATLAS_CASSANDRA_JIT must be c1 or full, got '$JIT'" ;; esac

read_options() {
  case "$JIT" in
    c1) grep -E '^-' "$1" | tr '\n' ' ' ;;
    full) grep -E '^-' "$1" | grep -v -- '-XX:TieredStopAtLevel=' | tr '\n' ' ' ;;
    *) die "ATLAS_CASSANDRA_JIT must be c1 or full, got '$JIT'" ;;
  esac
}

fetch() {
  if [[ -f "$LIB_DIR/.complete" ]]; then return 0; fi
  command -v mvn >/dev/null || die "Maven (mvn) is required to fetch Cassandra $CASSANDRA_VERSION"
  command -v java >/dev/null || die "Java 17 is required to run Cassandra $CASSANDRA_VERSION"
  say "resolving org.apache.cassandra:cassandra-all:$CASSANDRA_VERSION and runtime dependencies into $LIB_DIR"
  rm -rf "$LIB_DIR.tmp"
  mkdir -p "$LIB_DIR.tmp"
  mvn -q -B -f "$HERE/cassandra/pom.xml" -Dcassandra.version="$CASSANDRA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$LIB_DIR.tmp" \
    || die "Maven could not resolve cassandra-all $CASSANDRA_VERSION"
  [[ -f "$LIB_DIR.tmp/cassandra-all-$CASSANDRA_VERSION.jar" ]] || die "cassandra-all jar missing after resolution"
  rm -rf "$LIB_DIR"
  mv "$LIB_DIR.tmp" "$LIB_DIR"
  touch "$LIB_DIR/.complete"
}

# Speaks the CQL native protocol: sends OPTIONS, expects SUPPORTED. Exit 0 when CQL answers.
cql_answers() {
  python3 - "$CQL_HOST" "$CQL_PORT" <<'PY'
import socket, struct, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    s.sendall(struct.pack(">BBhBi", 0x04, 0, 0, 0x05, 0))
    header = b""
    while len(header) < 9:
        chunk = s.recv(9 - len(header))
        if not chunk:
            sys.exit(1)
        header += chunk
    sys.exit(0 if header[4] == 0x06 else 1)
except OSError:
    sys.exit(1)
PY
}

running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

log_tail() {
  if [[ -f "$LOG_DIR/system.log" ]]; then
    echo "----- last 40 lines of $LOG_DIR/system.log -----" >&2
    tail -n 40 "$LOG_DIR/system.log" >&2
  fi
  if [[ -f "$LOG_DIR/stdout.log" ]]; then
    echo "----- last 20 lines of $LOG_DIR/stdout.log -----" >&2
    tail -n 20 "$LOG_DIR/stdout.log" >&2
  fi
}

start() {
  local fresh=0
  [[ "${1:-}" == "--fresh" ]] && fresh=1
  if running_pid >/dev/null && cql_answers; then
    say "already running (pid $(cat "$PID_FILE")), CQL on $CQL_HOST:$CQL_PORT"
    return 0
  fi
  if cql_answers; then
    say "a CQL server already answers on $CQL_HOST:$CQL_PORT (not started by this script); using it"
    return 0
  fi
  fetch
  if running_pid >/dev/null; then
    say "pid $(cat "$PID_FILE") exists but CQL does not answer; stopping it first"
    stop
  fi
  (( fresh )) && rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR/data" "$LOG_DIR"
  if [[ "$CONFIG_FILE" != "$CONF_SRC/cassandra.yaml" ]]; then
    sed -e "s/^native_transport_port: 9042\$/native_transport_port: $CQL_PORT/" \
      -e "s/^storage_port: 7000\$/storage_port: $STORAGE_PORT/" \
      -e "s/seeds: \"127.0.0.1:7000\"/seeds: \"127.0.0.1:$STORAGE_PORT\"/" \
      -e "s/^cluster_name: airflow-atlas-local\$/cluster_name: airflow-atlas-local-$CQL_PORT/" \
      "$CONF_SRC/cassandra.yaml" >"$CONFIG_FILE"
    grep -q "^native_transport_port: $CQL_PORT\$" "$CONFIG_FILE" && grep -q "^storage_port: $STORAGE_PORT\$" "$CONFIG_FILE" \
      && grep -q "seeds: \"127.0.0.1:$STORAGE_PORT\"" "$CONFIG_FILE" \
      || die "could not render the ports into $CONFIG_FILE (did $CONF_SRC/cassandra.yaml change?)"
  fi
  local jamm
  jamm="$(ls "$LIB_DIR"/jamm-*.jar | head -n 1)"
  say "starting Cassandra $CASSANDRA_VERSION (heap $HEAP, JIT $JIT) in $NODE_DIR"
  # shellcheck disable=SC2046
  nohup java $(read_options "$CONF_SRC/jvm17-server.options") \
    -Xms"$HEAP" -Xmx"$HEAP" \
    -javaagent:"$jamm" \
    -Dcassandra.config="file://$CONFIG_FILE" \
    -Dcassandra.storagedir="$NODE_DIR/data" \
    -Dcassandra.logdir="$LOG_DIR" \
    -Dlogback.configurationFile="file://$CONF_SRC/logback.xml" \
    -Dcassandra-foreground=yes \
    -Dcassandra.jmx.local.port="$JMX_PORT" \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 \
    -Dcassandra.ring_delay_ms=100 \
    -Dcassandra.superuser_setup_delay_ms=0 \
    -cp "$LIB_DIR/*" \
    org.apache.cassandra.service.CassandraDaemon \
    >"$LOG_DIR/stdout.log" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  local pid=$! waited=0
  while (( waited < TIMEOUT )); do
    if ! kill -0 "$pid" 2>/dev/null; then
      log_tail
      die "Cassandra exited during startup (see above; node dir $NODE_DIR)"
    fi
    if grep -q "Starting listening for CQL clients" "$LOG_DIR/system.log" 2>/dev/null && cql_answers; then
      say "up after ${waited}s: CQL on $CQL_HOST:$CQL_PORT, JMX on $JMX_PORT (pid $pid)"
      return 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log_tail
  die "Cassandra did not answer CQL on $CQL_HOST:$CQL_PORT within ${TIMEOUT}s (node dir $NODE_DIR)"
}

status() {
  local pid=""
  pid="$(running_pid || true)"
  if cql_answers; then
    say "running${pid:+ (pid $pid)}: CQL answers on $CQL_HOST:$CQL_PORT"
    return 0
  fi
  if [[ -n "$pid" ]]; then
    say "process $pid is alive but CQL does not answer yet"
    return 2
  fi
  say "not running"
  return 1
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    say "not running"
    rm -f "$PID_FILE"
    return 0
  fi
  say "stopping pid $pid"
  kill "$pid" 2>/dev/null || true
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if (( waited >= 60 )); then
      say "did not stop within 60s; killing"
      kill -9 "$pid" 2>/dev/null || true
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE"
  say "stopped"
}

nodetool() {
  fetch
  # shellcheck disable=SC2046
  java $(read_options "$CONF_SRC/jvm17-clients.options") \
    -Dlogback.configurationFile="file://$CONF_SRC/logback-tools.xml" \
    -cp "$LIB_DIR/*" org.apache.cassandra.tools.NodeTool -h "$CQL_HOST" -p "$JMX_PORT" "$@"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  fetch) fetch; say "Cassandra $CASSANDRA_VERSION jars in $LIB_DIR" ;;
  start) start "$@" ;;
  status) status ;;
  stop) stop ;;
  restart) stop; start "$@" ;;
  nodetool) nodetool "$@" ;;
  log) log_tail ;;
  *) echo "usage: $0 {fetch|start [--fresh]|status|stop|restart|nodetool ARGS...|log}" >&2; exit 64 ;;
esac
