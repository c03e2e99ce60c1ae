#!/usr/bin/env bash
# Local Apache Cassandra 5.0 nodes for airflow-atlas: tests, CI and users.
#
#   scripts/cassandra.sh fetch            resolve cassandra-all + runtime deps from Maven Central (cached)
#   scripts/cassandra.sh start [--fresh] [--adopt]
#                                         start the node (default 127.0.0.1: 9042 CQL, 7199 JMX), wait for CQL
#   scripts/cassandra.sh status           exit 0 when the node answers CQL
#   scripts/cassandra.sh stop             stop the node (only a node this script started)
#   scripts/cassandra.sh discard          kill the node (SIGKILL: no drain, seconds sooner) and delete its data
#                                         (the logs stay): for a throwaway node, e.g. one a test started --fresh
#   scripts/cassandra.sh nodetool ARGS    run nodetool against the node
#   scripts/cassandra.sh log              print the last distinct messages of the node's system.log
#   scripts/cassandra.sh logfile          print the path of the node's system.log
#   scripts/cassandra.sh config           print the cassandra.yaml the node runs on (writes nothing)
#   scripts/cassandra.sh cluster start [--fresh] | stop | discard | status | start-node I | stop-node I |
#                                status-node I | nodetool I ARGS | log I | logfile I | config I
#                                         an N-node cluster on 127.0.0.2 .. 127.0.0.(N+1), see below
#   scripts/cassandra.sh dc start [--fresh] | stop | discard | status | start-node I | stop-node I | status-node I |
#                                nodetool I ARGS | log I | logfile I | config I
#                                         a TWO-DATACENTER cluster on 127.0.0.21 .. 127.0.0.23 (dc1: .21 .22,
#                                         dc2: .23), see below
#   scripts/cassandra.sh secure start [--fresh] | stop | status | nodetool ARGS | log | logfile | config | env
#                                         a SECURED single node on 127.0.0.6, see below
#   scripts/cassandra.sh secure cluster start [--fresh] | stop | status | start-node I | stop-node I |
#                                status-node I | nodetool I ARGS | log I | logfile I
#                                         a SECURED 3-node cluster on 127.0.0.7 .. 127.0.0.9
#
# Environment of one node (all optional):
#   ATLAS_CACHE_DIR          cache for jars (default ~/.cache/airflow-atlas; refused inside the repository)
#   ATLAS_CASSANDRA_DIR      node directory: data, logs, pid (default ${TMPDIR:-/tmp}/airflow-atlas-cassandra)
#   ATLAS_CASSANDRA_HEAP     heap size (default 1G)
#   ATLAS_CASSANDRA_TIMEOUT  seconds to wait for CQL (default 240)
#   ATLAS_CASSANDRA_JIT      c1 (default: quick start-up, what tests and CI use) or full (the JVM's normal
#                            tiered C1+C2 compilation, as a production node runs: slower to start, less CPU
#                            per request once warm; bench/run.py starts the node this way)
#   ATLAS_CASSANDRA_PORT_OFFSET  run a second, private node: adds N to every port (CQL 9042, storage 7000,
#                                JMX 7199); use it with its own ATLAS_CASSANDRA_DIR
#   ATLAS_CASSANDRA_CQL_PORT / ATLAS_CASSANDRA_STORAGE_PORT / ATLAS_CASSANDRA_JMX_PORT  one port explicitly
#   ATLAS_CASSANDRA_HOST     the node's address: listen_address and rpc_address (default 127.0.0.1; any
#                            127.x.y.z works on Linux). JMX always listens on 127.0.0.1 (its port must differ
#                            per node); nodetool targets 127.0.0.1:<JMX port>.
#   ATLAS_CASSANDRA_SEEDS    seed list, e.g. "127.0.0.2:7000" (default: the node itself, HOST:STORAGE_PORT)
#   ATLAS_CASSANDRA_CLUSTER_NAME  cluster_name (default airflow-atlas-local; with a moved port or another
#                            address airflow-atlas-local-<address>-<CQL port>, so such a node never joins
#                            another local node unless both name and seeds say so)
#   ATLAS_CASSANDRA_INITIAL_TOKEN  the node's token (initial_token) and auto_bootstrap: false: a node of a
#                            new, empty cluster joins the ring at once with a balanced token instead of
#                            bootstrapping (the cluster command sets it; set it only for an empty cluster)
#   ATLAS_CASSANDRA_DC / ATLAS_CASSANDRA_RACK  the node's datacenter and rack: endpoint_snitch
#                            GossipingPropertyFileSnitch with a cassandra-rackdc.properties in the node
#                            directory (default: SimpleSnitch, one datacenter `datacenter1`)
#   ATLAS_CASSANDRA_ADOPT=1  (or `start --adopt`) accept a CQL server that already answers on HOST:CQL port
#                            although this script did not start it (no live pid of ours in the node
#                            directory). Without it `start` refuses: it would otherwise report success for a
#                            node of another cluster, version or configuration.
# With any of the port/address/seed/name variables set, the node runs on a copy of cassandra.yaml rendered
# into its node directory; without, the node runs on scripts/cassandra/conf/cassandra.yaml unchanged.
#
# Cluster (`cluster ...`): node I (1..N) has address 127.0.0.(I+1), default ports (CQL 9042, storage 7000),
# JMX port 7200+I, directory $ATLAS_CLUSTER_DIR/nodeI, seed 127.0.0.2:7000, cluster_name airflow-atlas-cluster.
# Nodes start one after another (each waits for CQL); `cluster start` then waits until every node sees N
# nodes Up/Normal. Environment:
#   ATLAS_CLUSTER_NODES      N (default 3)
#   ATLAS_CLUSTER_DIR        parent of the node directories (default ${TMPDIR:-/tmp}/airflow-atlas-cluster)
#   ATLAS_CLUSTER_HEAP       heap per node (default 768M)
# The cluster never touches the single node on 127.0.0.1.
#
# Two datacenters (`dc ...`): the same commands on the cluster code path, with ATLAS_DC_LAYOUT nodes
# (default 2+1: dc1 has nodes 1..2, dc2 node 3; 2+2 also works) on 127.0.0.21 .. 127.0.0.(20+N), JMX port
# 7220+I, directory $ATLAS_DC_DIR/nodeI (default ${TMPDIR:-/tmp}/airflow-atlas-dc), heap $ATLAS_DC_HEAP
# (default 512M), seeds the first node of each datacenter, cluster_name airflow-atlas-dc, snitch
# GossipingPropertyFileSnitch (dc1/dc2, rack rack1). Tokens are balanced within each datacenter (dc2's offset
# by 100). A keyspace on it uses NetworkTopologyStrategy, e.g. {'dc1': 2, 'dc2': 1}; `dc stop-node 3` takes
# all of dc2 down (with 2+1).
#
# Secured node (`secure ...`): address 127.0.0.6 (CQL 9042, storage 7000, JMX 7206), directory
# $ATLAS_SECURE_DIR/node (default ${TMPDIR:-/tmp}/airflow-atlas-secure), cluster_name airflow-atlas-secure. It
# runs as production Cassandra does: PasswordAuthenticator + CassandraAuthorizer, client-to-node TLS required
# (no plain-text CQL), JMX with password and access files. At first start the script makes, with keytool:
# one local CA ($ATLAS_SECURE_DIR/ca: ca.p12, and ca.pem for clients) and a node certificate signed by it for
# the node's address (subjectAltName IP:127.0.0.6, so clients verify the hostname). It then replaces the
# default superuser: role `atlas_admin` (superuser) gets a generated password, the `cassandra` role a random
# one and no LOGIN. Every secret is a generated file, mode 0600, under $ATLAS_SECURE_DIR/secrets:
# admin.password (CQL), jmx.password + jmx.access (the JVM's JMX files), nodetool.password (nodetool -pwf).
# `secure env` prints them as shell variables (ATLAS_SECURE_HOST, ATLAS_SECURE_CA, ATLAS_SECURE_ADMIN_USER,
# ATLAS_SECURE_ADMIN_PASSWORD_FILE, ...) for tests and the demo. Safe to re-run: existing keys, certificates
# and passwords are kept; `secure start --fresh` removes the node's data (not the CA).
# `secure cluster start` runs the same as a 3-node cluster on 127.0.0.7 .. 127.0.0.9 (JMX 7207 .. 7209, cluster
# airflow-atlas-secure-cluster, directories $ATLAS_SECURE_DIR/cluster/nodeI), one certificate per node from the
# same CA, system_auth replicated to every node (ALTER KEYSPACE, then one full repair of system_auth).
set -euo pipefail

CASSANDRA_VERSION=5.0.7
SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
HERE="$(dirname "$SELF")"
CONF_SRC="$HERE/cassandra/conf"
CACHE_DIR="${ATLAS_CACHE_DIR:-$HOME/.cache/airflow-atlas}"
LIB_DIR="$CACHE_DIR/cassandra-$CASSANDRA_VERSION/lib"
NODE_DIR="${ATLAS_CASSANDRA_DIR:-${TMPDIR:-/tmp}/airflow-atlas-cassandra}"
PID_FILE="$NODE_DIR/cassandra.pid"
LOG_DIR="$NODE_DIR/logs"
HEAP="${ATLAS_CASSANDRA_HEAP:-1G}"
JIT="${ATLAS_CASSANDRA_JIT:-c1}"
TIMEOUT="${ATLAS_CASSANDRA_TIMEOUT:-240}"
ADOPT="${ATLAS_CASSANDRA_ADOPT:-0}"
JMX_HOST=127.0.0.1  # -Dcassandra.jmx.local.port binds JMX to the loopback address only

say() { echo "[cassandra${ATLAS_CASSANDRA_NODE_LABEL:+ $ATLAS_CASSANDRA_NODE_LABEL}] $*" >&2; }
die() { echo "[cassandra${ATLAS_CASSANDRA_NODE_LABEL:+ $ATLAS_CASSANDRA_NODE_LABEL}] ERROR: $*" >&2; exit 1; }
usage() { echo "[cassandra] ERROR: $*" >&2; exit 64; }

case "$JIT" in c1 | full) ;; *) die "ATLAS_CASSANDRA_JIT must be c1 or full, got '$JIT'" ;; esac
case "$ADOPT" in 0 | 1) ;; *) usage "ATLAS_CASSANDRA_ADOPT must be 0 or 1, got '$ADOPT'" ;; esac
PORT_OFFSET="${ATLAS_CASSANDRA_PORT_OFFSET:-0}"
[[ "$PORT_OFFSET" =~ ^[0-9]+$ ]] || usage "ATLAS_CASSANDRA_PORT_OFFSET must be a number"
CQL_HOST="${ATLAS_CASSANDRA_HOST:-127.0.0.1}"
[[ "$CQL_HOST" =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] \
  || usage "ATLAS_CASSANDRA_HOST must be a loopback address 127.x.y.z, got '$CQL_HOST'"
CQL_PORT="${ATLAS_CASSANDRA_CQL_PORT:-$((9042 + PORT_OFFSET))}"
STORAGE_PORT="${ATLAS_CASSANDRA_STORAGE_PORT:-$((7000 + PORT_OFFSET))}"
JMX_PORT="${ATLAS_CASSANDRA_JMX_PORT:-$((7199 + PORT_OFFSET))}"
for port in "$CQL_PORT" "$STORAGE_PORT" "$JMX_PORT"; do
  [[ "$port" =~ ^[0-9]+$ ]] && (( port > 0 && port < 65536 )) || usage "ports must be numbers in 1..65535, got '$port'"
done
SEEDS="${ATLAS_CASSANDRA_SEEDS:-$CQL_HOST:$STORAGE_PORT}"
[[ "$SEEDS" =~ ^[0-9.:,]+$ ]] || usage "ATLAS_CASSANDRA_SEEDS must be a comma-separated list of address:port, got '$SEEDS'"
INITIAL_TOKEN="${ATLAS_CASSANDRA_INITIAL_TOKEN:-}"
[[ -z "$INITIAL_TOKEN" || "$INITIAL_TOKEN" =~ ^-?[0-9]+$ ]] || usage "ATLAS_CASSANDRA_INITIAL_TOKEN must be an integer token, got '$INITIAL_TOKEN'"
NODE_DC="${ATLAS_CASSANDRA_DC:-}"
NODE_RACK="${ATLAS_CASSANDRA_RACK:-rack1}"
[[ -z "$NODE_DC" || "$NODE_DC" =~ ^[A-Za-z0-9_-]+$ ]] || usage "ATLAS_CASSANDRA_DC may hold letters, digits, '_' and '-' only, got '$NODE_DC'"
[[ "$NODE_RACK" =~ ^[A-Za-z0-9_-]+$ ]] || usage "ATLAS_CASSANDRA_RACK may hold letters, digits, '_' and '-' only, got '$NODE_RACK'"
RACKDC_FILE="$NODE_DIR/cassandra-rackdc.properties"
DEFAULT_NODE=0
[[ "$CQL_HOST:$CQL_PORT:$STORAGE_PORT:$JMX_PORT:$SEEDS" == "127.0.0.1:9042:7000:7199:127.0.0.1:7000" ]] && DEFAULT_NODE=1
if (( DEFAULT_NODE )); then
  CLUSTER_NAME="${ATLAS_CASSANDRA_CLUSTER_NAME:-airflow-atlas-local}"
elif [[ "$CQL_HOST" == 127.0.0.1 ]]; then
  CLUSTER_NAME="${ATLAS_CASSANDRA_CLUSTER_NAME:-airflow-atlas-local-$CQL_PORT}"
else
  CLUSTER_NAME="${ATLAS_CASSANDRA_CLUSTER_NAME:-airflow-atlas-local-$CQL_HOST-$CQL_PORT}"
fi
[[ "$CLUSTER_NAME" =~ ^[A-Za-z0-9._-]+$ ]] || usage "ATLAS_CASSANDRA_CLUSTER_NAME may hold letters, digits, '.', '_' and '-' only"
CONFIG_FILE="$CONF_SRC/cassandra.yaml"
if (( ! DEFAULT_NODE )) || [[ "$CLUSTER_NAME" != airflow-atlas-local || -n "$INITIAL_TOKEN" || -n "$NODE_DC" ]]; then
  CONFIG_FILE="$NODE_DIR/cassandra.yaml"
fi

read_options() {
  case "$JIT" in
    c1) grep -E '^-' "$1" | tr '\n' ' ' ;;
    full) grep -E '^-' "$1" | grep -v -- '-XX:TieredStopAtLevel=' | tr '\n' ' ' ;;
    *) die "ATLAS_CASSANDRA_JIT must be c1 or full, got '$JIT'" ;;
  esac
}

# The jar cache never lies inside the repository (a HOME or ATLAS_CACHE_DIR pointing into the checkout once
# put 67 MB of jars under scripts/.cache, and a commit picked them up).
check_cache_dir() {
  local cache repo
  cache="$(realpath -m -- "$CACHE_DIR")"
  repo="$(realpath -m -- "$HERE/..")"
  case "$cache/" in
    "$repo/"*) usage "the jar cache $cache lies inside the repository $repo; set ATLAS_CACHE_DIR (or HOME) to a directory outside it" ;;
  esac
}

fetch() {
  check_cache_dir
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
  python3 - "$CQL_HOST" "$CQL_PORT" "${ATLAS_CASSANDRA_TLS_CA:-}" <<'PY'
import socket, ssl, struct, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    if sys.argv[3]:  # a secured node: TLS only, certificate and hostname verified against the local CA
        s = ssl.create_default_context(cafile=sys.argv[3]).wrap_socket(s, server_hostname=sys.argv[1])
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

# The pid in the node directory, when that process is alive AND is the Cassandra of this node directory
# (a recycled pid of another process is not ours).
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r "/proc/$pid/cmdline" ]]; then
    tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "-Dcassandra.storagedir=$NODE_DIR/data" || return 1
  fi
  echo "$pid"
}

# The last 40 distinct messages of system.log (a message repeated thousands of times is shown once, where it
# first appeared, so it cannot push the cause out of view), then the tail of stdout.log.
log_tail() {
  if [[ -f "$LOG_DIR/system.log" ]]; then
    echo "----- last 40 distinct messages of $LOG_DIR/system.log -----" >&2
    tail -n 20000 "$LOG_DIR/system.log" | awk '{
        msg = $0
        sub(/^[A-Z]+ +\[[^]]*\] [0-9-]+ [0-9:,]+ /, "", msg)
        if (!(msg in seen)) { seen[msg] = 1; print }
      }' | tail -n 40 >&2
  fi
  if [[ -f "$LOG_DIR/stdout.log" ]]; then
    echo "----- last 20 lines of $LOG_DIR/stdout.log -----" >&2
    tail -n 20 "$LOG_DIR/stdout.log" >&2
  fi
}

# Renders the node's cassandra.yaml into $1 (default: the node directory's copy).
render_config() {
  local out="${1:-$CONFIG_FILE}"
  sed -e "s/^cluster_name: airflow-atlas-local\$/cluster_name: $CLUSTER_NAME/" \
    -e "s/^listen_address: 127.0.0.1\$/listen_address: $CQL_HOST/" \
    -e "s/^rpc_address: 127.0.0.1\$/rpc_address: $CQL_HOST/" \
    -e "s/^native_transport_port: 9042\$/native_transport_port: $CQL_PORT/" \
    -e "s/^storage_port: 7000\$/storage_port: $STORAGE_PORT/" \
    -e "s/seeds: \"127.0.0.1:7000\"/seeds: \"$SEEDS\"/" \
    "$CONF_SRC/cassandra.yaml" >"$out.tmp"
  grep -qxF "cluster_name: $CLUSTER_NAME" "$out.tmp" \
    && grep -qxF "listen_address: $CQL_HOST" "$out.tmp" \
    && grep -qxF "rpc_address: $CQL_HOST" "$out.tmp" \
    && grep -qxF "native_transport_port: $CQL_PORT" "$out.tmp" \
    && grep -qxF "storage_port: $STORAGE_PORT" "$out.tmp" \
    && grep -qF "seeds: \"$SEEDS\"" "$out.tmp" \
    || die "could not render the node's settings into $out (did $CONF_SRC/cassandra.yaml change?)"
  if [[ -n "$NODE_DC" ]]; then
    sed -i -e 's/^endpoint_snitch: SimpleSnitch$/endpoint_snitch: GossipingPropertyFileSnitch/' "$out.tmp"
    grep -qxF "endpoint_snitch: GossipingPropertyFileSnitch" "$out.tmp" || die "could not render the snitch into $out"
  fi
  if [[ -n "$INITIAL_TOKEN" ]]; then
    printf 'initial_token: %s\nauto_bootstrap: false\n' "$INITIAL_TOKEN" >>"$out.tmp"
  fi
  if [[ -n "${ATLAS_CASSANDRA_KEYSTORE:-}" ]]; then
    sed -i -e 's/^authenticator: AllowAllAuthenticator$/authenticator: PasswordAuthenticator/' \
      -e 's/^authorizer: AllowAllAuthorizer$/authorizer: CassandraAuthorizer/' "$out.tmp"
    grep -qxF "authenticator: PasswordAuthenticator" "$out.tmp" && grep -qxF "authorizer: CassandraAuthorizer" "$out.tmp" \
      || die "could not render the authenticator/authorizer into $out"
    chmod 600 "$out.tmp"  # before the keystore password goes in
    cat >>"$out.tmp" <<YAML
client_encryption_options:
  enabled: true
  optional: false
  keystore: $ATLAS_CASSANDRA_KEYSTORE
  keystore_password: $(cat "$ATLAS_CASSANDRA_KEYSTORE_PASSWORD_FILE")
  store_type: PKCS12
  require_client_auth: false
YAML
  fi
  mv "$out.tmp" "$out"
}

GOSSIP_RETRIED=0
start() {
  local fresh=0 arg
  for arg in "$@"; do
    case "$arg" in
      --fresh) fresh=1 ;;
      --adopt) ADOPT=1 ;;
      *) usage "start takes --fresh and --adopt, got '$arg'" ;;
    esac
  done
  if running_pid >/dev/null && cql_answers; then
    say "already running (pid $(running_pid)), CQL on $CQL_HOST:$CQL_PORT"
    return 0
  fi
  if cql_answers; then
    if (( ADOPT )); then
      say "a CQL server already answers on $CQL_HOST:$CQL_PORT (not started by this script); adopting it (ATLAS_CASSANDRA_ADOPT=1)"
      return 0
    fi
    die "a CQL server already answers on $CQL_HOST:$CQL_PORT but this script did not start it (no live pid in $NODE_DIR); refusing to adopt it. Use it anyway with ATLAS_CASSANDRA_ADOPT=1 (or start --adopt), or choose another address/port/ATLAS_CASSANDRA_DIR"
  fi
  fetch
  if running_pid >/dev/null; then
    say "pid $(running_pid) exists but CQL does not answer; stopping it first"
    stop
  fi
  (( fresh )) && rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR/data" "$LOG_DIR"
  [[ "$CONFIG_FILE" == "$CONF_SRC/cassandra.yaml" ]] || render_config
  [[ -z "$NODE_DC" ]] || printf 'dc=%s\nrack=%s\n' "$NODE_DC" "$NODE_RACK" >"$RACKDC_FILE"
  local jamm
  jamm="$(ls "$LIB_DIR"/jamm-*.jar | head -n 1)"
  say "starting Cassandra $CASSANDRA_VERSION on $CQL_HOST${NODE_DC:+ (datacenter $NODE_DC)} (cluster $CLUSTER_NAME, seeds $SEEDS, heap $HEAP, JIT $JIT) in $NODE_DIR"
  # cassandra.superuser_setup_delay_ms keeps Cassandra's default (10 s): the role manager retries its setup
  # after that delay for as long as a node of the ring is down, and with 0 the retry is a busy loop that logs
  # thousands of lines a second (a whole core, system.log rolled over every few seconds).
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
    ${NODE_DC:+-Dcassandra-rackdc.properties=file://$RACKDC_FILE} \
    ${ATLAS_CASSANDRA_JMX_PASSWORD_FILE:+-Dcom.sun.management.jmxremote.authenticate=true} \
    ${ATLAS_CASSANDRA_JMX_PASSWORD_FILE:+-Dcom.sun.management.jmxremote.password.file=$ATLAS_CASSANDRA_JMX_PASSWORD_FILE} \
    ${ATLAS_CASSANDRA_JMX_ACCESS_FILE:+-Dcom.sun.management.jmxremote.access.file=$ATLAS_CASSANDRA_JMX_ACCESS_FILE} \
    -Dcassandra.skip_wait_for_gossip_to_settle=0 \
    -Dcassandra.ring_delay_ms=100 \
    -cp "$LIB_DIR/*" \
    org.apache.cassandra.service.CassandraDaemon \
    >"$LOG_DIR/stdout.log" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  local pid=$! waited=0
  while (( waited < TIMEOUT )); do
    if ! kill -0 "$pid" 2>/dev/null; then
      # ring_delay_ms=100 gives a joining node about a second to hear from a seed: on a loaded machine a
      # seed that is up may answer later, and the node exits. That is worth one more start, nothing else is.
      if (( ! GOSSIP_RETRIED )) && grep -q "Unable to gossip with any peers" "$LOG_DIR/stdout.log" 2>/dev/null; then
        GOSSIP_RETRIED=1
        say "no seed answered in time (Unable to gossip with any peers): starting once more"
        rm -f "$PID_FILE"
        start
        return
      fi
      log_tail
      die "Cassandra exited during startup (see above; node dir $NODE_DIR)"
    fi
    # Ready when our process answers the CQL handshake. Not from system.log: a log that rolls over between
    # two polls carries the "listening for CQL clients" line away with it.
    if cql_answers; then
      say "up after ${waited}s: CQL on $CQL_HOST:$CQL_PORT, JMX on $JMX_HOST:$JMX_PORT (pid $pid)"
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
    if [[ -n "$pid" ]]; then
      say "running (pid $pid): CQL answers on $CQL_HOST:$CQL_PORT"
    else
      say "CQL answers on $CQL_HOST:$CQL_PORT, but not a node this script started (no live pid in $NODE_DIR)"
    fi
    return 0
  fi
  if [[ -n "$pid" ]]; then
    say "process $pid is alive but CQL does not answer yet"
    return 2
  fi
  say "not running"
  return 1
}

# Exit 0 once process $1 is gone, 1 if it still lives after $2 seconds.
exited_within() {
  local pid="$1" polls=$(($2 * 5))
  while kill -0 "$pid" 2>/dev/null; do
    (( polls-- > 0 )) || return 1
    sleep 0.2
  done
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then
    say "not running (no live pid of this node directory: $NODE_DIR)"
    rm -f "$PID_FILE"
    return 0
  fi
  say "stopping pid $pid"
  kill "$pid" 2>/dev/null || true
  if ! exited_within "$pid" 60; then
    say "did not stop within 60s; killing"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE"
  say "stopped"
}

# A node whose data nobody needs again (a test's fresh node): SIGKILL instead of the JVM's shutdown, which
# drains (flushes every table's memtable: most of the 20-30 s a loaded test cluster took to stop), then the
# data goes (the next start starts empty, as with --fresh); the logs stay for whoever reads them.
discard() {
  local pid
  if pid="$(running_pid)"; then
    say "discarding pid $pid (SIGKILL) and its data"
    kill -9 "$pid" 2>/dev/null || true
    exited_within "$pid" 30 || die "pid $pid did not exit within 30s of SIGKILL"
  fi
  rm -f "$PID_FILE"
  rm -rf "$NODE_DIR/data"
  say "discarded"
}

# Prints the cassandra.yaml the node runs on (rendered to a temporary file; nothing else is written).
print_config() {
  if [[ "$CONFIG_FILE" == "$CONF_SRC/cassandra.yaml" ]]; then
    cat "$CONFIG_FILE"
    return 0
  fi
  local tmp
  tmp="$(mktemp)"
  render_config "$tmp"
  cat "$tmp"
  rm -f "$tmp" "$tmp.tmp"
}

nodetool() {
  fetch
  # shellcheck disable=SC2046
  java $(read_options "$CONF_SRC/jvm17-clients.options") \
    -Dlogback.configurationFile="file://$CONF_SRC/logback-tools.xml" \
    -cp "$LIB_DIR/*" org.apache.cassandra.tools.NodeTool -h "$JMX_HOST" -p "$JMX_PORT" \
    ${ATLAS_CASSANDRA_NODETOOL_PASSWORD_FILE:+-u atlas_jmx -pwf "$ATLAS_CASSANDRA_NODETOOL_PASSWORD_FILE"} "$@"
}

# ----- cluster of N nodes on 127.0.0.2 .. 127.0.0.(N+1); the two-datacenter cluster (`dc`) on the same path ---
CLUSTER_NODES="${ATLAS_CLUSTER_NODES:-3}"
CLUSTER_DIR="${ATLAS_CLUSTER_DIR:-${TMPDIR:-/tmp}/airflow-atlas-cluster}"
CLUSTER_HEAP="${ATLAS_CLUSTER_HEAP:-768M}"
CLUSTER_NAME_OF_CLUSTER=airflow-atlas-cluster
CLUSTER_SEED=127.0.0.2:7000
CLUSTER_FIRST=2     # node I has address 127.0.0.(CLUSTER_FIRST + I - 1)
CLUSTER_JMX_BASE=7200  # node I has JMX port CLUSTER_JMX_BASE + I
CLUSTER_LABEL=cluster
DC_SIZES=()         # `dc`: nodes per datacenter (dc1, dc2, ...); empty: one datacenter, SimpleSnitch

# Switches the cluster commands to the two-datacenter cluster (`dc ...`).
use_datacenters() {
  local layout="${ATLAS_DC_LAYOUT:-2+1}"
  [[ "$layout" =~ ^[1-9]\+[1-9]$ ]] || usage "ATLAS_DC_LAYOUT must be two node counts such as 2+1 or 2+2, got '$layout'"
  DC_SIZES=("${layout%+*}" "${layout#*+}")
  CLUSTER_NODES=$((DC_SIZES[0] + DC_SIZES[1]))
  CLUSTER_DIR="${ATLAS_DC_DIR:-${TMPDIR:-/tmp}/airflow-atlas-dc}"
  CLUSTER_HEAP="${ATLAS_DC_HEAP:-512M}"
  CLUSTER_NAME_OF_CLUSTER=airflow-atlas-dc
  CLUSTER_FIRST=21
  CLUSTER_JMX_BASE=7220
  CLUSTER_SEED="127.0.0.21:7000,127.0.0.$((21 + DC_SIZES[0])):7000"  # the first node of each datacenter
  CLUSTER_LABEL=dc
}

# The datacenter index (1-based) of node $1 and its index within that datacenter (1-based), as "D J".
node_place() {
  if (( ${#DC_SIZES[@]} == 0 )) || (( $1 <= DC_SIZES[0] )); then echo "1 $1"; else echo "2 $(($1 - DC_SIZES[0]))"; fi
}

# Balanced Murmur3 token of node $1: -2^63 + (j-1) * 2^64 / n + 100 * (d-1), n the size of its datacenter d.
node_token() {
  local d j n="$CLUSTER_NODES"
  read -r d j <<<"$(node_place "$1")"
  (( ${#DC_SIZES[@]} == 0 )) || n="${DC_SIZES[d - 1]}"
  python3 -c 'import sys; j, n, d = map(int, sys.argv[1:]); print(-2**63 + (j - 1) * 2**64 // n + 100 * (d - 1))' "$j" "$n" "$d"
}

# Runs this script for cluster node $1 with that node's environment.
node_cmd() {
  local i="$1" dc="" d j
  shift
  if (( ${#DC_SIZES[@]} )); then
    read -r d j <<<"$(node_place "$i")"
    dc="dc$d"
  fi
  env ATLAS_CASSANDRA_DIR="$CLUSTER_DIR/node$i" \
    ATLAS_CASSANDRA_HOST="127.0.0.$((CLUSTER_FIRST + i - 1))" \
    ATLAS_CASSANDRA_CQL_PORT=9042 ATLAS_CASSANDRA_STORAGE_PORT=7000 \
    ATLAS_CASSANDRA_JMX_PORT="$((CLUSTER_JMX_BASE + i))" \
    ATLAS_CASSANDRA_SEEDS="$CLUSTER_SEED" \
    ATLAS_CASSANDRA_CLUSTER_NAME="$CLUSTER_NAME_OF_CLUSTER" \
    ATLAS_CASSANDRA_HEAP="$CLUSTER_HEAP" \
    ATLAS_CASSANDRA_PORT_OFFSET=0 \
    ATLAS_CASSANDRA_INITIAL_TOKEN="$(node_token "$i")" \
    ATLAS_CASSANDRA_DC="$dc" ATLAS_CASSANDRA_RACK=rack1 \
    ATLAS_CASSANDRA_NODE_LABEL="node$i${dc:+ $dc}" \
    "$SELF" "$@"
}

node_index() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= CLUSTER_NODES )) \
    || usage "node index must be in 1..$CLUSTER_NODES, got '${1:-}'"
}

# Exit 0 when `nodetool describecluster`'s output (stdin) shows $1 nodes live, none joining, leaving, moving
# or unreachable, and one schema version that all $1 hold. Up/Normal alone is not enough: a node restarted a
# moment ago is Up/Normal in gossip before it has pulled the schema, and a keyspace created then is missing on
# it for a while (INCOMPATIBLE_SCHEMA from that replica, seen in CI after a test's node restart).
cluster_settled() {
  local nodes="$1" out k
  out="$(cat)"
  grep -qE "^[[:space:]]*Live: $nodes\$" <<<"$out" || return 1
  for k in Joining Moving Leaving Unreachable; do grep -qE "^[[:space:]]*$k: 0\$" <<<"$out" || return 1; done
  local versions
  versions="$(sed -n '/Schema versions:/,/^$/p' <<<"$out" | grep -E '^[[:space:]]+[0-9a-f-]{36}: \[')" || return 1
  (( $(wc -l <<<"$versions") == 1 && $(tr -cd , <<<"$versions" | wc -c) == nodes - 1 ))
}

# Exit 0 when node $1 sees every node of the cluster Up/Normal and on one schema.
ring_complete() {
  node_cmd "$1" nodetool describecluster 2>/dev/null | cluster_settled "$CLUSTER_NODES"
}

wait_for_ring() {
  local waited=0 i
  for i in "$@"; do
    until ring_complete "$i"; do
      (( waited < TIMEOUT )) || die "node$i does not see $CLUSTER_NODES nodes Up/Normal on one schema within ${TIMEOUT}s"
      sleep 2
      waited=$((waited + 2))
    done
  done
}

cluster() {
  [[ "$CLUSTER_NODES" =~ ^[0-9]+$ ]] && (( CLUSTER_NODES >= 1 && CLUSTER_NODES <= 250 )) \
    || usage "ATLAS_CLUSTER_NODES must be a number in 1..250, got '$CLUSTER_NODES'"
  local sub="${1:-}" i
  shift || true
  case "$sub" in
    start)
      fetch
      for ((i = 1; i <= CLUSTER_NODES; i++)); do node_cmd "$i" start "$@"; done
      wait_for_ring $(seq 1 "$CLUSTER_NODES")
      local where=""
      (( ${#DC_SIZES[@]} == 0 )) || where=" in datacenters dc1 (${DC_SIZES[0]} nodes) and dc2 (${DC_SIZES[1]})"
      say "cluster $CLUSTER_NAME_OF_CLUSTER: $CLUSTER_NODES nodes Up/Normal$where on 127.0.0.$CLUSTER_FIRST..127.0.0.$((CLUSTER_FIRST + CLUSTER_NODES - 1)) (CQL 9042, JMX $((CLUSTER_JMX_BASE + 1))..$((CLUSTER_JMX_BASE + CLUSTER_NODES)))"
      ;;
    stop | discard)
      # all at once (each a process of its own: a node's stop waits for its JVM's shutdown, seconds each)
      local pids=() rc=0 pid
      for ((i = CLUSTER_NODES; i >= 1; i--)); do node_cmd "$i" "$sub" & pids+=("$!"); done
      for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
      return "$rc"
      ;;
    status)
      local rc=0
      for ((i = 1; i <= CLUSTER_NODES; i++)); do node_cmd "$i" status || rc=1; done
      return "$rc"
      ;;
    start-node)
      node_index "${1:-}"
      i="$1"
      shift
      node_cmd "$i" start "$@"
      wait_for_ring $(seq 1 "$CLUSTER_NODES")
      ;;
    stop-node | status-node | log | logfile | config)
      node_index "${1:-}"
      node_cmd "$1" "${sub%-node}"
      ;;
    nodetool)
      node_index "${1:-}"
      i="$1"
      shift
      node_cmd "$i" nodetool "$@"
      ;;
    *) usage "usage: $0 $CLUSTER_LABEL {start [--fresh]|stop|discard|status|start-node I|stop-node I|status-node I|nodetool I ARGS...|log I|logfile I|config I}" ;;
  esac
}

# ----- secured single node on 127.0.0.6 --------------------------------------------------------------------
SECURE_DIR="${ATLAS_SECURE_DIR:-${TMPDIR:-/tmp}/airflow-atlas-secure}"
SECURE_HOST=127.0.0.6
SECURE_JMX_PORT=7206
SECURE_CA_DIR="$SECURE_DIR/ca"
SECURE_SECRETS="$SECURE_DIR/secrets"
SECURE_ADMIN=atlas_admin
CERT_DAYS=3650
SECURE_CLUSTER_NODES=3
SECURE_CLUSTER_FIRST=7  # the secured cluster's nodes: 127.0.0.7 .. 127.0.0.9, JMX 7207 .. 7209

# A random password of letters and digits (written to file $1, mode 0600, unless it exists).
new_secret() {
  [[ -s "$1" ]] && return 0
  (umask 077; python3 -c 'import secrets, string; a = string.ascii_letters + string.digits; print("".join(secrets.choice(a) for _ in range(32)), end="")' >"$1.tmp")
  mv "$1.tmp" "$1"
}

# The local CA (once) and the node's certificate for its address, signed by it (once per address). Every key
# store is made under umask 077 (mode 0600: the CA's holds the CA's private key; ca.pem, the certificate
# clients pin, is public); keytool reads the store passwords from their files (-storepass:file), never
# from its command line. A CA keystore made by an older version of this script (0644) is made 0600 here.
secure_tls() {
  command -v keytool >/dev/null || die "keytool (Java 17) is required for the secured node"
  mkdir -p "$SECURE_CA_DIR" "$SECURE_SECRETS"
  chmod 700 "$SECURE_SECRETS"
  new_secret "$SECURE_SECRETS/ca.storepass"
  new_secret "$SECURE_SECRETS/keystore.password"
  local capass=(-storepass:file "$SECURE_SECRETS/ca.storepass") kspass=(-storepass:file "$SECURE_SECRETS/keystore.password")
  if [[ ! -s "$SECURE_CA_DIR/ca.pem" ]]; then
    say "making the local CA in $SECURE_CA_DIR"
    rm -f "$SECURE_CA_DIR/ca.p12"
    (umask 077; keytool -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity "$CERT_DAYS" \
      -dname "CN=airflow-atlas local CA" -ext bc:c -keystore "$SECURE_CA_DIR/ca.p12" -storetype PKCS12 "${capass[@]}" \
      >/dev/null 2>&1) || die "keytool could not make the CA"
    keytool -exportcert -rfc -alias ca -keystore "$SECURE_CA_DIR/ca.p12" "${capass[@]}" >"$SECURE_CA_DIR/ca.pem.tmp" \
      || die "keytool could not export the CA certificate"
    mv "$SECURE_CA_DIR/ca.pem.tmp" "$SECURE_CA_DIR/ca.pem"
  fi
  chmod 600 "$SECURE_CA_DIR/ca.p12"
  local ks="$SECURE_SECRETS/node-$1.p12"
  if [[ ! -s "$ks" ]]; then
    say "making the certificate of $1 (signed by the local CA)"
    rm -f "$ks.tmp"
    (umask 077
      keytool -genkeypair -alias node -keyalg RSA -keysize 2048 -validity "$CERT_DAYS" -dname "CN=$1" \
        -keystore "$ks.tmp" -storetype PKCS12 "${kspass[@]}" >/dev/null 2>&1 || die "keytool could not make the node key"
      keytool -certreq -alias node -keystore "$ks.tmp" "${kspass[@]}" 2>/dev/null \
        | keytool -gencert -alias ca -keystore "$SECURE_CA_DIR/ca.p12" "${capass[@]}" -validity "$CERT_DAYS" \
          -ext "SAN=IP:$1" -ext ku:c=digitalSignature,keyEncipherment -ext eku=serverAuth -rfc >"$ks.crt" 2>/dev/null \
        || die "keytool could not sign the node certificate"
      keytool -importcert -noprompt -alias ca -file "$SECURE_CA_DIR/ca.pem" -keystore "$ks.tmp" "${kspass[@]}" >/dev/null 2>&1 \
        && keytool -importcert -noprompt -alias node -file "$ks.crt" -keystore "$ks.tmp" "${kspass[@]}" >/dev/null 2>&1 \
        || die "keytool could not import the signed node certificate") || exit 1
    rm -f "$ks.crt"
    chmod 600 "$ks.tmp"
    mv "$ks.tmp" "$ks"
  fi
}

# JMX password and access files (the JVM insists on mode 0600) and nodetool's password file.
secure_jmx() {
  new_secret "$SECURE_SECRETS/jmx.secret"
  local pass
  pass="$(cat "$SECURE_SECRETS/jmx.secret")"
  (umask 077
    printf 'atlas_jmx %s\n' "$pass" >"$SECURE_SECRETS/jmx.password"
    printf 'atlas_jmx readwrite\n' >"$SECURE_SECRETS/jmx.access"
    printf 'atlas_jmx %s\n' "$pass" >"$SECURE_SECRETS/nodetool.password")
}

# Runs this script for the secured single node (index 0) or node I of the secured cluster with its environment.
secure_cmd() {
  local i="$1" host dir jmx seeds name token="" label
  shift
  if (( i == 0 )); then
    host="$SECURE_HOST" dir="$SECURE_DIR/node" jmx="$SECURE_JMX_PORT" seeds="$SECURE_HOST:7000"
    name=airflow-atlas-secure label=secure
  else
    host="$(secure_cluster_host "$i")" dir="$SECURE_DIR/cluster/node$i" jmx="$((SECURE_JMX_PORT + i))"
    seeds="$(secure_cluster_host 1):7000" name=airflow-atlas-secure-cluster label="secure node$i"
    token="$(python3 -c 'import sys; i, n = int(sys.argv[1]), int(sys.argv[2]); print(-2**63 + (i - 1) * 2**64 // n)' "$i" "$SECURE_CLUSTER_NODES")"
  fi
  env ATLAS_CASSANDRA_DIR="$dir" \
    ATLAS_CASSANDRA_HOST="$host" \
    ATLAS_CASSANDRA_CQL_PORT=9042 ATLAS_CASSANDRA_STORAGE_PORT=7000 \
    ATLAS_CASSANDRA_JMX_PORT="$jmx" \
    ATLAS_CASSANDRA_SEEDS="$seeds" \
    ATLAS_CASSANDRA_CLUSTER_NAME="$name" \
    ATLAS_CASSANDRA_INITIAL_TOKEN="$token" \
    ATLAS_CASSANDRA_HEAP="${ATLAS_SECURE_HEAP:-768M}" \
    ATLAS_CASSANDRA_PORT_OFFSET=0 \
    ATLAS_CASSANDRA_NODE_LABEL="$label" \
    ATLAS_CASSANDRA_TLS_CA="$SECURE_CA_DIR/ca.pem" \
    ATLAS_CASSANDRA_KEYSTORE="$SECURE_SECRETS/node-$host.p12" \
    ATLAS_CASSANDRA_KEYSTORE_PASSWORD_FILE="$SECURE_SECRETS/keystore.password" \
    ATLAS_CASSANDRA_JMX_PASSWORD_FILE="$SECURE_SECRETS/jmx.password" \
    ATLAS_CASSANDRA_JMX_ACCESS_FILE="$SECURE_SECRETS/jmx.access" \
    ATLAS_CASSANDRA_NODETOOL_PASSWORD_FILE="$SECURE_SECRETS/nodetool.password" \
    "$SELF" "$@"
}

secure_cluster_host() { echo "127.0.0.$((SECURE_CLUSTER_FIRST + $1 - 1))"; }

# Replaces the default superuser (once): role atlas_admin with a generated password; cassandra gets a random
# password and loses LOGIN and SUPERUSER. Waits for the role manager's setup (superuser_setup_delay_ms).
secure_roles() {
  local hosts="$1" py="$HERE/../.venv/bin/python"
  [[ -x "$py" ]] || die "the project's .venv is needed to set up roles (run scripts/bootstrap.sh)"
  new_secret "$SECURE_SECRETS/admin.password"
  "$py" - "$hosts" "$SECURE_CA_DIR/ca.pem" "$SECURE_ADMIN" "$SECURE_SECRETS/admin.password" "$TIMEOUT" <<'PY'
import secrets, ssl, sys, time
from cassandra import AuthenticationFailed, InvalidRequest
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable

hosts, ca, admin, password_file, timeout = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
password = open(password_file).read()
context = ssl.create_default_context(cafile=ca)


def session_as(user, pw, contact=None):
    cluster = Cluster(contact or hosts, auth_provider=PlainTextAuthProvider(user, pw), ssl_context=context,
                      ssl_options={"check_hostname": True}, protocol_version=5, connect_timeout=10)
    try:
        return cluster, cluster.connect()
    except BaseException:
        cluster.shutdown()
        raise


def auth_failed(exc):
    return isinstance(exc, NoHostAvailable) and any(isinstance(e, AuthenticationFailed) for e in exc.errors.values())


deadline = time.monotonic() + timeout
while True:
    try:
        cluster, session = session_as(admin, password)
        break  # set up already (still make sure the default superuser is disabled, below)
    except NoHostAvailable as exc:
        if not auth_failed(exc):
            raise
    try:
        cluster, session = session_as("cassandra", "cassandra")
    except NoHostAvailable as exc:  # the default superuser appears after superuser_setup_delay_ms
        if time.monotonic() > deadline:
            sys.exit(f"neither {admin} nor the default superuser can log in: {exc}")
        time.sleep(2)
        continue
    if len(hosts) > 1:  # roles on every node before the first one is made (and repaired below)
        session.execute("ALTER KEYSPACE system_auth WITH replication = {'class': 'SimpleStrategy', "
                        f"'replication_factor': {len(hosts)}}}")
    try:
        session.execute(f"CREATE ROLE {admin} WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = %s", [password])
    except InvalidRequest:  # the role exists with another password (its file was removed): set ours
        time.sleep(5.5)  # Cassandra allows one password change per role every 5 s
        session.execute(f"ALTER ROLE {admin} WITH PASSWORD = %s", [password])
    cluster.shutdown()
    cluster, session = session_as(admin, password)
    session.execute("ALTER ROLE cassandra WITH PASSWORD = %s", [secrets.token_urlsafe(24)])
    break
session.execute("ALTER ROLE cassandra WITH SUPERUSER = false AND LOGIN = false")
cluster.shutdown()
# Every node authenticates on its own (after a restart, system_auth's replicas may still be coming up there).
for host in hosts if len(hosts) > 1 else []:
    while True:
        try:
            session_as(admin, password, [host])[0].shutdown()
            break
        except NoHostAvailable as exc:
            if time.monotonic() > deadline:
                sys.exit(f"{admin} cannot log in through {host} alone: {exc}")
            time.sleep(2)
print(f"role {admin} set up; the default superuser can no longer log in", file=sys.stderr)
PY
}

secure_env() {
  local i hosts=""
  for ((i = 1; i <= SECURE_CLUSTER_NODES; i++)); do hosts+="${hosts:+,}$(secure_cluster_host "$i")"; done
  cat <<ENV
ATLAS_SECURE_HOST=$SECURE_HOST
ATLAS_SECURE_CQL_PORT=9042
ATLAS_SECURE_JMX_PORT=$SECURE_JMX_PORT
ATLAS_SECURE_CA=$SECURE_CA_DIR/ca.pem
ATLAS_SECURE_ADMIN_USER=$SECURE_ADMIN
ATLAS_SECURE_ADMIN_PASSWORD_FILE=$SECURE_SECRETS/admin.password
ATLAS_SECURE_JMX_USER=atlas_jmx
ATLAS_SECURE_NODETOOL_PASSWORD_FILE=$SECURE_SECRETS/nodetool.password
ATLAS_SECURE_NODE_DIR=$SECURE_DIR/node
ATLAS_SECURE_CLUSTER_HOSTS=$hosts
ENV
}

secure_cluster() {
  local sub="${1:-}" i hosts=""
  shift || true
  for ((i = 1; i <= SECURE_CLUSTER_NODES; i++)); do hosts+="${hosts:+,}$(secure_cluster_host "$i")"; done
  case "$sub" in
    start)
      fetch
      for ((i = 1; i <= SECURE_CLUSTER_NODES; i++)); do secure_tls "$(secure_cluster_host "$i")"; done
      secure_jmx
      for ((i = 1; i <= SECURE_CLUSTER_NODES; i++)); do secure_cmd "$i" start "$@"; done
      local waited=0
      for ((i = 1; i <= SECURE_CLUSTER_NODES; i++)); do
        until secure_cmd "$i" nodetool describecluster 2>/dev/null | cluster_settled "$SECURE_CLUSTER_NODES"; do
          (( waited < TIMEOUT )) || die "secured node$i does not see $SECURE_CLUSTER_NODES nodes Up/Normal on one schema within ${TIMEOUT}s"
          sleep 2
          waited=$((waited + 2))
        done
      done
      secure_roles "$hosts"
      # system_auth now has one replica per node: bring every node's copy up to date, once per cluster
      if [[ ! -f "$SECURE_DIR/cluster/node1/.auth-repaired" ]]; then
        secure_cmd 1 nodetool repair -full system_auth >/dev/null || die "repair of system_auth failed"
        touch "$SECURE_DIR/cluster/node1/.auth-repaired"
      fi
      say "secured cluster up: CQL+TLS on $hosts:9042 (CA $SECURE_CA_DIR/ca.pem), system_auth on every node; credentials: $0 secure env"
      ;;
    stop)
      local pids=() rc=0 pid  # all at once, as `cluster stop`
      for ((i = SECURE_CLUSTER_NODES; i >= 1; i--)); do secure_cmd "$i" stop & pids+=("$!"); done
      for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
      return "$rc"
      ;;
    status)
      local rc=0
      for ((i = 1; i <= SECURE_CLUSTER_NODES; i++)); do secure_cmd "$i" status || rc=1; done
      return "$rc"
      ;;
    stop-node | start-node | status-node | log | logfile)
      [[ "${1:-}" =~ ^[1-9]$ ]] && (( $1 <= SECURE_CLUSTER_NODES )) || usage "node index must be in 1..$SECURE_CLUSTER_NODES"
      i="$1"
      shift
      secure_cmd "$i" "${sub%-node}" "$@"
      ;;
    nodetool)
      [[ "${1:-}" =~ ^[1-9]$ ]] && (( $1 <= SECURE_CLUSTER_NODES )) || usage "node index must be in 1..$SECURE_CLUSTER_NODES"
      i="$1"
      shift
      secure_cmd "$i" nodetool "$@"
      ;;
    *) usage "usage: $0 secure cluster {start [--fresh]|stop|status|start-node I|stop-node I|status-node I|nodetool I ARGS...|log I|logfile I}" ;;
  esac
}

secure() {
  local sub="${1:-}"
  shift || true
  case "$sub" in
    start)
      fetch
      secure_tls "$SECURE_HOST"
      secure_jmx
      secure_cmd 0 start "$@"
      secure_roles "$SECURE_HOST"
      say "secured node up: CQL+TLS on $SECURE_HOST:9042 (CA $SECURE_CA_DIR/ca.pem), JMX with password on $JMX_HOST:$SECURE_JMX_PORT; credentials: $0 secure env"
      ;;
    stop | status | log | logfile | config | nodetool) secure_cmd 0 "$sub" "$@" ;;
    cluster) secure_cluster "$@" ;;
    env) secure_env ;;
    *) usage "usage: $0 secure {start [--fresh]|stop|status|nodetool ARGS...|log|logfile|config|env|cluster ...}" ;;
  esac
}

cmd="${1:-}"
shift || true
case "$cmd" in
  fetch) fetch; say "Cassandra $CASSANDRA_VERSION jars in $LIB_DIR" ;;
  start) start "$@" ;;
  status) status ;;
  stop) stop ;;
  discard) discard ;;
  restart) stop; start "$@" ;;
  nodetool) nodetool "$@" ;;
  log) log_tail ;;
  logfile) echo "$LOG_DIR/system.log" ;;
  config) print_config ;;
  cluster) cluster "$@" ;;
  dc) use_datacenters; cluster "$@" ;;
  secure) secure "$@" ;;
  *) usage "usage: $0 {fetch|start [--fresh] [--adopt]|status|stop|discard|restart|nodetool ARGS...|log|logfile|config|cluster ...|dc ...|secure ...}" ;;
esac
