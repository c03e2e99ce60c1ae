"""Local Apache Cassandra 5.0 nodes for airflow-atlas: tests, CI and users (``scripts/cassandra.sh``, which runs
``python -m devkit.cassandra``).

The package by concept: :mod:`~devkit.cassandra.spec` (a node: :class:`NodeSpec`, the settings' rules, the single
node from the environment), :mod:`~devkit.cassandra.topology` (the clusters as node specs),
:mod:`~devkit.cassandra.config` (the files a node runs on), :mod:`~devkit.cassandra.secured` (the secured
nodes' keys, certificates, secrets and roles), :mod:`~devkit.cassandra.node` (one node's process),
:mod:`~devkit.cassandra.cluster` (the commands on a cluster), :mod:`~devkit.cassandra.cli` (the command line).
Only :mod:`~devkit.cassandra.spec`, :mod:`~devkit.cassandra.topology` and :mod:`~devkit.cassandra.config` are
pure (they start nothing).

  scripts/cassandra.sh fetch            resolve cassandra-all + runtime deps from Maven Central (cached)
  scripts/cassandra.sh start [--fresh] [--adopt]
                                        start the node (default 127.0.0.1: 9042 CQL, 7199 JMX), wait for CQL
  scripts/cassandra.sh status           exit 0 when the node answers CQL
  scripts/cassandra.sh stop             stop the node (only a node this script started)
  scripts/cassandra.sh discard          kill the node (SIGKILL: no drain, seconds sooner) and delete its data
                                        (the logs stay): for a throwaway node, e.g. one a test started --fresh
  scripts/cassandra.sh nodetool ARGS    run nodetool against the node
  scripts/cassandra.sh log              print the last distinct messages of the node's system.log
  scripts/cassandra.sh logfile          print the path of the node's system.log
  scripts/cassandra.sh config           print the cassandra.yaml the node runs on (writes nothing)
  scripts/cassandra.sh cluster start [--fresh] | stop | discard | status | start-node I | stop-node I |
                               status-node I | nodetool I ARGS | log I | logfile I | config I
                                        an N-node cluster on 127.0.0.2 .. 127.0.0.(N+1), see below
  scripts/cassandra.sh dc start [--fresh] | stop | discard | status | start-node I | stop-node I | status-node I |
                               nodetool I ARGS | log I | logfile I | config I
                                        a TWO-DATACENTER cluster on 127.0.0.21 .. 127.0.0.23 (dc1: .21 .22,
                                        dc2: .23), see below
  scripts/cassandra.sh secure start [--fresh] | stop | status | nodetool ARGS | log | logfile | config | env
                                        a SECURED single node on 127.0.0.6, see below
  scripts/cassandra.sh secure cluster start [--fresh] | stop | status | start-node I | stop-node I |
                               status-node I | nodetool I ARGS | log I | logfile I
                                        a SECURED 3-node cluster on 127.0.0.7 .. 127.0.0.9

Environment of one node (all optional):
  ATLAS_CACHE_DIR          cache for jars (default ~/.cache/airflow-atlas; refused inside the repository)
  ATLAS_CASSANDRA_DIR      node directory: data, logs, pid (default ${TMPDIR:-/tmp}/airflow-atlas-cassandra)
  ATLAS_CASSANDRA_HEAP     heap size (default 1G)
  ATLAS_CASSANDRA_TIMEOUT  seconds to wait for CQL, and for a cluster's ring (default 240)
  ATLAS_CASSANDRA_JIT      c1 (default: quick start-up, what tests and CI use) or full (the JVM's normal
                           tiered C1+C2 compilation, as a production node runs: slower to start, less CPU
                           per request once warm; bench/run.py starts the node this way)
  ATLAS_CASSANDRA_PORT_OFFSET  run a second, private node: adds N to every port (CQL 9042, storage 7000,
                               JMX 7199); use it with its own ATLAS_CASSANDRA_DIR
  ATLAS_CASSANDRA_CQL_PORT / ATLAS_CASSANDRA_STORAGE_PORT / ATLAS_CASSANDRA_JMX_PORT  one port explicitly
  ATLAS_CASSANDRA_HOST     the node's address: listen_address and rpc_address (default 127.0.0.1; any
                           127.x.y.z works on Linux). JMX always listens on 127.0.0.1 (its port must differ
                           per node); nodetool targets 127.0.0.1:<JMX port>.
  ATLAS_CASSANDRA_SEEDS    seed list, e.g. "127.0.0.2:7000" (default: the node itself, HOST:STORAGE_PORT)
  ATLAS_CASSANDRA_CLUSTER_NAME  cluster_name (default airflow-atlas-local; with a moved port or another
                           address airflow-atlas-local-<address>-<CQL port>, so such a node never joins
                           another local node unless both name and seeds say so)
  ATLAS_CASSANDRA_INITIAL_TOKEN  the node's token (initial_token) and auto_bootstrap: false: a node of a
                           new, empty cluster joins the ring at once with a balanced token instead of
                           bootstrapping (the cluster command sets it; set it only for an empty cluster)
  ATLAS_CASSANDRA_DC / ATLAS_CASSANDRA_RACK  the node's datacenter and rack: endpoint_snitch
                           GossipingPropertyFileSnitch with a cassandra-rackdc.properties in the node
                           directory (default: SimpleSnitch, one datacenter `datacenter1`)
  ATLAS_CASSANDRA_ADOPT=1  (or `start --adopt`) accept a CQL server that already answers on HOST:CQL port
                           although this script did not start it (no live pid of ours in the node
                           directory). Without it `start` refuses: it would otherwise report success for a
                           node of another cluster, version or configuration.
With any of the port/address/seed/name/token/datacenter variables set, the node runs on a copy of cassandra.yaml
rendered into its node directory; without, the node runs on scripts/cassandra/conf/cassandra.yaml unchanged.
ATLAS_CACHE_DIR, ATLAS_CASSANDRA_JIT, ATLAS_CASSANDRA_TIMEOUT and ATLAS_CASSANDRA_ADOPT hold for the nodes of every
cluster below too; the other variables describe the single node only (and are checked for every command).

Cluster (`cluster ...`): node I (1..N) has address 127.0.0.(I+1), default ports (CQL 9042, storage 7000),
JMX port 7200+I, directory $ATLAS_CLUSTER_DIR/nodeI, seed 127.0.0.2:7000, cluster_name airflow-atlas-cluster.
Nodes start one after another (each waits for CQL); `cluster start` then waits until every node sees N
nodes Up/Normal. Environment:
  ATLAS_CLUSTER_NODES      N (default 3)
  ATLAS_CLUSTER_DIR        parent of the node directories (default ${TMPDIR:-/tmp}/airflow-atlas-cluster)
  ATLAS_CLUSTER_HEAP       heap per node (default 768M)
The cluster never touches the single node on 127.0.0.1.

Two datacenters (`dc ...`): the same commands on the cluster code path, with ATLAS_DC_LAYOUT nodes
(default 2+1: dc1 has nodes 1..2, dc2 node 3; 2+2 also works) on 127.0.0.21 .. 127.0.0.(20+N), JMX port
7220+I, directory $ATLAS_DC_DIR/nodeI (default ${TMPDIR:-/tmp}/airflow-atlas-dc), heap $ATLAS_DC_HEAP
(default 512M), seeds the first node of each datacenter, cluster_name airflow-atlas-dc, snitch
GossipingPropertyFileSnitch (dc1/dc2, rack rack1). Tokens are balanced within each datacenter (dc2's offset
by 100). A keyspace on it uses NetworkTopologyStrategy, e.g. {'dc1': 2, 'dc2': 1}; `dc stop-node 3` takes
all of dc2 down (with 2+1).

Secured node (`secure ...`): address 127.0.0.6 (CQL 9042, storage 7000, JMX 7206), directory
$ATLAS_SECURE_DIR/node (default ${TMPDIR:-/tmp}/airflow-atlas-secure), heap $ATLAS_SECURE_HEAP (default 768M),
cluster_name airflow-atlas-secure. It
runs as production Cassandra does: PasswordAuthenticator + CassandraAuthorizer, client-to-node TLS required
(no plain-text CQL), JMX with password and access files. At first start the script makes, with keytool:
one local CA ($ATLAS_SECURE_DIR/ca: ca.p12, and ca.pem for clients) and a node certificate signed by it for
the node's address (subjectAltName IP:127.0.0.6, so clients verify the hostname). It then replaces the
default superuser: role `atlas_admin` (superuser) gets a generated password, the `cassandra` role a random
one and no LOGIN. Every secret is a generated file, mode 0600, under $ATLAS_SECURE_DIR/secrets:
admin.password (CQL), jmx.password + jmx.access (the JVM's JMX files), nodetool.password (nodetool -pwf).
`secure env` prints them as shell variables (ATLAS_SECURE_HOST, ATLAS_SECURE_CA, ATLAS_SECURE_ADMIN_USER,
ATLAS_SECURE_ADMIN_PASSWORD_FILE, ...) for tests and the demo. Safe to re-run: existing keys, certificates
and passwords are kept; `secure start --fresh` removes the node's data (not the CA).
`secure cluster start` runs the same as a 3-node cluster on 127.0.0.7 .. 127.0.0.9 (JMX 7207 .. 7209, cluster
airflow-atlas-secure-cluster, directories $ATLAS_SECURE_DIR/cluster/nodeI), one certificate per node from the
same CA, system_auth replicated to every node (ALTER KEYSPACE, then one full repair of system_auth).
"""
