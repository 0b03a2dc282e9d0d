"""``compactlog serve``: one broker process (Kafka's ``BrokerServer`` start-up and shutdown).

Start-up: the data dir is already open for writing (the caller took the data-dir lock, which the
broker holds until it exits); ``meta.properties`` gives the cluster and node ids; an internal
topic a crash left short during its creation is made whole (coordinator/internal_topics.py); only the
internal topics' logs are opened before the listeners, so that start-up does not grow with the
partition count: each other log is opened on first use, which recovers what lies past its
recovery point exactly as ``LogManager.loadLogs`` does, and after an unclean shutdown a background
thread recovers the logs not used yet (on a dir no broker has served, every log is opened first,
to find the highest producer id). Then the listeners, the worker pool and the background threads start, the group
coordinator loads ``__consumer_offsets`` in its own thread (coordinator/group/service.py) and the transaction
coordinator, once that is done, ``__transaction_state`` (coordinator/txn/service.py; the topic is created on
first use).
Shutdown on SIGINT/SIGTERM (``BrokerServer.shutdown``): stop accepting, let in-flight requests
finish for at most ``SHUTDOWN_GRACE_S`` (a client that stopped reading is not waited for: its
answers are dropped), answer waiting fetches, stop the cleaner and the scheduler, then close
every open log (producer snapshots, flush, trimmed indexes), write the checkpoints and the
clean-shutdown marker, and let go of the lock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ..cleaner.engines import make_executor
from ..errors import CompactlogError, ConfigError
from ..record import jit
from ..storage.datadir import DataDir
from .authorizer.standard import authorizer_enabled, authorizer_for, parse_super_users
from .authorizer.store import AclStore
from .background import Background
from ..coordinator.group.service import for_broker as group_coordinator_for
from ..coordinator.internal_topics import repair as repair_internal_topics
from ..coordinator.txn.service import for_broker as transaction_coordinator_for
from .dispatch import advertised_apis, dispatch_table
from .metrics import BrokerMetrics
from .metrics.health import NOT_RUNNING, RUNNING, SHUTTING_DOWN, shutdown_hold
from .security.credentials import CredentialCache
from .security.listeners import DEFAULT_PROTOCOL_MAP, BrokerSecurity, parse_protocol_map
from .state import (INTERNAL_TOPICS, PRODUCER_ID_FILE, BrokerState, Listener, ProducerIdManager, load_identity,
                    parse_listeners)
from .status.routes import register_status_page
from .transport import BrokerServer, pid_cpu_seconds
from .warm import start as start_kernel_warm_up

log = logging.getLogger("kafka.server.KafkaServer")

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
# how long requests in flight may take to finish at SIGTERM before their connections are closed
# (Kafka bounds its controlled shutdown too); a client that stopped reading is not waited for
SHUTDOWN_GRACE_S = 5.0


def configure_logging(log_file: str | None = None, level: int = logging.INFO) -> None:
    """Kafka's log4j layout, one line per event, on stderr (and in ``log_file``)."""
    formatter = logging.Formatter(LOG_FORMAT)
    root = logging.getLogger("kafka")
    root.setLevel(level)
    root.propagate = False
    for h in list(root.handlers):
        root.removeHandler(h)
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(formatter)
    root.addHandler(stream)
    if log_file:
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setFormatter(formatter)
        root.addHandler(fh)


def broker_listeners(broker) -> tuple[list[Listener], list[Listener]]:
    """(listeners, advertised listeners), checked; one advertised endpoint per listener, in the
    listeners' order: the one ``advertised.listeners`` names, else the listener's own address."""
    protocols = parse_protocol_map(broker.props.get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP)
    listeners = parse_listeners(broker.get("listeners"), "listeners", protocols)
    raw = broker.get("advertised.listeners")
    named = {a.name: a for a in parse_listeners(raw, "advertised.listeners", protocols)} if raw else {}
    for name in named:
        if not any(x.name == name for x in listeners):
            raise ConfigError(f"invalid value {raw!r} for configuration advertised.listeners: listener "
                              f"{name} is not in listeners ({broker.get('listeners')})")
    advertised = [named.get(x.name) or Listener(x.name, x.host, x.port, x.protocol) for x in listeners]
    for a in advertised:
        if a.host in ("0.0.0.0", "::"):
            raise ConfigError(f"invalid value {raw or broker.get('listeners')!r} for configuration "
                              f"advertised.listeners: clients cannot connect to the meta-address "
                              f"{a.host}; name a host (set advertised.listeners)")
        if not a.host:
            a.host = socket.getfqdn()
    return listeners, advertised


def check_settings(broker, data_dir: str) -> None:
    """The listeners, their TLS and SASL settings and the authorizer's, checked before the data
    dir is created or locked: a start refused for its settings leaves nothing behind."""
    listeners, _ = broker_listeners(broker)
    BrokerSecurity(broker.props, listeners, CredentialCache(data_dir))
    parse_super_users(broker.get("super.users"))
    authorizer_enabled(broker)


class Broker:
    def __init__(self, datadir: DataDir, *, engine: str = "auto", spark_master: str | None = None,
                 node_id_explicit: bool = False, http=None):
        self.datadir = datadir
        self.http = http            # the HTTP listener, bound before the data dir was opened (or None)
        self.engine = engine
        self.spark_master = spark_master
        broker = datadir.broker
        self.listeners, self.advertised = broker_listeners(broker)
        node_id = broker.get("node.id") if node_id_explicit else None
        self.node_id, self.cluster_id = load_identity(datadir.path, node_id)
        # checked and loaded before any listener opens (Kafka's authorizer refuses requests until
        # its ACLs are loaded); None: no authorizer, every request is allowed
        self.authorizer = authorizer_for(broker, AclStore(datadir.path), self.node_id)
        self.bound: list[tuple[str, int]] = []
        self.server: BrokerServer | None = None
        self.state: BrokerState | None = None
        self.recover_in_background = False
        self.metrics: BrokerMetrics | None = None

    def load_logs(self) -> int:
        """Kafka's LogManager.loadLogs, where it has work. On a dir no broker has served yet (no
        producer-id file) every partition is opened now, which recovers what lies past its
        recovery point and finds the highest producer id. Otherwise nothing is read now, so that
        start-up does not grow with the partition count: after a clean shutdown each log is
        opened on first use (a request, the cleaner, retention), and after an unclean one a
        background thread recovers every log not used yet (``Background``); only the internal
        topics' logs are opened now (their coordinators load them at once). The highest producer
        id found in the logs (-1 when none were opened)."""
        started = time.monotonic()
        dd = self.datadir
        manager_log = logging.getLogger("kafka.log.LogManager")
        clean = dd.had_clean_shutdown()         # consumes the marker: a crash from now on is unclean
        # an internal topic a crash left short is made whole before anything opens it
        repair_internal_topics(dd)
        if os.path.exists(os.path.join(dd.path, PRODUCER_ID_FILE)):
            # the coordinators' partitions are opened now, as before: they load them at once
            internal = [key for key in dd.all_partitions() if key[0] in INTERNAL_TOPICS]
            for key in internal:
                dd.open_log(*key)
            others = len(dd.all_partitions()) - len(internal)
            took = f"{1000 * (time.monotonic() - started):.0f} ms"
            if clean:
                manager_log.info(f"Skipping log recovery after a clean shutdown of {dd.path}: "
                                 f"{len(internal)} log(s) of internal topics loaded in {took}, "
                                 f"{others} opened on first use")
            else:
                self.recover_in_background = others > 0
                manager_log.info(f"Unclean shutdown of {dd.path}: {len(internal)} log(s) of internal "
                                 f"topics recovered in {took}, {others} recovered in the background, "
                                 f"each before its first use")
            return -1
        highest_pid = -1
        n = 0
        for topic, partition in dd.all_partitions():
            lg = dd.open_log(topic, partition, create=True)
            if lg.producer_state.producers:
                highest_pid = max(highest_pid, max(lg.producer_state.producers))
            n += 1
        manager_log.info(f"Loaded {n} log(s) from {dd.path} in "
                         f"{1000 * (time.monotonic() - started):.0f} ms")
        return highest_pid

    def run(self) -> int:
        """Serve until SIGINT/SIGTERM; the exit code."""
        dropped = getattr(self.datadir.broker, "dropped_dynamic", [])
        if dropped:
            # DynamicBrokerConfig.removeInvalidConfigs and fromPersistentProps: logged, and the
            # broker starts without them
            log.error(f"Dynamic broker configs with invalid values, or that may not be set dynamically "
                      f"there, are ignored: {', '.join(dropped)}")
        # numba's import and the kernels' cached code load while the logs load and the listeners
        # open, not in the first client's produce
        warm_up = start_kernel_warm_up()
        try:
            # TLS stores, SASL settings and the credentials file are checked before anything opens
            security = BrokerSecurity(self.datadir.broker.props, self.listeners,
                                      CredentialCache(self.datadir.path))
            # the metrics listener first: the probes answer (503) while the logs load
            metrics = self.metrics = BrokerMetrics.start(self.datadir, http=self.http, node_id=self.node_id,
                                                         cluster_id=self.cluster_id, listeners=self.listeners,
                                                         advertised=self.advertised)
        except BaseException:
            if warm_up is not None:
                warm_up.stop()
            raise
        if metrics is not None and metrics.http is not None:
            register_status_page(metrics.http)
            log.info(f"Status page on {metrics.http.url}/ (its data: {metrics.http.url}/v1/status.json)")
        try:
            highest_pid = self.load_logs()
            self.state = BrokerState(self.datadir, self.node_id, self.cluster_id, self.advertised[0],
                                     producer_ids=ProducerIdManager(self.datadir.path, highest_pid))
            self.state.security = security
            if metrics is not None:
                metrics.attach(state=self.state)
            if self.datadir.broker.get("remote.log.storage.system.enable"):
                from ..storage.remote.manager import RemoteLogManager
                state = self.state
                self.state.remote = RemoteLogManager(
                    self.datadir, broker_id=self.node_id, cluster_id=self.cluster_id, open_log=state.log,
                    create_topic=lambda name, n, configs: state.create_topic(name, n, configs,
                                                                              replication_factor=1))
                self.state.remote.start()
                self.state.remote.reconcile_tiered_logs()
            group_coordinator_for(self.state)
            transaction_coordinator_for(self.state)
            self.state.authorizer = self.authorizer         # before any listener opens
            if self.authorizer is not None:
                self._log_authorizer()
            return asyncio.run(self._main())
        finally:
            if warm_up is not None:
                warm_up.stop()          # its scratch directory removed before the process exits
            if metrics is not None:
                metrics.lifecycle.set(NOT_RUNNING)
                metrics.stop()

    def _log_authorizer(self) -> None:
        a = self.authorizer
        logging.getLogger("kafka.authorizer.StandardAuthorizer").info(
            f"[StandardAuthorizer {self.node_id}] Initialized with {len(a.acl_set)} acl(s); super users: "
            f"{', '.join(sorted(a.super_users)) or 'none'}; allow.everyone.if.no.acl.found="
            f"{'true' if a.allow_if_no_acl else 'false'}")
        if not a.super_users and not len(a.acl_set) and not a.allow_if_no_acl:
            log.warning("An authorizer with neither super users nor ACLs denies every request: set super.users "
                        "(User:admin) or add ACLs with `compactlog acls --add` while the broker is stopped")
        for listener in self.listeners:
            if listener.name == "PLAINTEXT" and listener.host not in ("127.0.0.1", "localhost", "::1"):
                log.warning(f"Listener {listener} authenticates nobody: its clients are all User:ANONYMOUS to "
                            f"the authorizer")

    async def _main(self) -> int:
        loop = asyncio.get_running_loop()
        # the event loop never waits ~0.5 s for numba: a kernel call here without its machine code
        # at hand (ahead of time or loaded) runs in Python; what runs here is small by construction
        jit.never_wait_for_numba_in_this_thread()
        state = self.state
        broker = self.datadir.broker
        state.appends.bind(loop)
        table = dispatch_table()
        apis = advertised_apis(table)
        state.apis = apis
        pool = ThreadPoolExecutor(broker.get("num.io.threads"),
                                  thread_name_prefix="data-plane-kafka-request-handler")
        metrics = self.metrics
        server = self.server = BrokerServer(state, table, apis, pool,
                                            max_request_size=broker.get("socket.request.max.bytes"),
                                            idle_ms=broker.get("connections.max.idle.ms"),
                                            security=state.security,
                                            observer=metrics.requests if metrics is not None else None)
        stop = asyncio.Event()
        # __consumer_offsets and __transaction_state partitions are marked loading before any
        # request can arrive; the transaction coordinator loads once the groups are loaded
        state.groups.start()
        state.transactions.start()
        try:
            bound = await server.start(self.listeners)
        except OSError as e:
            state.transactions.stop()
            state.groups.stop()
            pool.shutdown(wait=True)
            where = ", ".join(str(x) for x in self.listeners)
            raise CompactlogError(f"cannot listen on {where}: {e.strerror or e}") from None
        self.bound = bound
        for a, listener, (_, port) in zip(self.advertised, self.listeners, server.bound_by_listener):
            if a.port == 0:         # port 0: advertise the port the system chose
                a.port = port if listener.port == 0 else listener.port
        state.advertised = self.advertised[0]
        state.advertised_listeners = {a.name: a for a in self.advertised}
        if self.datadir.lock is not None:
            # a writer the lock refuses can then say to go through this broker
            self.datadir.lock.note_broker_address(str(state.advertised).split("://", 1)[1])
        background = Background(state, make_executor(self.engine, self.spark_master))
        background.start(recover_logs=self.recover_in_background)
        background.start_remote()
        if metrics is not None:
            metrics.attach(server=server, pool=pool, loop=loop, background=background)
            metrics.lifecycle.set(RUNNING)

        def on_signal(name: str) -> None:
            if stop.is_set():
                log.info(f"[KafkaServer id={self.node_id}] {name} received again; already shutting down")
            else:
                log.info(f"[KafkaServer id={self.node_id}] {name} received: shutting down")
            if metrics is not None:
                metrics.lifecycle.set(SHUTTING_DOWN)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig.name)
        log.info(f"[KafkaServer id={self.node_id}] started (cluster id {self.cluster_id}, data dir "
                 f"{self.datadir.path}, advertised {', '.join(str(a) for a in self.advertised)}, "
                 f"APIs {', '.join(r.name for r in apis)})")
        try:
            await stop.wait()
        finally:
            log.info(f"[KafkaServer id={self.node_id}] shutting down")
            if metrics is not None:
                metrics.lifecycle.set(SHUTTING_DOWN)
                await shutdown_hold()
            state.groups.unload()           # parked JoinGroup/SyncGroup answer now
            await server.stop(SHUTDOWN_GRACE_S)
            await loop.run_in_executor(None, state.transactions.stop)
            await loop.run_in_executor(None, state.groups.stop)
            await loop.run_in_executor(None, background.stop)
            if state.remote is not None:
                state.remote.close()
            pool.shutdown(wait=True)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
        await loop.run_in_executor(None, self.datadir.close)
        log.info(f"[KafkaServer id={self.node_id}] shut down completed "
                 f"({pid_cpu_seconds():.2f} CPU seconds used)")
        return 0
