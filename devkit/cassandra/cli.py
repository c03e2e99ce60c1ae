"""``scripts/cassandra.sh``'s command line (``python -m devkit.cassandra``): the single node, ``cluster ...``,
``dc ...`` and ``secure ...`` (see :mod:`devkit.cassandra` for the commands and the environment). Every setting
is read and checked before a command runs; an error prints ``[cassandra LABEL] ERROR: ...`` and exits 1, a
usage error exits 64."""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from devkit.cassandra.cluster import ClusterCommands
from devkit.cassandra.node import CASSANDRA_VERSION, Node, fetch, lib_dir, say
from devkit.cassandra.secured import make_jmx_files, make_tls, secure_env, set_up_roles
from devkit.cassandra.spec import (
    JMX_HOST,
    RunSettings,
    ScriptError,
    SpecError,
    node_from_environment,
    settings_from_environment,
)
from devkit.cassandra.topology import (
    SECURE_HOST,
    local_cluster,
    secure_cluster,
    secure_layout,
    secure_node,
    two_datacenters,
)

PROG = "scripts/cassandra.sh"
USAGE = (f"usage: {PROG} {{fetch|start [--fresh] [--adopt]|status|stop|discard|restart|nodetool ARGS...|log|logfile|"
         "config|cluster ...|dc ...|secure ...}")
SECURE_USAGE = f"usage: {PROG} secure {{start [--fresh]|stop|status|nodetool ARGS...|log|logfile|config|env|cluster ...}}"


def node_command(node: Node, command: str, arguments: Sequence[str]) -> int:
    """The commands every single node has (the local one, the secured one)."""
    if command == "start":
        node.start(arguments)
    elif command == "status":
        return node.status()
    elif command == "stop":
        node.stop()
    elif command == "discard":
        node.discard()
    elif command == "restart":
        node.stop()
        node.start(arguments)
    elif command == "nodetool":
        node.exec_nodetool(arguments)
    elif command == "log":
        node.log_tail()
    elif command == "logfile":
        print(node.system_log)
    elif command == "config":
        sys.stdout.write(node.config_text())
    else:
        raise SpecError(USAGE)
    return 0


def secure(arguments: Sequence[str], env: Mapping[str, str], settings: RunSettings) -> int:
    sub, rest = (arguments[0], arguments[1:]) if arguments else ("", [])
    layout = secure_layout(env)
    if sub == "cluster":
        return ClusterCommands(secure_cluster(env), settings, PROG, layout).run(rest)
    if sub == "env":
        sys.stdout.write(secure_env(layout, secure_cluster(env).hosts))
        return 0
    node = Node(secure_node(env), settings)
    if sub == "start":
        fetch(settings)
        make_tls(layout, SECURE_HOST, say)
        make_jmx_files(layout)
        node.start(rest)
        set_up_roles(layout, [SECURE_HOST], settings.timeout)
        say(f"secured node up: CQL+TLS on {SECURE_HOST}:9042 (CA {layout.ca_pem}), JMX with password on "
            f"{JMX_HOST}:{node.spec.jmx_port}; credentials: {PROG} secure env")
        return 0
    if sub in ("stop", "status", "log", "logfile", "config", "nodetool"):
        return node_command(node, sub, rest)
    raise SpecError(SECURE_USAGE)


def run(arguments: Sequence[str], env: Mapping[str, str]) -> int:
    settings = settings_from_environment(env)
    node = Node(node_from_environment(env), settings)
    command, rest = (arguments[0], arguments[1:]) if arguments else ("", [])
    if command == "fetch":
        fetch(settings)
        say(f"Cassandra {CASSANDRA_VERSION} jars in {lib_dir(settings)}")
        return 0
    if command == "cluster":
        return ClusterCommands(local_cluster(env), settings, PROG).run(rest)
    if command == "dc":
        return ClusterCommands(two_datacenters(env), settings, PROG).run(rest)
    if command == "secure":
        return secure(rest, env, settings)
    return node_command(node, command, rest)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv, os.environ)
    except ScriptError as exc:
        say(f"ERROR: {exc}", exc.label)
        return exc.exit_code
