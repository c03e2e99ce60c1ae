"""The main job: a targeted-sweep demo, end to end.

1. opens a fresh store (embedded SQLite by default; ``--cassandra`` uses the local node; ``--datacenters`` a
   keyspace replicated in both datacenters of the local two-datacenter cluster; ``--cluster`` an
   RF 3 keyspace on the local 3-node cluster, swept by Spark jobs on the local standalone master;
   ``--secure`` the secured node 127.0.0.6 over TLS: the administrator initialises the store and creates the
   tables, everything after - workload, DAG run, oracle - runs as a least-privilege sweeper role),
2. writes a workload: committed transactions with overwrites and deletes across a CONSERVATIVE and a
   THOROUGH table, writers that died before committing, aborted transactions, and one long-running open
   transaction that holds the sweep timestamp back,
3. shows the queue backlog and why the sweep timestamp is held back,
4. finishes the open transaction and runs the ``atlas_targeted_sweep`` DAG for real (``dag.test()``
   against a private Airflow home under ``.atlas/``),
5. prints what was swept, the safety oracle's verdict, and the space reclaimed.

Run it with ``scripts/demo.sh`` (or ``python scripts/demo.py --help``). It lives in the repository, not in the
installed package: it needs the repository's ``scripts/`` and ``dags/``.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parent.parent
WORK_DIR = REPO_ROOT / ".atlas"
SHARDS = 4
WINDOW_SECONDS = 2.0
CLUSTER_HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")  # scripts/cassandra.sh cluster
DC_HOSTS = {"dc1": ("127.0.0.21", "127.0.0.22"), "dc2": ("127.0.0.23",)}  # scripts/cassandra.sh dc (2+1)
DC_REPLICATION = "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 1}"
SPARK_SCRIPT = REPO_ROOT / "scripts" / "spark.sh"
CASSANDRA_SCRIPT = REPO_ROOT / "scripts" / "cassandra.sh"
SECURE_SWEEPER = "atlas_demo_sweeper"  # the least-privilege role of --secure (grants: airflow_atlas.grants)


@dataclass(frozen=True)
class Secured:
    """The secured node (``scripts/cassandra.sh secure env``) and the demo's sweeper role: its password is
    made fresh for every run (ALTER ROLE) and lives only in this process and its Airflow connection."""

    host: str
    ca: str
    admin_user: str
    admin_password: str
    sweeper_password: str

    def url(self, user: str, password: str, keyspace: str, *, create_keyspace: bool) -> str:
        return (f"cassandra://{quote(user, safe='')}:{quote(password, safe='')}@{self.host}:9042/{keyspace}"
                f"?ssl=true&ssl_ca={quote(self.ca)}&create_keyspace={str(create_keyspace).lower()}")

    def cql(self, *statements: str) -> list:
        """Statements as the administrator, over TLS (the CA pinned, the host name verified); the last one's rows."""
        import ssl

        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import Cluster

        cluster = Cluster([self.host], auth_provider=PlainTextAuthProvider(self.admin_user, self.admin_password),
                          ssl_context=ssl.create_default_context(cafile=self.ca), protocol_version=5)
        try:
            session = cluster.connect()
            rows: list = []
            for statement in statements:
                rows = list(session.execute(statement, timeout=120))
            return rows
        finally:
            cluster.shutdown()


def _secured() -> Secured:
    result = subprocess.run([str(CASSANDRA_SCRIPT), "secure", "env"], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"scripts/cassandra.sh secure env failed:\n{result.stderr}")
    env = dict(line.split("=", 1) for line in result.stdout.split())
    if subprocess.run([str(CASSANDRA_SCRIPT), "secure", "status"], capture_output=True).returncode != 0:
        raise SystemExit("the secured node does not answer: scripts/cassandra.sh secure start (scripts/demo.sh --secure starts it)")
    return Secured(host=env["ATLAS_SECURE_HOST"], ca=env["ATLAS_SECURE_CA"], admin_user=env["ATLAS_SECURE_ADMIN_USER"],
                   admin_password=Path(env["ATLAS_SECURE_ADMIN_PASSWORD_FILE"]).read_text(),
                   sweeper_password=secrets.token_urlsafe(18))


def _secure_setup(args, sec: Secured, config, spec) -> None:
    """As the administrator: a fresh keyspace, the store initialised, the workload's tables created; then the
    sweeper role (a fresh password) with exactly the grants of ``atlas-sweep grants --role sweeper``."""
    from airflow_atlas.grants import sweeper_grants
    from airflow_atlas.store import AtlasStore

    sec.cql(f"DROP KEYSPACE IF EXISTS {args.keyspace}")
    with AtlasStore.open(sec.url(sec.admin_user, sec.admin_password, args.keyspace, create_keyspace=True), config) as admin:
        admin.initialize(shards=SHARDS)
        for table, strategy in spec.tables.items():
            admin.create_table(table, strategy)
        grants = sweeper_grants(args.keyspace, admin.kvs.list_tables())
    password = sec.sweeper_password.replace("'", "''")
    exists = sec.cql(f"SELECT role FROM system_auth.roles WHERE role = '{SECURE_SWEEPER}'")
    verb = "ALTER" if exists else "CREATE"  # (Cassandra refuses a second password change within 5 s)
    sec.cql(f"{verb} ROLE {SECURE_SWEEPER} WITH LOGIN = true AND PASSWORD = '{password}'",
            *(g.cql(SECURE_SWEEPER).rstrip(";") for g in grants))
    print(f"administrator {sec.admin_user}: store initialised, tables created; role {SECURE_SWEEPER} granted "
          + ", ".join(f"{g.permission} on {g.resource}" for g in grants[:2]) + f" and {len(grants) - 2} more (MODIFY per table, SELECT on the repair history)")


def _print(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)), flush=True)


def _version_counts(store, tables) -> dict[str, tuple[int, int]]:
    """(data versions, sentinels) per table."""
    counts = {}
    for table in tables:
        data = sentinels = 0
        for _, ts, _ in store.kvs.scan(table):
            if ts < 0:
                sentinels += 1
            else:
                data += 1
        counts[table] = (data, sentinels)
    return counts


def _hosts(args) -> list[str]:
    if args.datacenters:
        return [h for hosts in DC_HOSTS.values() for h in hosts]
    return list(CLUSTER_HOSTS) if args.cluster else [args.cassandra_host]


def _dc_url(keyspace: str, datacenter: str) -> str:
    """A store URL local to ``datacenter`` of the two-datacenter cluster (the driver's local_dc)."""
    return f"cassandra://{','.join(DC_HOSTS[datacenter])}:9042/{keyspace}?datacenter={datacenter}"


def _store_url(args, sec: Secured | None = None) -> str:
    if sec is not None:
        return sec.url(SECURE_SWEEPER, sec.sweeper_password, args.keyspace, create_keyspace=False)
    if args.datacenters:
        return _dc_url(args.keyspace, "dc1")  # writers and the sweep in dc1; the oracle also from dc2
    if args.cluster:
        return f"cassandra://{','.join(CLUSTER_HOSTS)}:9042/{args.keyspace}?replication_factor={len(CLUSTER_HOSTS)}"
    if args.cassandra:
        return f"cassandra://{args.cassandra_host}:9042/{args.keyspace}"
    return f"sqlite:///{WORK_DIR / 'demo.db'}"


def _fresh(args) -> None:
    WORK_DIR.mkdir(exist_ok=True)
    if args.secure:
        return  # the administrator drops the keyspace (_secure_setup)
    if args.cassandra:
        from cassandra.cluster import Cluster

        cluster = Cluster(_hosts(args), protocol_version=5)
        try:
            session = cluster.connect()
            session.execute(f"DROP KEYSPACE IF EXISTS {args.keyspace}", timeout=120)
            if args.datacenters:
                session.execute(f"CREATE KEYSPACE {args.keyspace} WITH replication = {DC_REPLICATION}", timeout=120)
        finally:
            cluster.shutdown()
    else:
        for suffix in ("", "-wal", "-shm"):
            path = WORK_DIR / f"demo.db{suffix}"
            if path.exists():
                path.unlink()


def _airflow_env(args, url: str, sec: Secured | None = None) -> dict:
    home = WORK_DIR / "airflow"
    if home.exists() and not (home / ".migrated").exists():
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if sec is not None:
        conn = {
            "conn_type": "cassandra", "host": sec.host, "port": 9042, "schema": args.keyspace,
            "login": SECURE_SWEEPER, "password": sec.sweeper_password, "extra": {"ssl": True, "ssl_ca": sec.ca},
        }
    elif args.cluster:
        conn = {
            "conn_type": "cassandra", "host": ",".join(CLUSTER_HOSTS), "port": 9042, "schema": args.keyspace,
            "extra": {"replication_factor": len(CLUSTER_HOSTS)},
        }
    elif args.cassandra:
        conn = {"conn_type": "cassandra", "host": args.cassandra_host, "port": 9042, "schema": args.keyspace}
    else:
        conn = {"conn_type": "atlas_embedded", "host": str(WORK_DIR / "demo.db")}
    settings = {
        "shard_count": SHARDS,
        "store_config": {"unreadable_window_seconds": WINDOW_SECONDS, "punch_interval_seconds": 0.2},
        "skip_idle_shards": False,
    }
    if args.group_size:
        settings["in_task_group_size"] = args.group_size
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW_CONN_ATLAS_DEFAULT": json.dumps(conn),
            "AIRFLOW_VAR_ATLAS_SETTINGS": json.dumps(settings),  # a private, throw-away Variable for the demo
            "ATLAS_DAG_SETTINGS": json.dumps({"retry_delay_seconds": 1}),  # DAG-shaping: read at parse time
        }
    )
    if args.cluster:
        env.update(_spark_cluster_env(settings))
        env["AIRFLOW_VAR_ATLAS_SETTINGS"] = json.dumps(settings)
    if not (home / ".migrated").exists():
        print("  (first run: migrating a private Airflow metadata database, a few seconds)", flush=True)
        result = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"airflow db migrate failed:\n{result.stderr[-2000:]}")
        (home / ".migrated").touch()
    return env


def _spark_cluster_env(settings: dict) -> dict:
    """Sweep with Spark jobs on the local standalone master (scripts/spark.sh): the connection, and the
    driver's properties (master, executors' Python, driver host) as the spark-defaults.conf of a private
    SPARK_CONF_DIR, which spark-submit reads."""
    conf = subprocess.run([str(SPARK_SCRIPT), "conf"], capture_output=True, text=True, check=True).stdout
    props = dict(line.split(" ", 1) for line in conf.splitlines() if line.strip())
    conf_dir = WORK_DIR / "spark-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(conf + "spark.ui.enabled false\n")
    host, port = props["spark.master"].removeprefix("spark://").split(":")
    settings.update({"execution_mode": "spark", "spark_conn_id": "atlas_spark"})
    return {
        "AIRFLOW_CONN_ATLAS_SPARK": json.dumps({"conn_type": "spark", "host": f"spark://{host}", "port": int(port)}),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_LOCAL_IP": props["spark.driver.host"],
    }


def _run_dag(env: dict) -> dict:
    """Run atlas_targeted_sweep with dag.test() in a child process that has the demo's Airflow env."""
    code = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
if bag.import_errors:
    print(json.dumps({"error": bag.import_errors})); sys.exit(1)
dag = bag.dags["atlas_targeted_sweep"]
run = dag.test()
states = {}
for ti in run.get_task_instances():
    states[ti.state] = states.get(ti.state, 0) + 1
print("@@RESULT@@" + json.dumps({"state": str(run.state), "task_states": {str(k): v for k, v in states.items()}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code, str(REPO_ROOT / "dags")], env=env, capture_output=True, text=True
    )
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@") :])
    raise SystemExit(f"the DAG run did not report back:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo.sh", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cassandra", action="store_true", help="use the local Cassandra node instead of the embedded store")
    parser.add_argument("--cassandra-host", default="127.0.0.1")
    parser.add_argument(
        "--cluster", action="store_true",
        help="RF 3 keyspace on the local 3-node cluster (127.0.0.2-4), swept by Spark jobs on the local standalone "
        "master (127.0.0.5:7077); scripts/demo.sh --cluster starts both",
    )
    parser.add_argument(
        "--secure", action="store_true",
        help="the secured node (127.0.0.6: TLS, passwords, CassandraAuthorizer): the administrator sets up the store, "
        f"the rest runs as the least-privilege role {SECURE_SWEEPER}; scripts/demo.sh --secure starts the node",
    )
    parser.add_argument(
        "--datacenters", action="store_true",
        help="two datacenters (scripts/cassandra.sh dc: dc1 127.0.0.21-22, dc2 127.0.0.23), a keyspace with replicas "
        "in both (dc1: 2, dc2: 1): writers and the sweep (in-process) in dc1, the safety oracle from dc1 and from "
        "dc2; scripts/demo.sh --datacenters starts the cluster",
    )
    parser.add_argument("--keyspace", default="atlas_demo")
    parser.add_argument("--group-size", type=int, default=None,
                        help="(shard, strategy) pairs per task group of the DAG run (default: the setting's default)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="the demo's files: embedded store, private Airflow home (default: .atlas/ in the repository)")
    parser.add_argument("--transactions", type=int, default=400, help="committed/dead/aborted transactions to write")
    parser.add_argument("--engine-only", action="store_true", help="sweep in-process instead of running the Airflow DAG")
    args = parser.parse_args(argv)
    global WORK_DIR
    WORK_DIR = (args.work_dir or WORK_DIR).resolve()
    if args.secure and (args.cluster or args.cassandra):
        parser.error("--secure runs on the secured node alone: not with --cassandra or --cluster")
    if args.datacenters and (args.cluster or args.secure):
        parser.error("--datacenters runs on the two-datacenter cluster alone: not with --cluster or --secure")
    args.cassandra = args.cassandra or args.cluster or args.secure or args.datacenters
    args.engine_only = args.engine_only or args.datacenters

    from airflow_atlas.config import StoreConfig
    from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES
    from airflow_atlas.oracle import Reader, compare, observe, obsolete_versions
    from airflow_atlas.serialisation import to_json
    from airflow_atlas.store import AtlasStore
    from airflow_atlas.workload import WorkloadSpec, run_workload

    sec = _secured() if args.secure else None
    url = _store_url(args, sec)
    _fresh(args)
    config = StoreConfig(unreadable_window_seconds=WINDOW_SECONDS, punch_interval_seconds=0.2, initial_shards=SHARDS)
    spec = WorkloadSpec(transactions=args.transactions, rows=150, open_transactions=1)
    if sec is not None:
        _secure_setup(args, sec, config, spec)
    store = AtlasStore.open(url, config)
    try:
        _print(f"store: {store.describe()}")
        if sec is None:
            store.initialize(shards=SHARDS)
        started = time.monotonic()
        report = run_workload(store, spec)
        tables = list(spec.tables)
        print(
            f"workload: {report.committed} committed, {report.dead_writers} dead writers (wrote, never committed), "
            f"{report.aborted} aborted, {report.conflicts} conflicts, {report.writes} writes "
            f"({report.deletes} deletes) in {time.monotonic() - started:.1f}s; "
            f"1 transaction left open (start ts {report.open[0].start_timestamp})"
        )
        before_versions = _version_counts(store, tables)
        print("data versions stored per table:", {t: n for t, (n, _) in before_versions.items()})

        _print("why nothing can be swept yet")
        for strategy in SWEEPABLE_STRATEGY_NAMES:
            why = store.sweep_timestamps.explain(strategy)
            oldest = why["oldest_open_transaction"]
            print(
                f"{strategy:12s} sweep ts {why['sweep_ts']}: limited by {why['limited_by']}"
                + (f" (open transaction started at ts {oldest['start_ts']}, {oldest['age_seconds']:.1f}s old)" if oldest else "")
            )

        _print("finishing the open transaction; waiting out the read-only window")
        report.open[0].commit()
        time.sleep(WINDOW_SECONDS + 0.5)
        final_ts = store.timestamps.fresh_timestamp()
        readers = [Reader(final_ts), Reader(final_ts, read_only=True)]
        before = observe(store, readers, tables)

        if args.engine_only:
            _print("sweeping in-process (engine only)")
            totals = {"entries_read": 0, "cells_tombstoned": 0, "aborted_writes_deleted": 0, "transactions_aborted": 0}
            for strategy in SWEEPABLE_STRATEGY_NAMES:
                for shard in range(SHARDS):
                    result = to_json(store.sweeper.sweep_shard(shard, strategy))
                    for key in totals:
                        totals[key] += result[key]
            print(json.dumps(totals))
        else:
            _print("running the atlas_targeted_sweep DAG (Airflow dag.test())")
            env = _airflow_env(args, url, sec)
            started = time.monotonic()
            outcome = _run_dag(env)
            print(f"DAG run {outcome['state']} in {time.monotonic() - started:.1f}s; task states {outcome['task_states']}")
            if "success" not in outcome["state"]:
                return 1

        _print("what the sweep did")
        after_versions = _version_counts(store, tables)
        # What the run swept up to: the lowest progress over the shards of each strategy (+1 = exclusive).
        sweep_ts = {
            strategy: min(store.queue.progress.get_progress(shard, strategy) for shard in range(SHARDS)) + 1
            for strategy in SWEEPABLE_STRATEGY_NAMES
        }
        for table in tables:
            (b_data, b_sent), (a_data, a_sent) = before_versions[table], after_versions[table]
            print(f"{table:20s} data versions {b_data:6d} -> {a_data:6d}   sentinels {b_sent:4d} -> {a_sent:4d}")
        for strategy in SWEEPABLE_STRATEGY_NAMES:
            for shard in range(SHARDS):
                runs = store.history.recent(shard, strategy, limit=50)
                swept = sum(r.get("cells_tombstoned", 0) for r in runs)
                aborted = sum(r.get("aborted_writes_deleted", 0) for r in runs)
                progress = store.queue.progress.get_progress(shard, strategy)
                print(f"{strategy:12s} shard {shard}: progress {progress:8d}  tombstoned {swept:5d}  aborted writes deleted {aborted:4d}")

        _print("safety oracle")
        after = observe(store, readers, tables)
        violations = compare(before, after, sweep_ts)
        leftovers = obsolete_versions(store, sweep_ts, tables)
        if args.datacenters:  # the same oracle from the other datacenter (reads at LOCAL_QUORUM in dc2)
            west = AtlasStore.open(_dc_url(args.keyspace, "dc2"), config)
            try:
                violations += [f"seen from dc2: {v}" for v in compare(before, observe(west, readers, tables), sweep_ts)]
                leftovers += [f"seen from dc2: {v}" for v in obsolete_versions(west, sweep_ts, tables)]
            finally:
                west.close()
            print("oracle run from dc1 and from dc2 (the keyspace: dc1 2 replicas, dc2 1)")
        print(
            f"visible data unchanged: {'yes' if not violations else 'NO'}; "
            f"obsolete versions left below the swept-to timestamps {sweep_ts}: {len(leftovers)}"
        )
        for line in (violations + leftovers)[:10]:
            print("  ", line)

        if store.kvs.backend == "sqlite" and hasattr(store.kvs, "vacuum"):
            before_bytes, after_bytes = store.kvs.vacuum()
            _print("space")
            print(f"embedded store file: {before_bytes / 1024:.0f} KiB -> {after_bytes / 1024:.0f} KiB after VACUUM")
        return 0 if not violations and not leftovers else 1
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
