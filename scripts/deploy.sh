#!/usr/bin/env bash
# The compose deployment's Airflow part as plain processes on this machine, from the built wheel: what the
# deployment test tier (tests/deploy/test_deployment.py) runs, and what docs/DEPLOYMENT.md "Deployment test" shows.
#
#   scripts/deploy.sh venv          build the wheel (uv build: sdist, then the wheel), a clean virtualenv with
#                                   docker/requirements-docker.lock (the lock the image uses, installed with
#                                   uv as docker/airflow/Dockerfile does) and the wheel; cached under
#                                   $ATLAS_DEPLOY_CACHE/venv-<lock hash> (the wheel is reinstalled when it changes)
#   scripts/deploy.sh init          venv, Postgres, Redis, `airflow db migrate`, the atlas_settings seed
#                                   (docker/atlas_variables.json with this deployment's DEPLOY_SETTINGS below,
#                                   --action-on-existing-key skip: airflow-init), then the store's
#                                   `atlas-sweep init --conn-id atlas_default` (a warning if it is unreachable)
#   scripts/deploy.sh start         init, then timestamps-1, timestamps-2 (the store's timestamp server, on ports
#                                   9350 and 9351, mutual TLS with the certificates `atlas-sweep certs` makes once
#                                   in $ATLAS_DEPLOY_DIR/tls), api-server, scheduler, dag-processor, triggerer, worker-1, worker-2
#   scripts/deploy.sh start NAME    start one component (postgres, redis, statsd-exporter, timestamps-1,
#                                   timestamps-2, api-server, scheduler, dag-processor, triggerer, worker-1,
#                                   worker-2) if it is not running
#                                   (each Airflow component runs under a supervisor that starts it again when
#                                   it exits, until `stop`: compose's `restart: unless-stopped`)
#   scripts/deploy.sh stop [NAME]   stop everything (Airflow first, then statsd-exporter, Redis and Postgres)
#                                   or one component
#   scripts/deploy.sh status        the components and their pids
#   scripts/deploy.sh env           the environment of the Airflow processes (`eval "$(scripts/deploy.sh env)"`
#                                   then `airflow ...` from $ATLAS_DEPLOY_DIR/venv-*/bin talks to this deployment)
#   scripts/deploy.sh pid NAME      the pid of a component's main process (for the fault tests)
#   scripts/deploy.sh session NAME  the session of the component's current process (Airflow components: of
#                                   its current run under the supervisor; Postgres, Redis: the `timeout` wrapper's)
#   scripts/deploy.sh host          the address everything listens on ($ATLAS_DEPLOY_HOST, default below)
#   scripts/deploy.sh statsd-url    the StatsD receiver's Prometheus endpoint (statsd-exporter's /metrics)
#
# Configuration: docker/airflow-common.env, the SAME file docker-compose.yml loads (env_file), plus secrets
# generated once by scripts/docker_env.py into $ATLAS_DEPLOY_DIR/airflow.env (default $ATLAS_DEPLOY_CACHE/state); only the addresses and file
# locations differ, all in the "Addresses" block below. Everything listens on $ATLAS_DEPLOY_HOST (127.0.0.11)
# only; Postgres and Redis run as the unprivileged user $ATLAS_DEPLOY_USER (created if missing), each with
# its own data directory. Each component is started under coreutils `timeout` ($ATLAS_DEPLOY_LIFETIME
# seconds, default 3600), so a forgotten deployment stops by itself. Idempotent: a running component is kept.
# The store: connection atlas_default is the local Cassandra node 127.0.0.1:9042, keyspace
# $ATLAS_DEPLOY_KEYSPACE (replication factor 1); atlas_embedded an embedded store in $ATLAS_DEPLOY_DIR. The Celery workers and the
# triggerer run without their log servers (--skip-serve-logs: Airflow's serve-logs binds every interface);
# all processes share one log folder, which the api-server reads. The StatsD receiver of Airflow's metrics
# (AIRFLOW__METRICS__STATSD_* point at it) is Prometheus's statsd_exporter with compose's mapping
# (docker/statsd-exporter/mapping.yml), UDP only, its /metrics on $HOST:$STATSD_WEB_PORT; the binary comes
# from scripts/ensure_statsd_exporter.sh (Debian's package, else the Go module at compose's image version).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${ATLAS_DEPLOY_CACHE:-/tmp/airflow-atlas-deploy}" # the virtualenvs and the wheel (kept between runs)
STATE="${ATLAS_DEPLOY_DIR:-$CACHE/state}"                  # data, logs, pids, secrets of one deployment
LIFETIME="${ATLAS_DEPLOY_LIFETIME:-3600}"
RUN_USER="${ATLAS_DEPLOY_USER:-atlas-deploy}"
PG_BIN="${ATLAS_DEPLOY_PG_BIN:-/usr/local/bin}"
REDIS_SERVER="${ATLAS_REDIS_SERVER:-/usr/bin/redis-server}"
BASE_PYTHON="${ATLAS_DEPLOY_PYTHON:-python3.11}"
COMMON_ENV="$ROOT/docker/airflow-common.env"
LOCK="$ROOT/docker/requirements-docker.lock"
UV_VERSION="0.13.8" # as docker/airflow/Dockerfile

# ----- Addresses (and locations): the only configuration that differs from docker-compose.yml ------------
HOST="${ATLAS_DEPLOY_HOST:-127.0.0.11}"
PG_PORT=5432
REDIS_PORT=6379
API_PORT=8080
STATSD_WEB_PORT=9102 # statsd-exporter's /metrics (compose's published port); its StatsD port: airflow-common.env
TIMESTAMPS_PORT_1=9350 # the two timestamp server instances (compose: timestamps-1 and -2, each on 9350)
TIMESTAMPS_PORT_2=9351
TLS_DIR="$STATE/tls" # the timestamp servers' CA, server and client certificates (`atlas-sweep certs`; compose: a volume)
KEYSPACE="${ATLAS_DEPLOY_KEYSPACE:-atlas_deploy}"
CASSANDRA_HOST="${ATLAS_DEPLOY_CASSANDRA:-127.0.0.1}"
addresses() {
  # The store: the local Cassandra node, one node so replication factor 1 (compose: 3 on its 3 nodes) and a
  # swept table may have gc_grace_seconds 0; a second connection, atlas_embedded, is the embedded store.
  local conn="{\"conn_type\": \"cassandra\", \"host\": \"$CASSANDRA_HOST\", \"port\": 9042, \"schema\": \"$KEYSPACE\",
 \"extra\": {\"create_keyspace\": true, \"replication_factor\": 1, \"allow_gc_grace_below_repair_interval\": true}}"
  cat <<EOF
AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg2://airflow:airflow@$HOST:$PG_PORT/airflow
AIRFLOW__CELERY__BROKER_URL=redis://$HOST:$REDIS_PORT/0
AIRFLOW__CELERY__RESULT_BACKEND=db+postgresql://airflow:airflow@$HOST:$PG_PORT/airflow
AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://$HOST:$API_PORT/execution/
AIRFLOW__API__BASE_URL=http://$HOST:$API_PORT
AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=$STATE/auth/passwords.json
AIRFLOW__METRICS__STATSD_HOST=$HOST
AIRFLOW_CONN_ATLAS_DEFAULT=$(tr -d '\n' <<<"$conn")
AIRFLOW_CONN_ATLAS_EMBEDDED={"conn_type": "atlas_embedded", "host": "$STATE/atlas.db"}
AIRFLOW_CONN_SPARK_DEFAULT={"conn_type": "spark", "host": "spark://$HOST", "port": 7077}
ATLAS_TIMESTAMP_SERVERS=$HOST:$TIMESTAMPS_PORT_1,$HOST:$TIMESTAMPS_PORT_2
ATLAS_TIMESTAMP_TLS_CA=$TLS_DIR/ca.pem
ATLAS_TIMESTAMP_TLS_CERT=$TLS_DIR/client.pem
ATLAS_TIMESTAMP_TLS_KEY=$TLS_DIR/client.key
AIRFLOW_HOME=$STATE/home
AIRFLOW__CORE__DAGS_FOLDER=$ROOT/dags
EOF
}
# The run-time settings this deployment seeds over docker/atlas_variables.json (compose's): the engine in
# the task (this deployment starts no Spark master; spark_default names its own address, where none runs,
# never another one on the machine), a small machine's shards in one task, this machine's nodetool for the
# local node (compose: /opt/cassandra/bin/nodetool over JMX to its three nodes).
DEPLOY_SETTINGS="{\"execution_mode\": \"in_task\", \"shard_count\": 2, \"in_task_group_size\": 4,
 \"nodetool_command\": [\"$ROOT/scripts/cassandra.sh\", \"nodetool\"], \"nodetool_jmx_targets\": []}"
AIRFLOW_COMPONENTS=(api-server scheduler dag-processor triggerer worker-1 worker-2)
TIMESTAMP_COMPONENTS=(timestamps-1 timestamps-2) # started after the store's init, before Airflow; stopped after it

log() { echo "[deploy] $*" >&2; }
die() { echo "[deploy] ERROR: $*" >&2; exit 1; }

lock_hash() { sha256sum "$LOCK" | cut -c1-16; }
venv_dir() { echo "$CACHE/venv-$(lock_hash)"; }

cmd_venv() {
  mkdir -p "$CACHE"
  local venv wheel_dir wheel sha
  venv="$(venv_dir)"
  if [[ ! -x "$venv/bin/airflow" ]]; then
    log "creating $venv from $LOCK (once per lock)"
    rm -rf "$venv"
    "$BASE_PYTHON" -m venv "$venv" || die "$BASE_PYTHON -m venv failed (ATLAS_DEPLOY_PYTHON names the Python 3.11)"
    "$venv/bin/pip" install -q --disable-pip-version-check "uv==$UV_VERSION" || die "pip install uv failed"
    # --compile-bytecode: the .pyc files once here (PYTHONDONTWRITEBYTECODE may be set: each Airflow
    # process would otherwise compile Airflow anew, ~20 s of CPU per process on a small machine).
    "$venv/bin/uv" pip install -q --compile-bytecode --python "$venv/bin/python" -r "$LOCK" \
      || { rm -rf "$venv"; die "installing $LOCK failed"; }
  fi
  # The sources the wheel is built from (as docker/airflow/Dockerfile copies them): rebuilt and reinstalled
  # only when one of them changed.
  sha="$(cd "$ROOT" && find pyproject.toml README.md airflow_atlas spark_jobs -type f \
         -not -path '*/__pycache__/*' -not -name '*.pyc' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-32)"
  if [[ "$(cat "$venv/.atlas-sources" 2>/dev/null)" != "$sha" ]]; then
    wheel_dir="$CACHE/wheel"
    rm -rf "$wheel_dir"
    # The sdist, then the wheel from it (what ships, whatever lies around in the tree), with the venv's uv.
    "$venv/bin/uv" build -q --out-dir "$wheel_dir" "$ROOT" >"$CACHE/wheel.log" 2>&1 \
      || { cat "$CACHE/wheel.log" >&2; die "building the wheel failed"; }
    wheel="$(ls "$wheel_dir"/airflow_atlas-*.whl)"
    log "installing $(basename "$wheel") into $venv"
    "$venv/bin/uv" pip install -q --compile-bytecode --python "$venv/bin/python" --no-deps --reinstall "$wheel" \
      || die "installing the wheel failed"
    echo "$sha" >"$venv/.atlas-sources"
  fi
  echo "$venv"
}

# ----- the Airflow environment: common file + secrets + addresses ----------------------------------------
read_env_file() { # NAME=value lines, comments and blanks skipped, values literal (as compose reads env_file)
  grep -v '^[[:space:]]*#' "$1" | grep -v '^[[:space:]]*$'
}
secrets_file() {
  local f="$STATE/airflow.env"
  if [[ ! -s "$f" ]]; then
    mkdir -p "$STATE"
    "$BASE_PYTHON" "$ROOT/scripts/docker_env.py" --output "$f" >/dev/null || die "scripts/docker_env.py failed"
  fi
  echo "$f"
}
airflow_env_lines() {
  read_env_file "$COMMON_ENV"
  read_env_file "$(secrets_file)"
  addresses
}
export_airflow_env() {
  local line venv
  venv="$(venv_dir)"
  while IFS= read -r line; do
    export "${line%%=*}=${line#*=}"
  done < <(airflow_env_lines)
  export PATH="$venv/bin:$PATH"
  unset PYTHONPATH AIRFLOW_VAR_ATLAS_SETTINGS
}
cmd_env() {
  local line
  while IFS= read -r line; do
    printf 'export %s=%q\n' "${line%%=*}" "${line#*=}"
  done < <(airflow_env_lines)
  printf 'export PATH=%q\n' "$(venv_dir)/bin:$PATH"
  echo "unset PYTHONPATH"
}

# ----- process bookkeeping --------------------------------------------------------------------------------
pidfile() { echo "$STATE/run/$1.pid"; }
running() { # the component's recorded process (its `timeout` wrapper) is alive
  local p
  p="$(cat "$(pidfile "$1")" 2>/dev/null)" || return 1
  [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null
}
launch() { # NAME CMD... : in its own session under `timeout`, output to logs/NAME.log
  local name="$1"; shift
  mkdir -p "$STATE/run" "$STATE/logs"
  setsid timeout -s TERM -k 30 "$LIFETIME" "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
  # Every session the component ever had: a restart after its main process was killed leaves the old
  # session's orphans (task processes) running, and `stop` must end them too.
  echo $! >>"$STATE/run/$name.sessions"
}
main_pid() { # the component's own process: its supervisor's current run, else the child of its `timeout` wrapper
  local t m
  t="$(cat "$(pidfile "$1")" 2>/dev/null)" || return 1
  if [[ -f "$STATE/run/$1.main" ]]; then
    m="$(cat "$STATE/run/$1.main" 2>/dev/null)"
    [[ -n "$m" ]] && kill -0 "$m" 2>/dev/null && kill -0 "$t" 2>/dev/null && echo "$m"
    return 0
  fi
  pgrep -P "$t" | head -n 1
}
current_session() { # the session of the component's current process (see the usage above)
  if [[ -f "$STATE/run/$1.main" ]]; then main_pid "$1"; else cat "$(pidfile "$1")" 2>/dev/null; fi
}
wait_until() { # SECONDS DESCRIPTION CMD...
  local deadline=$((SECONDS + $1)) what="$2"; shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
  return 0
}

ensure_user() {
  id -u "$RUN_USER" >/dev/null 2>&1 && return 0
  [[ "$(id -u)" -eq 0 ]] || die "user $RUN_USER missing and this is not root"
  useradd --system --no-create-home --shell /usr/sbin/nologin "$RUN_USER" || die "useradd $RUN_USER failed"
}
as_user() { # run as $RUN_USER (root drops privileges; another user runs as itself)
  if [[ "$(id -u)" -eq 0 ]]; then
    setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups "$@"
  else
    "$@"
  fi
}

start_postgres() {
  local data="$STATE/postgres"
  running postgres && return 0
  ensure_user
  if [[ ! -s "$data/PG_VERSION" ]]; then
    log "initdb $data"
    mkdir -p "$data" && chown "$RUN_USER" "$data" && chmod 700 "$data"
    as_user "$PG_BIN/initdb" -D "$data" -U airflow --auth=trust >"$STATE/initdb.log" 2>&1 || die "initdb failed: $STATE/initdb.log"
    echo "CREATE DATABASE airflow OWNER airflow" | as_user "$PG_BIN/postgres" --single -D "$data" postgres \
      >>"$STATE/initdb.log" 2>&1 || die "creating the airflow database failed: $STATE/initdb.log"
  fi
  rm -f "$data/postmaster.pid" # a stale one after a kill -9
  # shellcheck disable=SC2046
  launch postgres $(as_user_cmd) "$PG_BIN/postgres" -D "$data" -c listen_addresses="$HOST" -p "$PG_PORT" \
    -c unix_socket_directories="$data" -c max_connections=200 -c fsync=off
  wait_until 60 postgres pg_ready || die "Postgres did not start: $STATE/logs/postgres.log"
  log "postgres on $HOST:$PG_PORT"
}
pg_ready() { # the airflow database answers (the venv's psycopg2: the image has no Postgres client either)
  "$(venv_dir)/bin/python" -c "import psycopg2; psycopg2.connect(host='$HOST', port=$PG_PORT, user='airflow',
 password='airflow', dbname='airflow', connect_timeout=2).close()"
}
as_user_cmd() { if [[ "$(id -u)" -eq 0 ]]; then echo setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups; fi; }

start_redis() {
  local dir="$STATE/redis"
  running redis && return 0
  [[ -x "$REDIS_SERVER" ]] || die "$REDIS_SERVER missing: run scripts/ensure_redis.sh (as root)"
  ensure_user
  mkdir -p "$dir" && chown "$RUN_USER" "$dir"
  # Redis's own defaults otherwise (RDB snapshots, saved at shutdown), as in the redis:7 image of compose.
  launch redis $(as_user_cmd) "$REDIS_SERVER" --bind "$HOST" --port "$REDIS_PORT" --dir "$dir" \
    --daemonize no --protected-mode no --logfile ""
  wait_until 30 redis redis-cli -h "$HOST" -p "$REDIS_PORT" ping || die "Redis did not start: $STATE/logs/redis.log"
  log "redis on $HOST:$REDIS_PORT"
}

statsd_exporter_bin() { # ATLAS_STATSD_EXPORTER, Debian's package or the one built by scripts/ensure_statsd_exporter.sh
  local b
  for b in "${ATLAS_STATSD_EXPORTER:-}" /usr/bin/prometheus-statsd-exporter /usr/local/bin/statsd_exporter; do
    [[ -n "$b" && -x "$b" ]] && { echo "$b"; return 0; }
  done
  return 1
}
statsd_port() { read_env_file "$COMMON_ENV" | sed -n 's/^AIRFLOW__METRICS__STATSD_PORT=//p'; }
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
start_statsd_exporter() {
  local bin port
  running statsd-exporter && return 0
  bin="$(statsd_exporter_bin)" || die "no statsd_exporter: run scripts/ensure_statsd_exporter.sh (as root)"
  port="$(statsd_port)"
  [[ -n "$port" ]] || die "AIRFLOW__METRICS__STATSD_PORT missing in $COMMON_ENV"
  ensure_user
  # The mapping as the exporter's user reads it (a copy: the checkout may not be readable to that user).
  mkdir -p "$STATE/statsd-exporter" && cp "$ROOT/docker/statsd-exporter/mapping.yml" "$STATE/statsd-exporter/"
  chmod 644 "$STATE/statsd-exporter/mapping.yml"
  # shellcheck disable=SC2046
  launch statsd-exporter $(as_user_cmd) "$bin" --statsd.mapping-config="$STATE/statsd-exporter/mapping.yml" \
    --statsd.listen-udp="$HOST:$port" --statsd.listen-tcp="" --web.listen-address="$HOST:$STATSD_WEB_PORT" --log.level=warn
  wait_until 30 statsd-exporter port_open "$HOST" "$STATSD_WEB_PORT" \
    || die "statsd-exporter did not start: $STATE/logs/statsd-exporter.log"
  log "statsd-exporter: StatsD on $HOST:$port (UDP), metrics on http://$HOST:$STATSD_WEB_PORT/metrics"
}

airflow_cmd() { # the command line of an Airflow component
  case "$1" in
    api-server) echo "airflow api-server --host $HOST --port $API_PORT" ;;
    scheduler) echo "airflow scheduler" ;;
    dag-processor) echo "airflow dag-processor" ;;
    triggerer) echo "airflow triggerer --skip-serve-logs" ;;
    worker-1|worker-2) echo "airflow celery worker --celery-hostname $1@atlas-deploy --skip-serve-logs" ;;
    timestamps-1) echo "atlas-sweep --conn-id atlas_default timestamps serve --listen $HOST:$TIMESTAMPS_PORT_1 $(serve_tls)" ;;
    timestamps-2) echo "atlas-sweep --conn-id atlas_default timestamps serve --listen $HOST:$TIMESTAMPS_PORT_2 $(serve_tls)" ;;
    *) die "unknown component $1" ;;
  esac
}

serve_tls() { # mutual TLS: the server's certificate, and the CA its clients' certificates must be signed by
  echo "--cert-file $TLS_DIR/server.pem --key-file $TLS_DIR/server.key --client-ca-file $TLS_DIR/ca.pem"
}

prepare_airflow() {
  export_airflow_env
  # The timestamp servers' certificates (made once, kept after: the command is idempotent), before any server
  # or client that names them starts.
  mkdir -p "$STATE/logs"
  atlas-sweep certs "$TLS_DIR" --host "$HOST" >"$STATE/logs/certs.log" 2>&1 \
    || die "making the timestamp servers' certificates failed: $STATE/logs/certs.log"
  mkdir -p "$AIRFLOW_HOME" "$STATE/auth"
  chmod 700 "$STATE/auth" # the api-server's generated passwords (the file itself: 0600, cmd_supervise's umask)
  if [[ ! -f "$STATE/migrated" ]]; then
    log "airflow db migrate"
    airflow db migrate >"$STATE/logs/migrate.log" 2>&1 || die "airflow db migrate failed: $STATE/logs/migrate.log"
    # As airflow-init: seed the Variable once (with its description); later edits are kept.
    deploy_seed >"$STATE/atlas_variables.json" || die "writing the seed failed"
    airflow variables import --action-on-existing-key skip "$STATE/atlas_variables.json" \
      >>"$STATE/logs/migrate.log" 2>&1 || die "seeding atlas_settings failed: $STATE/logs/migrate.log"
    touch "$STATE/migrated"
  fi
  [[ -f "$STATE/store-initialized" ]] || init_store
}
deploy_seed() { # docker/atlas_variables.json with DEPLOY_SETTINGS over its value, a sentence on its description
  "$(venv_dir)/bin/python" - "$ROOT/docker/atlas_variables.json" "$DEPLOY_SETTINGS" <<'PY'
import json, sys
seed = json.load(open(sys.argv[1]))
variable = seed["atlas_settings"]
variable["value"].update(json.loads(sys.argv[2]))
variable["description"] += (" Seeded by scripts/deploy.sh: docker/atlas_variables.json with this machine's"
                            " execution_mode, shards and nodetool (DEPLOY_SETTINGS in the script).")
json.dump(seed, sys.stdout, indent=2)
PY
}
init_store() { # as airflow-init: the store's tables, so the first scheduled runs find them (where reachable)
  local shards
  shards="$("$(venv_dir)/bin/python" -c 'import json, sys; print(json.loads(sys.argv[1])["shard_count"])' "$DEPLOY_SETTINGS")"
  if atlas-sweep init --conn-id atlas_default --shards "$shards" >"$STATE/logs/store-init.log" 2>&1; then
    touch "$STATE/store-initialized"
    log "store initialized: $(tail -n 1 "$STATE/logs/store-init.log")"
  else
    log "WARNING: the store of connection atlas_default was not initialized ($(tail -n 1 "$STATE/logs/store-init.log"));"
    log "  the sweeps fail until it is: eval \"\$(scripts/deploy.sh env)\"; atlas-sweep init --conn-id atlas_default --shards $shards"
  fi
}

start_airflow() {
  local name="$1"
  running "$name" && return 0
  rm -f "$STATE/run/$name.main"
  # shellcheck disable=SC2046
  launch "$name" "$ROOT/scripts/deploy.sh" supervise "$name" $(airflow_cmd "$name")
  log "$name started (supervisor $(cat "$(pidfile "$name")"))"
}

# ----- the restart policy: compose's `restart: unless-stopped` (issue 32 item 9) --------------------------
cmd_supervise() { # NAME CMD...: run CMD; when it exits, end what is left of its process group and start it
  # again (after 1 s, doubling up to 30 s while it keeps exiting within a minute), until SIGTERM (`stop`, or
  # the lifetime's `timeout`), which it passes on to the component and waits for.
  local name="$1"; shift
  local child="" stopping=0 delay=1 began rc
  trap 'stopping=1; [[ -n "$child" ]] && kill -TERM -- "-$child" 2>/dev/null' TERM INT
  umask 077 # the components' files are private: the api-server's generated passwords file above all
  while ((!stopping)); do
    began=$SECONDS
    # A session (and process group) of its own per run: the component's pid is both ids.
    setsid "$@" </dev/null &
    child=$!
    echo "$child" >"$STATE/run/$name.main"
    echo "$child" >>"$STATE/run/$name.sessions" # `stop` ends what is left in every run's session
    wait "$child"; rc=$?
    while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done # a trapped TERM interrupts `wait`
    # Its process group's leftovers (a forked helper without parent-death handling, such as the Celery
    # worker's stale-bundle cleanup process) end with it, as in a container; a task process (a process group
    # of its own) goes on as an orphan and ends by itself, or at `stop`.
    kill -KILL -- "-$child" 2>/dev/null
    ((stopping)) && break
    ((SECONDS - began > 60)) && delay=1
    echo "[deploy] $name exited (status $rc): starting it again in ${delay}s" >&2
    sleep "$delay" & wait $!
    delay=$((delay * 2 > 30 ? 30 : delay * 2))
  done
}

stop_many() { # NAMES: SIGTERM to each component's process group, up to 30 s for all, then SIGKILL its session
  local name t alive deadline tpids=()
  for name in "$@"; do
    t="$(cat "$(pidfile "$name")" 2>/dev/null)" || continue
    [[ -n "$t" ]] || continue
    tpids+=("$t")
    if kill -0 "$t" 2>/dev/null; then
      if [[ "$name" == postgres ]]; then # fast shutdown (its SIGTERM would wait for the clients)
        as_user "$PG_BIN/pg_ctl" -D "$STATE/postgres" stop -m fast -w -t 30 >/dev/null 2>&1 || true
      fi
      kill -TERM -- "-$t" 2>/dev/null || kill -TERM "$t" 2>/dev/null
    fi
  done
  deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    alive=0
    for t in "${tpids[@]}"; do kill -0 "$t" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.3
  done
  for name in "$@"; do # orphans of a killed main process too, in this launch's session and earlier ones
    while read -r t; do [[ -n "$t" ]] && { pkill -KILL -s "$t" 2>/dev/null || true; }; done \
      < <(cat "$STATE/run/$name.sessions" 2>/dev/null)
    rm -f "$(pidfile "$name")" "$STATE/run/$name.sessions" "$STATE/run/$name.main"
  done
}

cmd_start() {
  [[ "$HOST" == 127.* ]] || die "ATLAS_DEPLOY_HOST must be a loopback address, got $HOST"
  if [[ $# -gt 0 ]]; then
    case "$1" in
      postgres) cmd_venv >/dev/null; start_postgres ;;
      redis) start_redis ;;
      statsd-exporter) start_statsd_exporter ;;
      *) cmd_venv >/dev/null; prepare_airflow; start_airflow "$1" ;;
    esac
    return
  fi
  cmd_init
  local c
  for c in "${TIMESTAMP_COMPONENTS[@]}" "${AIRFLOW_COMPONENTS[@]}"; do start_airflow "$c"; done
}

cmd_init() {
  [[ "$HOST" == 127.* ]] || die "ATLAS_DEPLOY_HOST must be a loopback address, got $HOST"
  cmd_venv >/dev/null || exit 1
  start_postgres
  start_redis
  start_statsd_exporter
  prepare_airflow
}

cmd_stop() {
  if [[ $# -gt 0 ]]; then stop_many "$1"; return; fi
  stop_many "${AIRFLOW_COMPONENTS[@]}"
  stop_many "${TIMESTAMP_COMPONENTS[@]}"
  stop_many statsd-exporter redis postgres
  log "stopped"
}

cmd_status() {
  local c rc=0
  for c in postgres redis statsd-exporter "${TIMESTAMP_COMPONENTS[@]}" "${AIRFLOW_COMPONENTS[@]}"; do
    if running "$c"; then echo "$c running $(main_pid "$c")"; else echo "$c stopped"; rc=3; fi
  done
  return $rc
}

case "${1:-}" in
  venv) cmd_venv ;;
  init) cmd_init ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) cmd_status ;;
  env) cmd_env ;;
  pid) main_pid "${2:?component}" ;;
  session) current_session "${2:?component}" ;;
  supervise) shift; cmd_supervise "$@"; exit 0 ;; # (exit: bash reads no more of this file, which may change meanwhile)
  host) echo "$HOST" ;;
  statsd-url) echo "http://$HOST:$STATSD_WEB_PORT/metrics" ;;
  *) sed -n '2,27p' "$0" >&2; exit 2 ;;
esac
