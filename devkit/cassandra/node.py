"""One node's process: the jars (fetched once through Maven), start (idempotent: a running node is reused, never
restarted; a CQL server this script did not start is refused unless adopted), status, stop, discard, nodetool
and its log. A node is identified by its directory: only the process whose pid the directory holds and whose
command line names that directory is ever signalled."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from devkit.cassandra.config import (
    CLIENT_OPTIONS,
    CONF_DIR,
    SERVER_OPTIONS,
    SHIPPED_CONFIG,
    jvm_options,
    render_config,
    render_rackdc,
)
from devkit.cassandra.secured import read_secret
from devkit.cassandra.spec import JMX_HOST, NodeSpec, RunSettings, ScriptError, SpecError

CASSANDRA_VERSION = "5.0.7"
REPO_ROOT = Path(__file__).resolve().parents[2]
POM = REPO_ROOT / "scripts" / "cassandra" / "pom.xml"
GOSSIP_FAILURE = "Unable to gossip with any peers"
STOP_SECONDS = 60
KILL_SECONDS = 30


def say(message: str, label: str = "") -> None:
    """A message to stderr, ``[cassandra LABEL] ...`` (one write: the nodes of a cluster stop at once)."""
    sys.stderr.write(f"[cassandra{' ' + label if label else ''}] {message}\n")
    sys.stderr.flush()


def lib_dir(settings: RunSettings) -> Path:
    return settings.cache_dir / f"cassandra-{CASSANDRA_VERSION}" / "lib"


def check_cache_dir(settings: RunSettings) -> None:
    """The jar cache never lies inside the repository (a HOME or ATLAS_CACHE_DIR pointing into the checkout once
    put 67 MB of jars under scripts/.cache, and a commit picked them up)."""
    cache, repo = os.path.realpath(settings.cache_dir), os.path.realpath(REPO_ROOT)
    if (cache + "/").startswith(repo + "/"):
        raise SpecError(f"the jar cache {cache} lies inside the repository {repo}; set ATLAS_CACHE_DIR (or HOME) to "
                        "a directory outside it")


def fetch(settings: RunSettings) -> None:
    """cassandra-all and its runtime dependencies from Maven Central into the jar cache (once)."""
    check_cache_dir(settings)
    lib = lib_dir(settings)
    if (lib / ".complete").is_file():
        return
    if shutil.which("mvn") is None:
        raise ScriptError(f"Maven (mvn) is required to fetch Cassandra {CASSANDRA_VERSION}")
    if shutil.which("java") is None:
        raise ScriptError(f"Java 17 is required to run Cassandra {CASSANDRA_VERSION}")
    say(f"resolving org.apache.cassandra:cassandra-all:{CASSANDRA_VERSION} and runtime dependencies into {lib}")
    tmp = lib.with_name("lib.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    done = subprocess.run(["mvn", "-q", "-B", "-f", str(POM), f"-Dcassandra.version={CASSANDRA_VERSION}",
                           "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"])
    if done.returncode != 0:
        raise ScriptError(f"Maven could not resolve cassandra-all {CASSANDRA_VERSION}")
    if not (tmp / f"cassandra-all-{CASSANDRA_VERSION}.jar").is_file():
        raise ScriptError("cassandra-all jar missing after resolution")
    shutil.rmtree(lib, ignore_errors=True)
    tmp.rename(lib)
    (lib / ".complete").touch()


def cql_answers(host: str, port: int, ca: Path | None = None) -> bool:
    """The CQL native protocol answers: OPTIONS (v4) gets SUPPORTED. ``ca``: a secured node, TLS only, its
    certificate and hostname verified against that CA."""
    try:
        with socket.create_connection((host, port), timeout=3) as raw:
            sock: socket.socket = raw
            if ca is not None:
                sock = ssl.create_default_context(cafile=str(ca)).wrap_socket(raw, server_hostname=host)
            sock.sendall(struct.pack(">BBhBi", 0x04, 0, 0, 0x05, 0))
            header = b""
            while len(header) < 9:
                chunk = sock.recv(9 - len(header))
                if not chunk:
                    return False
                header += chunk
            return header[4] == 0x06
    except OSError:
        return False


def alive(pid: int) -> bool:
    """``pid`` runs (a child of this process that exited is reaped, not counted)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exited_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


_LOG_PREFIX = re.compile(r"^[A-Z]+ +\[[^]]*\] [0-9-]+ [0-9:,]+ ")


def distinct_messages(lines: Sequence[str], keep: int = 40) -> list[str]:
    """The last ``keep`` distinct messages of system.log lines: a message repeated thousands of times is shown
    once, where it first appeared, so it cannot push the cause out of view."""
    seen: set[str] = set()
    found = []
    for line in lines:
        message = _LOG_PREFIX.sub("", line, count=1)
        if message not in seen:
            seen.add(message)
            found.append(line)
    return found[-keep:]


def _tail(path: Path, lines: int) -> list[str]:
    return path.read_text(errors="replace").splitlines()[-lines:]


@contextmanager
def _detached_signals() -> Iterator[None]:
    """What the JVM inherits, as a background job of a script under nohup: SIGHUP, SIGINT and SIGQUIT ignored
    (a terminal's hang-up or Ctrl-C ends the command, not the node)."""
    names = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
    old = [signal.signal(sig, signal.SIG_IGN) for sig in names]
    try:
        yield
    finally:
        for sig, handler in zip(names, old, strict=True):
            signal.signal(sig, handler)


@dataclass
class Node:
    """The commands on one node."""

    spec: NodeSpec
    settings: RunSettings

    def say(self, message: str) -> None:
        say(message, self.spec.label)

    def fail(self, message: str) -> ScriptError:
        return ScriptError(message, self.spec.label)

    @property
    def config_file(self) -> Path:
        return SHIPPED_CONFIG if self.spec.runs_on_shipped_config else self.spec.rendered_config

    @property
    def system_log(self) -> Path:
        return self.spec.log_dir / "system.log"

    def config_text(self) -> str:
        """The cassandra.yaml the node runs on."""
        if self.spec.runs_on_shipped_config:
            return SHIPPED_CONFIG.read_text()
        security = self.spec.security
        password = read_secret(security.keystore_password_file) if security is not None else ""
        return render_config(self.spec, password)

    def cql_answers(self) -> bool:
        security = self.spec.security
        return cql_answers(self.spec.host, self.spec.cql_port, security.ca if security is not None else None)

    def running_pid(self) -> int | None:
        """The pid in the node directory, when that process is alive AND is the Cassandra of this node
        directory (a recycled pid of another process is not ours)."""
        try:
            text = self.spec.pid_file.read_text().strip()
        except OSError:
            return None
        if not text.isdigit() or not alive(int(text)):
            return None
        pid = int(text)
        try:
            arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return pid
        return pid if f"-Dcassandra.storagedir={self.spec.data_dir}".encode() in arguments else None

    def log_tail(self) -> None:
        """The last 40 distinct messages of system.log, then the last 20 lines of stdout.log (to stderr)."""
        if self.system_log.is_file():
            print(f"----- last 40 distinct messages of {self.system_log} -----", file=sys.stderr)
            for line in distinct_messages(_tail(self.system_log, 20000)):
                print(line, file=sys.stderr)
        stdout_log = self.spec.log_dir / "stdout.log"
        if stdout_log.is_file():
            print(f"----- last 20 lines of {stdout_log} -----", file=sys.stderr)
            for line in _tail(stdout_log, 20):
                print(line, file=sys.stderr)
        sys.stderr.flush()

    def java_command(self) -> list[str]:
        """The JVM's command line. cassandra.superuser_setup_delay_ms keeps Cassandra's default (10 s): the role
        manager retries its setup after that delay for as long as a node of the ring is down, and with 0 the
        retry is a busy loop that logs thousands of lines a second (a whole core, system.log rolled over every
        few seconds)."""
        spec, lib = self.spec, lib_dir(self.settings)
        jamm = sorted(str(p) for p in lib.glob("jamm-*.jar"))
        if not jamm:
            raise self.fail(f"no jamm-*.jar in {lib} (remove {lib / '.complete'} to fetch the jars again)")
        command = ["java", *jvm_options(SERVER_OPTIONS, self.settings.jit), f"-Xms{spec.heap}", f"-Xmx{spec.heap}",
                   f"-javaagent:{jamm[0]}", f"-Dcassandra.config=file://{self.config_file}",
                   f"-Dcassandra.storagedir={spec.data_dir}", f"-Dcassandra.logdir={spec.log_dir}",
                   f"-Dlogback.configurationFile=file://{CONF_DIR / 'logback.xml'}", "-Dcassandra-foreground=yes",
                   f"-Dcassandra.jmx.local.port={spec.jmx_port}"]
        if spec.datacenter is not None:
            command.append(f"-Dcassandra-rackdc.properties=file://{spec.rackdc_file}")
        if spec.security is not None:
            command += ["-Dcom.sun.management.jmxremote.authenticate=true",
                        f"-Dcom.sun.management.jmxremote.password.file={spec.security.jmx_password_file}",
                        f"-Dcom.sun.management.jmxremote.access.file={spec.security.jmx_access_file}"]
        return [*command, "-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=100",
                "-cp", f"{lib}/*", "org.apache.cassandra.service.CassandraDaemon"]

    def write_files(self) -> None:
        """The node's rendered cassandra.yaml (mode 0600 for a secured node: it holds the keystore password)
        and its rackdc file, when it has them."""
        spec = self.spec
        if not spec.runs_on_shipped_config:
            tmp = spec.rendered_config.with_name("cassandra.yaml.tmp")
            text = self.config_text()
            if spec.security is not None:
                tmp.unlink(missing_ok=True)
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                    out.write(text)
                tmp.chmod(0o600)
            else:
                tmp.write_text(text)
            tmp.replace(spec.rendered_config)
        if spec.datacenter is not None:
            spec.rackdc_file.write_text(render_rackdc(spec))

    def start(self, arguments: Sequence[str] = (), *, retried: bool = False) -> None:
        fresh, adopt = False, self.settings.adopt
        for argument in arguments:
            if argument == "--fresh":
                fresh = True
            elif argument == "--adopt":
                adopt = True
            else:
                raise SpecError(f"start takes --fresh and --adopt, got '{argument}'")
        spec = self.spec
        where = f"{spec.host}:{spec.cql_port}"
        pid = self.running_pid()
        if pid is not None and self.cql_answers():
            self.say(f"already running (pid {pid}), CQL on {where}")
            return
        if self.cql_answers():
            if adopt:
                self.say(f"a CQL server already answers on {where} (not started by this script); adopting it "
                         "(ATLAS_CASSANDRA_ADOPT=1)")
                return
            raise self.fail(
                f"a CQL server already answers on {where} but this script did not start it (no live pid in "
                f"{spec.directory}); refusing to adopt it. Use it anyway with ATLAS_CASSANDRA_ADOPT=1 (or start "
                "--adopt), or choose another address/port/ATLAS_CASSANDRA_DIR")
        fetch(self.settings)
        pid = self.running_pid()
        if pid is not None:
            self.say(f"pid {pid} exists but CQL does not answer; stopping it first")
            self.stop()
        if fresh:
            shutil.rmtree(spec.directory, ignore_errors=True)
        spec.data_dir.mkdir(parents=True, exist_ok=True)
        spec.log_dir.mkdir(parents=True, exist_ok=True)
        self.write_files()
        in_dc = f" (datacenter {spec.datacenter})" if spec.datacenter is not None else ""
        self.say(f"starting Cassandra {CASSANDRA_VERSION} on {spec.host}{in_dc} (cluster {spec.cluster_name}, seeds "
                 f"{spec.seeds}, heap {spec.heap}, JIT {self.settings.jit}) in {spec.directory}")
        stdout_log = spec.log_dir / "stdout.log"
        command = self.java_command()
        try:
            with open(stdout_log, "wb") as out, _detached_signals():
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        except FileNotFoundError:
            raise self.fail(f"Java 17 is required to run Cassandra {CASSANDRA_VERSION}") from None
        spec.pid_file.write_text(f"{process.pid}\n")
        waited = 0
        while waited < self.settings.timeout:
            if process.poll() is not None:
                # ring_delay_ms=100 gives a joining node about a second to hear from a seed: on a loaded machine
                # a seed that is up may answer later, and the node exits. That is worth one more start, nothing
                # else is.
                if not retried and GOSSIP_FAILURE in stdout_log.read_text(errors="replace"):
                    self.say(f"no seed answered in time ({GOSSIP_FAILURE}): starting once more")
                    spec.pid_file.unlink(missing_ok=True)
                    self.start([a for a in arguments if a != "--fresh"], retried=True)
                    return
                self.log_tail()
                raise self.fail(f"Cassandra exited during startup (see above; node dir {spec.directory})")
            # Ready when our process answers the CQL handshake. Not from system.log: a log that rolls over
            # between two polls carries the "listening for CQL clients" line away with it.
            if self.cql_answers():
                self.say(f"up after {waited}s: CQL on {where}, JMX on {JMX_HOST}:{spec.jmx_port} (pid "
                         f"{process.pid})")
                return
            time.sleep(1)
            waited += 1
        self.log_tail()
        raise self.fail(f"Cassandra did not answer CQL on {where} within {self.settings.timeout}s (node dir "
                        f"{spec.directory})")

    def status(self) -> int:
        """0: CQL answers; 2: our process lives but CQL does not answer yet; 1: not running."""
        pid = self.running_pid()
        where = f"{self.spec.host}:{self.spec.cql_port}"
        if self.cql_answers():
            if pid is not None:
                self.say(f"running (pid {pid}): CQL answers on {where}")
            else:
                self.say(f"CQL answers on {where}, but not a node this script started (no live pid in "
                         f"{self.spec.directory})")
            return 0
        if pid is not None:
            self.say(f"process {pid} is alive but CQL does not answer yet")
            return 2
        self.say("not running")
        return 1

    def stop(self) -> None:
        pid = self.running_pid()
        if pid is None:
            self.say(f"not running (no live pid of this node directory: {self.spec.directory})")
            self.spec.pid_file.unlink(missing_ok=True)
            return
        self.say(f"stopping pid {pid}")
        _signal(pid, signal.SIGTERM)
        if not exited_within(pid, STOP_SECONDS):
            self.say(f"did not stop within {STOP_SECONDS}s; killing")
            _signal(pid, signal.SIGKILL)
        self.spec.pid_file.unlink(missing_ok=True)
        self.say("stopped")

    def discard(self) -> None:
        """A node whose data nobody needs again (a test's fresh node): SIGKILL instead of the JVM's shutdown,
        which drains (flushes every table's memtable: most of the 20-30 s a loaded test cluster took to stop),
        then the data goes (the next start starts empty, as with --fresh); the logs stay."""
        pid = self.running_pid()
        if pid is not None:
            self.say(f"discarding pid {pid} (SIGKILL) and its data")
            _signal(pid, signal.SIGKILL)
            if not exited_within(pid, KILL_SECONDS):
                raise self.fail(f"pid {pid} did not exit within {KILL_SECONDS}s of SIGKILL")
        self.spec.pid_file.unlink(missing_ok=True)
        shutil.rmtree(self.spec.data_dir, ignore_errors=True)
        self.say("discarded")

    def nodetool_command(self, arguments: Sequence[str]) -> list[str]:
        lib = lib_dir(self.settings)
        command = ["java", *jvm_options(CLIENT_OPTIONS, self.settings.jit),
                   f"-Dlogback.configurationFile=file://{CONF_DIR / 'logback-tools.xml'}", "-cp", f"{lib}/*",
                   "org.apache.cassandra.tools.NodeTool", "-h", JMX_HOST, "-p", str(self.spec.jmx_port)]
        if self.spec.security is not None:
            command += ["-u", "atlas_jmx", "-pwf", str(self.spec.security.nodetool_password_file)]
        return [*command, *arguments]

    def nodetool(self, arguments: Sequence[str], *, capture: bool = False) -> subprocess.CompletedProcess[str]:
        """nodetool against the node's JMX port (its output captured when asked, else this process's)."""
        fetch(self.settings)
        return subprocess.run(self.nodetool_command(arguments), capture_output=capture, text=True)

    def exec_nodetool(self, arguments: Sequence[str]) -> NoReturn:
        """nodetool in place of this process (its exit status is the command's; a signal reaches it)."""
        fetch(self.settings)
        command = self.nodetool_command(arguments)
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as a shell leaves it (Python ignores it)
        os.execvp(command[0], command)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
