#!/usr/bin/env bash
# A local Spark standalone cluster for airflow-atlas: one master and W workers on a loopback address,
# run from the installed pyspark package (it ships bin/spark-class and the jars, not sbin/start-*.sh).
#
#   scripts/spark.sh start    start the master, then the workers; wait until every worker is ALIVE
#   scripts/spark.sh status   exit 0 when the master answers and every worker is ALIVE
#   scripts/spark.sh stop     stop the workers, then the master (only daemons this script started)
#   scripts/spark.sh conf     print the spark-submit properties a driver on this machine needs:
#                             scripts/spark.sh conf >submit.conf; SPARK_LOCAL_IP=127.0.0.1 spark-submit
#                             --properties-file submit.conf app.py (spark-submit wants a regular file)
#   scripts/spark.sh log      print the tail of the daemons' logs
#
# A Spark Connect server (one long-lived Spark application the sweep jobs reach with sc://; docs/SPARK.md):
#   scripts/spark.sh connect-start    start it (idempotent: a running one is kept); wait until it listens
#   scripts/spark.sh connect-status   exit 0 when it listens; prints its sc:// URL
#   scripts/spark.sh connect-stop     stop it (only a server this script started)
#   scripts/spark.sh connect-url      print its sc:// URL (for a `spark_connect` Airflow connection)
#
# Environment (all optional):
#   ATLAS_PYTHON               the Python whose pyspark runs the daemons and whose interpreter the executors
#                              use (default: the repository's .venv/bin/python, else python3). Executors must
#                              run the same Python minor version as the driver and have the project's
#                              dependencies (cassandra-driver): this venv has both.
#   ATLAS_SPARK_HOST           master and workers' address (default 127.0.0.5)
#   ATLAS_SPARK_PORT           master port (default 7077); web UI ATLAS_SPARK_WEBUI_PORT (default 8085),
#                              worker I's web UI 8085+I
#   ATLAS_SPARK_WORKERS        number of workers (default 2), each ATLAS_SPARK_WORKER_CORES (default 1) cores
#                              and ATLAS_SPARK_WORKER_MEMORY (default 1g) for executors
#   ATLAS_SPARK_DAEMON_MEMORY  heap of the master and worker daemons (default 256m)
#   ATLAS_SPARK_DIR            logs, pids, worker directories (default ${TMPDIR:-/tmp}/airflow-atlas-spark)
#   ATLAS_SPARK_DRIVER_HOST    address a driver on this machine advertises to executors (default 127.0.0.1)
#   ATLAS_SPARK_TIMEOUT        seconds to wait for the master and the workers (default 180)
#   ATLAS_SPARK_CONNECT_HOST   Connect server's listening address, loopback only (default 127.0.0.1)
#   ATLAS_SPARK_CONNECT_PORT   its gRPC port (default 15002)
#   ATLAS_SPARK_CONNECT_MASTER the master of its application (default local[2]; e.g. local[1],
#                              local[2,4] for task retries, or the standalone master spark://HOST:PORT)
#   ATLAS_SPARK_CONNECT_MEMORY its driver heap (default 1g)
#   ATLAS_SPARK_ADOPT=1        accept a master that already answers on HOST:PORT although this script did not
#                              start it; without it `start` refuses
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${ATLAS_PYTHON:-}" ]]; then
  PYTHON="$ATLAS_PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
  PYTHON="$ROOT/.venv/bin/python"
else
  PYTHON="$(command -v python3)"
fi
HOST="${ATLAS_SPARK_HOST:-127.0.0.5}"
PORT="${ATLAS_SPARK_PORT:-7077}"
WEBUI_PORT="${ATLAS_SPARK_WEBUI_PORT:-8085}"
WORKERS="${ATLAS_SPARK_WORKERS:-2}"
WORKER_CORES="${ATLAS_SPARK_WORKER_CORES:-1}"
WORKER_MEMORY="${ATLAS_SPARK_WORKER_MEMORY:-1g}"
DAEMON_MEMORY="${ATLAS_SPARK_DAEMON_MEMORY:-256m}"
SPARK_DIR="${ATLAS_SPARK_DIR:-${TMPDIR:-/tmp}/airflow-atlas-spark}"
DRIVER_HOST="${ATLAS_SPARK_DRIVER_HOST:-127.0.0.1}"
TIMEOUT="${ATLAS_SPARK_TIMEOUT:-180}"
ADOPT="${ATLAS_SPARK_ADOPT:-0}"
MASTER_URL="spark://$HOST:$PORT"
CONNECT_HOST="${ATLAS_SPARK_CONNECT_HOST:-127.0.0.1}"
CONNECT_PORT="${ATLAS_SPARK_CONNECT_PORT:-15002}"
CONNECT_MASTER="${ATLAS_SPARK_CONNECT_MASTER:-local[2]}"
CONNECT_MEMORY="${ATLAS_SPARK_CONNECT_MEMORY:-1g}"

say() { echo "[spark] $*" >&2; }
die() { echo "[spark] ERROR: $*" >&2; exit 1; }
usage() { echo "[spark] ERROR: $*" >&2; exit 64; }

[[ "$HOST" =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || usage "ATLAS_SPARK_HOST must be a loopback address 127.x.y.z, got '$HOST'"
[[ "$DRIVER_HOST" =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || usage "ATLAS_SPARK_DRIVER_HOST must be a loopback address 127.x.y.z, got '$DRIVER_HOST'"
[[ "$CONNECT_HOST" =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || usage "ATLAS_SPARK_CONNECT_HOST must be a loopback address 127.x.y.z, got '$CONNECT_HOST'"
[[ "$CONNECT_MASTER" =~ ^(local(\[[0-9*]+(,[0-9]+)?\])?|spark://[^[:space:]]+)$ ]] || usage "ATLAS_SPARK_CONNECT_MASTER must be local, local[N], local[N,F] or spark://HOST:PORT, got '$CONNECT_MASTER'"
[[ "$CONNECT_MEMORY" =~ ^[0-9]+[mg]$ ]] || usage "ATLAS_SPARK_CONNECT_MEMORY must look like 512m or 1g"
for n in "$CONNECT_PORT" "$PORT" "$WEBUI_PORT" "$WORKERS" "$WORKER_CORES" "$TIMEOUT"; do
  [[ "$n" =~ ^[0-9]+$ ]] || usage "ports, ATLAS_SPARK_WORKERS, ATLAS_SPARK_WORKER_CORES and ATLAS_SPARK_TIMEOUT must be numbers, got '$n'"
done
(( WORKERS >= 1 && WORKERS <= 16 )) || usage "ATLAS_SPARK_WORKERS must be in 1..16, got '$WORKERS'"
[[ "$WORKER_MEMORY" =~ ^[0-9]+[mg]$ && "$DAEMON_MEMORY" =~ ^[0-9]+[mg]$ ]] \
  || usage "ATLAS_SPARK_WORKER_MEMORY and ATLAS_SPARK_DAEMON_MEMORY must look like 512m or 1g"
case "$ADOPT" in 0 | 1) ;; *) usage "ATLAS_SPARK_ADOPT must be 0 or 1, got '$ADOPT'" ;; esac

spark_home() {
  [[ -x "$PYTHON" ]] || die "Python '$PYTHON' not found (run scripts/bootstrap.sh, or set ATLAS_PYTHON)"
  local home
  home="$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(os.path.realpath(pyspark.__file__)))' 2>/dev/null)" \
    || die "$PYTHON has no pyspark (run scripts/bootstrap.sh, or set ATLAS_PYTHON)"
  [[ -x "$home/bin/spark-class" ]] || die "$home/bin/spark-class missing: the pyspark package is incomplete"
  echo "$home"
}

# "<alive workers>" from the master's JSON endpoint; exit 1 when the master does not answer.
alive_workers() {
  "$PYTHON" - "$HOST" "$WEBUI_PORT" <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/json/", timeout=3) as response:
        state = json.load(response)
except Exception:
    sys.exit(1)
print(sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE"))
PY
}

master_port_open() {
  "$PYTHON" -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()' "$HOST" "$PORT" 2>/dev/null
}

# The pid in $1, when alive and a daemon of this script: its environment (inherited by spark-class and the
# JVM it execs) names this directory, so a recycled pid of another process is not taken for ours.
live_pid() {
  [[ -f "$1" ]] || return 1
  local pid
  pid="$(cat "$1")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r "/proc/$pid/environ" ]]; then
    tr '\0' '\n' <"/proc/$pid/environ" | grep -qxF -- "SPARK_DAEMON_JAVA_OPTS=-Datlas.spark.dir=$SPARK_DIR" || return 1
  fi
  echo "$pid"
}

# start_daemon NAME CLASS ARGS...: one daemon in the background, pid in $SPARK_DIR/NAME.pid.
start_daemon() {
  local name="$1" home
  shift
  home="$(spark_home)"
  mkdir -p "$SPARK_DIR/logs"
  SPARK_HOME="$home" SPARK_LOCAL_IP="$HOST" SPARK_DAEMON_MEMORY="$DAEMON_MEMORY" \
    SPARK_DAEMON_JAVA_OPTS="-Datlas.spark.dir=$SPARK_DIR" SPARK_LOG_DIR="$SPARK_DIR/logs" \
    PYSPARK_PYTHON="$PYTHON" SPARK_CONF_DIR="$SPARK_DIR/conf" \
    nohup "$home/bin/spark-class" "$@" >"$SPARK_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$SPARK_DIR/$name.pid"
}

stop_daemon() {
  local name="$1" pid waited=0
  if ! pid="$(live_pid "$SPARK_DIR/$name.pid")"; then
    rm -f "$SPARK_DIR/$name.pid"
    return 0
  fi
  say "stopping $name (pid $pid)"
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    if (( waited >= 30 )); then
      say "$name did not stop within 30s; killing"
      kill -9 "$pid" 2>/dev/null || true
      break
    fi
    sleep 1
    waited=$((waited + 1))
  done
  rm -f "$SPARK_DIR/$name.pid"
}

log_tail() {
  local f
  for f in "$SPARK_DIR"/logs/*.log; do
    [[ -f "$f" ]] || continue
    echo "----- last 20 lines of $f -----" >&2
    tail -n 20 "$f" >&2
  done
}

start() {
  local i waited=0 alive
  if live_pid "$SPARK_DIR/master.pid" >/dev/null; then
    say "master already running (pid $(live_pid "$SPARK_DIR/master.pid")) at $MASTER_URL"
  elif master_port_open; then
    (( ADOPT )) || die "something already listens on $HOST:$PORT but this script did not start it (no live pid in $SPARK_DIR); refusing to adopt it. Use it anyway with ATLAS_SPARK_ADOPT=1, or choose ATLAS_SPARK_HOST/ATLAS_SPARK_PORT"
    say "a master already answers on $HOST:$PORT (not started by this script); adopting it (ATLAS_SPARK_ADOPT=1)"
    return 0
  else
    mkdir -p "$SPARK_DIR/conf"
    say "starting master $MASTER_URL (web UI http://$HOST:$WEBUI_PORT) from $(spark_home)"
    start_daemon master org.apache.spark.deploy.master.Master --host "$HOST" --port "$PORT" --webui-port "$WEBUI_PORT"
  fi
  until alive_workers >/dev/null; do
    live_pid "$SPARK_DIR/master.pid" >/dev/null || { log_tail; die "the master exited during startup (see above)"; }
    (( waited < TIMEOUT )) || { log_tail; die "the master did not answer within ${TIMEOUT}s"; }
    sleep 1
    waited=$((waited + 1))
  done
  for ((i = 1; i <= WORKERS; i++)); do
    if live_pid "$SPARK_DIR/worker$i.pid" >/dev/null; then continue; fi
    mkdir -p "$SPARK_DIR/worker$i"
    say "starting worker$i ($WORKER_CORES core(s), $WORKER_MEMORY)"
    start_daemon "worker$i" org.apache.spark.deploy.worker.Worker --host "$HOST" --cores "$WORKER_CORES" \
      --memory "$WORKER_MEMORY" --webui-port "$((WEBUI_PORT + i))" --work-dir "$SPARK_DIR/worker$i" "$MASTER_URL"
  done
  while true; do
    alive="$(alive_workers || echo 0)"
    (( alive >= WORKERS )) && break
    for ((i = 1; i <= WORKERS; i++)); do
      live_pid "$SPARK_DIR/worker$i.pid" >/dev/null || { log_tail; die "worker$i exited during startup (see above)"; }
    done
    (( waited < TIMEOUT )) || { log_tail; die "$alive of $WORKERS workers registered within ${TIMEOUT}s"; }
    sleep 1
    waited=$((waited + 1))
  done
  say "up after ${waited}s: master $MASTER_URL with $alive ALIVE worker(s); executors' Python $PYTHON"
}

status() {
  local alive pid
  pid="$(live_pid "$SPARK_DIR/master.pid" || true)"
  if ! alive="$(alive_workers)"; then
    say "master $MASTER_URL does not answer${pid:+ (pid $pid alive)}"
    return 1
  fi
  if [[ -z "$pid" ]]; then
    say "master $MASTER_URL answers, but not a master this script started (no live pid in $SPARK_DIR)"
  fi
  say "master $MASTER_URL${pid:+ (pid $pid)}: $alive of $WORKERS worker(s) ALIVE"
  (( alive >= WORKERS ))
}

stop() {
  local i
  for ((i = WORKERS; i >= 1; i--)); do stop_daemon "worker$i"; done
  stop_daemon master
  say "stopped"
}

# The properties a driver on this machine needs for this cluster (spark-submit --properties-file).
conf() {
  cat <<EOF
spark.master $MASTER_URL
spark.driver.host $DRIVER_HOST
spark.driver.bindAddress $DRIVER_HOST
spark.pyspark.python $PYTHON
spark.pyspark.driver.python $PYTHON
spark.executor.memory 512m
spark.cores.max $((WORKERS * WORKER_CORES))
EOF
}

# ----- the Spark Connect server -----------------------------------------------------------------------
connect_port_open() {
  "$PYTHON" -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()' "$CONNECT_HOST" "$CONNECT_PORT" 2>/dev/null
}

connect_url() { echo "sc://$CONNECT_HOST:$CONNECT_PORT"; }

connect_start() {
  local home pid waited=0
  if pid="$(live_pid "$SPARK_DIR/connect.pid")"; then
    connect_port_open && { say "Connect server already running (pid $pid) at $(connect_url)"; return 0; }
  elif connect_port_open; then
    die "something already listens on $CONNECT_HOST:$CONNECT_PORT but this script did not start it; choose ATLAS_SPARK_CONNECT_PORT"
  else
    home="$(spark_home)"
    mkdir -p "$SPARK_DIR/logs" "$SPARK_DIR/conf" "$SPARK_DIR/connect-pycache"
    say "starting Spark Connect server $(connect_url) (master $CONNECT_MASTER) from $home"
    # Python bytecode of the server's Python workers is cached in its own directory (a fresh session
    # starts fresh workers; without a cache they compile pyspark and the engine every time).
    env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$SPARK_DIR/connect-pycache" \
      SPARK_HOME="$home" SPARK_LOCAL_IP="$CONNECT_HOST" SPARK_CONF_DIR="$SPARK_DIR/conf" \
      SPARK_DAEMON_JAVA_OPTS="-Datlas.spark.dir=$SPARK_DIR" PYSPARK_PYTHON="$PYTHON" PYSPARK_DRIVER_PYTHON="$PYTHON" \
      nohup "$home/bin/spark-submit" --class org.apache.spark.sql.connect.service.SparkConnectServer \
        --name "atlas-connect" --master "$CONNECT_MASTER" --driver-memory "$CONNECT_MEMORY" \
        --conf spark.connect.grpc.binding.address="$CONNECT_HOST" --conf spark.connect.grpc.binding.port="$CONNECT_PORT" \
        --conf spark.driver.host="$CONNECT_HOST" --conf spark.driver.bindAddress="$CONNECT_HOST" \
        --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false \
        --conf spark.pyspark.python="$PYTHON" --conf spark.pyspark.driver.python="$PYTHON" \
        --conf "spark.driver.extraJavaOptions=-Datlas.spark.dir=$SPARK_DIR" \
        spark-internal >"$SPARK_DIR/logs/connect.log" 2>&1 </dev/null &
    echo $! >"$SPARK_DIR/connect.pid"
  fi
  until connect_port_open; do
    live_pid "$SPARK_DIR/connect.pid" >/dev/null || { tail -n 30 "$SPARK_DIR/logs/connect.log" >&2; die "the Connect server exited during startup (see above)"; }
    (( waited < TIMEOUT )) || { tail -n 30 "$SPARK_DIR/logs/connect.log" >&2; die "the Connect server did not listen within ${TIMEOUT}s"; }
    sleep 1
    waited=$((waited + 1))
  done
  say "Connect server up after ${waited}s: $(connect_url)"
}

connect_status() {
  local pid
  pid="$(live_pid "$SPARK_DIR/connect.pid" || true)"
  if connect_port_open; then
    say "Connect server $(connect_url) listens${pid:+ (pid $pid)}"
    connect_url
    return 0
  fi
  say "Connect server $(connect_url) does not listen${pid:+ (pid $pid alive)}"
  return 1
}

cmd="${1:-}"
shift || true
case "$cmd" in
  start) start ;;
  status) status ;;
  stop) stop ;;
  restart) stop; start ;;
  conf) conf ;;
  log) log_tail ;;
  connect-start) connect_start ;;
  connect-status) connect_status ;;
  connect-stop) stop_daemon connect; say "Connect server stopped" ;;
  connect-url) connect_url ;;
  *) usage "usage: $0 {start|status|stop|restart|conf|log|connect-start|connect-status|connect-stop|connect-url}" ;;
esac
