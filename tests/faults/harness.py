"""The fault-injection harness: sources that never stop, processes killed by pid
or session, and a record-by-record verdict of a mirror against its source.

Every record the live producers write carries its partition and a per-partition
sequence number (header `seq`), so a verdict can tell a lost record from a
duplicated or misplaced one whatever the source kind:

- gap-free: plain idempotent writes, source offset == mirror offset;
- compacted: a small key space on a topic the log cleaner compacts all the
  time, so holes appear (and grow) while the mirror copies;
- transactional: transactions of a few dozen records, every fourth aborted,
  so the source has control records and aborted data to skip.

Processes are started in sessions of their own and stopped by session id or
pid, never by name: PySpark's daemon moves its Python workers into a process
group of their own, but they keep the session, so `kill_session` reaches them
even after the driver is gone.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from confluent_kafka import KafkaException, Producer

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.config.spark_requirements import WORKER_DAEMON_CONF
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.offset_map import resolve
from tests.kafka_records import read_partition

REPO = Path(__file__).resolve().parents[2]
SOURCE_KINDS = ("gapfree", "compacted", "transactional")
COMPACTED_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "200",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
}
COMPACTED_KEYS = 400  # per partition: the cleaner removes most older records, leaving holes everywhere


def topic_config(kind: str) -> dict[str, str]:
    return dict(COMPACTED_CONFIG) if kind == "compacted" else {}


def preload(
    bootstrap: str,
    topic: str,
    partitions: int,
    per_partition: int,
    kind: str = "gapfree",
    source: LiveSource | None = None,
) -> LiveSource:
    """Write `per_partition` records into each partition at once; returns the writer to go on with
    (pass it back as `source` so sequence numbers go on)."""
    source = source or LiveSource(bootstrap, topic, partitions, kind)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "enable.idempotence": True,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    for p in range(partitions):
        for _ in range(per_partition):
            source.produce_into(producer, p)
        producer.poll(0)
    assert producer.flush(120) == 0
    return source


class LiveSource(threading.Thread):
    """Produces into every partition of `topic` until stopped, `rate` records a second in all."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, kind: str, rate: int = 1500, seed: int = 0):
        super().__init__(daemon=True, name=f"live-source-{topic}")
        self.bootstrap, self.topic, self.partitions, self.kind, self.rate = bootstrap, topic, partitions, kind, rate
        self.seq = [0] * partitions
        self.rng = random.Random(seed)
        self._halt = threading.Event()
        self.error: BaseException | None = None
        self.transactions = self.aborted = self.recoveries = 0
        self.last_error: KafkaException | None = None  # the last one it recovered from

    def stop(self) -> None:
        self._halt.set()
        self.join(60)
        if self.error is not None:
            raise AssertionError(f"the live producer failed: {self.error!r}")

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def _new_producer(self) -> Producer:
        conf = {
            "bootstrap.servers": self.bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "message.timeout.ms": 300000,
        }
        if self.kind == "transactional":
            conf["transactional.id"] = f"fault-source-{self.topic}"
            conf["transaction.timeout.ms"] = 300000
        producer = Producer(conf)
        if self.kind == "transactional":
            producer.init_transactions(120)  # also fences whatever an earlier instance left open
        return producer

    def _run(self) -> None:
        transactional = self.kind == "transactional"
        producer = self._new_producer()
        batch = 30
        while not self._halt.is_set():
            started = time.monotonic()
            try:
                if transactional:
                    producer.begin_transaction()
                for _ in range(batch):
                    self._produce_one(producer)
                if transactional:
                    self.transactions += 1
                    if self.transactions % 4 == 0:
                        producer.abort_transaction(60)
                        self.aborted += 1
                    else:
                        producer.commit_transaction(60)
                else:
                    producer.poll(0)
            except KafkaException as exc:
                # A killed broker can fail a transaction, as it would any
                # application's: abort it, or start a new producer (which
                # aborts or completes it), and go on. Its records are then
                # simply not on the source; sequence numbers stay unique.
                self.recoveries += 1
                self.last_error = exc
                if exc.args[0].txn_requires_abort():
                    try:
                        producer.abort_transaction(60)
                        continue
                    except KafkaException:
                        pass
                producer = self._new_producer()
                continue
            time.sleep(max(0.0, batch / self.rate - (time.monotonic() - started)))
        if producer.flush(120):
            raise AssertionError("records of the live producer were never acknowledged")

    def _produce_one(self, producer: Producer) -> None:
        self.produce_into(producer, self.rng.randrange(self.partitions))

    def produce_into(self, producer: Producer, p: int) -> None:
        seq = self.seq[p]
        self.seq[p] += 1
        key = b"k%d" % (seq % COMPACTED_KEYS) if self.kind == "compacted" else b"key-%d-%d" % (p, seq)
        value = b"%s|%d|%d|" % (self.kind.encode(), p, seq) + os.urandom(self.rng.randrange(20, 200))
        headers = [("seq", b"%d" % seq), ("dup", b"a"), ("dup", b"b")]
        while True:
            try:
                producer.produce(self.topic, key=key, value=value, partition=p, headers=headers)
                return
            except BufferError:
                producer.poll(0.1)


# --- processes -------------------------------------------------------------------------------------------------


def python_cmd(*args: str) -> list[str]:
    return [sys.executable, *args]


@dataclass
class Started:
    """A process the suite started, in a session of its own (its pid is the session id)."""

    proc: subprocess.Popen
    what: str
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self, tail: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stacks(self, wait_s: float = 2.0) -> str:
        """Its output once it printed every thread's stack, for a process that does not end when it
        should: the Python ones (follow mode does on SIGUSR1) and its Spark JVM's (SIGQUIT)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            for pid in session_members(self.pid):
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                        os.kill(pid, signal.SIGQUIT)
            time.sleep(wait_s)
        return self.output(tail=60000)


def start(args: list[str], what: str, log_dir: Path, env: dict | None = None) -> Started:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{what}-{time.monotonic_ns()}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
    return Started(proc, what, log)


def start_cycle(config_path: Path, link: str, topic: str, log_dir: Path) -> Started:
    """One `mirror-pipeline run` of the link, limited to `topic`."""
    return start(
        python_cmd("-m", "mirror_pipeline", "run", "--link", link, "--mirror", topic, "--config", str(config_path)),
        "cycle",
        log_dir,
    )


# Follow mode's epochs in the fault suite: short, so kills land in every part of an epoch's life.
FOLLOW_EPOCH_S = 3
# How long a graceful stop of follow mode may take: it finishes the epochs in flight, up to two, and
# epochs last longer than FOLLOW_EPOCH_S while their tasks start late (`epoch_pace`: a loaded machine).
FOLLOW_STOP_S = FOLLOW_EPOCH_S + 120


def start_follow(config_path: Path, link: str, topic: str, log_dir: Path) -> Started:
    """`mirror-pipeline run --follow` of the link, limited to `topic`: it runs until stopped."""
    return start(
        python_cmd(
            "-m",
            "mirror_pipeline",
            "run",
            "--link",
            link,
            "--mirror",
            topic,
            "--follow",
            "--epoch-seconds",
            str(FOLLOW_EPOCH_S),
            "--config",
            str(config_path),
        ),
        "follow",
        log_dir,
    )


def wait_output(started: Started, text: str, timeout: float) -> bool:
    """Whether `text` appeared in the process's output within `timeout` (False: it did not, or the process ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in started.output(tail=1_000_000):
            return True
        if started.proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


def start_dagster_run(config_path: Path, link: str, topic: str, log_dir: Path) -> Started:
    """One Dagster run of the link's copy asset for `topic`, in a process of its own."""
    return start(python_cmd("-m", "tests.faults.dagster_run", str(config_path), link, topic), "dagster-run", log_dir)


def session_members(sid: int) -> list[int]:
    """Pids of every live process of session `sid` (the driver, its JVM, PySpark's daemon and workers)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is the state, [3] the session id; a zombie is already dead.
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry))
    return members


#: The modules a worker daemon runs as (`python -m M`): the pipeline's own (`replication.worker_daemon`), or
#: PySpark's. Only as `-m M`: the driver's launcher and JVM carry the module's name in a `--conf` argument.
DAEMON_MODULES = (WORKER_DAEMON_CONF["spark.python.daemon.module"].encode(), b"pyspark.daemon")


def _runs_a_daemon(cmdline: bytes) -> bool:
    args = cmdline.split(b"\0")
    return any(a == b"-m" and b in DAEMON_MODULES for a, b in pairwise(args))


def python_workers(sid: int) -> list[int]:
    """PySpark's Python worker processes of session `sid` (forked by its daemon: same command line, daemon's child)."""
    daemons, candidates = set(), []
    for pid in session_members(sid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if _runs_a_daemon(cmd):
            candidates.append((pid, ppid))
            daemons.add(pid)
    return [pid for pid, ppid in candidates if ppid in daemons]


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_session(started: Started, timeout: float = 30) -> None:
    """SIGKILL every process of the session until none is left (reaping the leader)."""
    deadline = time.monotonic() + timeout
    while True:
        members = session_members(started.pid)
        kill_pids(members)
        try:
            started.proc.wait(0.2)
        except subprocess.TimeoutExpired:
            pass
        if not session_members(started.pid):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {session_members(started.pid)} of {started.what} survived SIGKILL")
        time.sleep(0.1)


def wait_exit(started: Started, timeout: float) -> int | None:
    try:
        return started.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def catch_up(config, spark, topic: str, link: str = "faults", rounds: int = 8) -> None:
    """In-process cycles until the mirror has nothing left to copy (a failed cycle is retried)."""
    from mirror_pipeline import engine

    last = None
    for _ in range(rounds):
        try:
            if engine.run_cycle(config, link, spark, mirrors=[topic]).lag_after == 0:
                return
        except engine.CycleFailed as exc:
            last = exc
    raise AssertionError(f"the mirror did not catch up in {rounds} cycles: {last}")


# --- the verdict ------------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """Record-by-record comparison of a mirror with its source (R-REL-1)."""

    records_checked: int = 0
    lost: int = 0
    duplicated: int = 0
    mismatched: int = 0
    wrong_states: int = 0
    compacted_away: int = 0  # mirrored records the source's cleaner removed since: nothing to compare
    problems: list[str] = field(default_factory=list)

    def note(self, kind: str, message: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.problems) < 20:
            self.problems.append(f"{kind}: {message}")

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.mismatched or self.wrong_states)

    def merge(self, other: Verdict) -> None:
        for name in ("records_checked", "lost", "duplicated", "mismatched", "wrong_states", "compacted_away"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems[: max(0, 20 - len(self.problems))])


def _seq(record) -> int:
    return int(dict(record.headers or ())["seq"])


def mirror_state(config_path: Path, link: str, topic: str) -> str:
    """The mirror's state, flags and reason in one line, for a failure message."""
    info = LinkContext.open(load_config(config_path), link).registry().get(topic)
    if info is None:
        return f"mirror {topic} is not registered"
    flags = "".join(f" {flag}" for flag in info.flags)
    return f"mirror {topic} is {info.state}{flags} ({info.reason})"


def compare(
    config_path: Path,
    link: str,
    source_bootstrap: str,
    dest_bootstrap: str,
    topic: str,
    partitions: int,
    *,
    complete: bool,
    expected_state: str | None = None,
) -> Verdict:
    """Compare every mirror record with the source record its offset map says it is.

    - mismatched: a mirror record whose key, value, headers (in order) or
      timestamp differ from the source record at its mapped offset, or that
      sits at another mirror offset than the map says;
    - duplicated: a record (by partition and sequence number) on the mirror
      twice, or mirror offsets the map does not account for;
    - lost: a committed source record below the point the map says was
      mirrored that the map does not hold (all of them when `complete`);
    - wrong state: the mirror is not in `expected_state`.
    """
    ctx = LinkContext.open(load_config(config_path), link)
    verdict = Verdict()
    if expected_state is not None:
        state = ctx.registry()[topic].state
        if state != expected_state:
            verdict.note("wrong_states", f"{topic} is {state}, expected {expected_state}")
    snapshot = ctx.store.read_segments([topic])
    for p in range(partitions):
        source = read_partition(source_bootstrap, topic, p)
        mirror = read_partition(dest_bootstrap, topic, p, committed_only=False)
        mirror_end = (mirror[-1].offset + 1) if mirror else 0
        leo = _log_end(dest_bootstrap, topic, p, default=mirror_end)
        res = resolve([s for _, s in snapshot.segments.get((topic, p), [])], leo)
        omap = res.offset_map
        if res.in_doubt or res.foreign_records:
            verdict.note(
                "duplicated",
                f"partition {p}: offset map does not account for the mirror's log end {leo} "
                f"(map ends {omap.dest_end}, {len(res.in_doubt)} segments in doubt)",
            )
        by_offset = {r.offset: r for r in source}
        dest_to_source = {}
        for run in omap.runs:
            for i in range(run.length):
                dest_to_source[run.dest + i] = run.source + i
        seen: set[int] = set()
        for m in mirror:
            if m.offset < omap.padding:
                continue
            verdict.records_checked += 1
            seq = _seq(m)
            if seq in seen:
                verdict.note("duplicated", f"partition {p}: seq {seq} again at mirror offset {m.offset}")
                continue
            seen.add(seq)
            s_off = dest_to_source.get(m.offset)
            if s_off is None:
                verdict.note("duplicated", f"partition {p}: mirror offset {m.offset} (seq {seq}) is not in the map")
                continue
            s = by_offset.get(s_off)
            if s is None:
                verdict.compacted_away += 1
                continue
            if m.content() != s.content():
                verdict.note(
                    "mismatched",
                    f"partition {p}: mirror offset {m.offset} (seq {seq}) differs from "
                    f"source offset {s_off} (seq {_seq(s)})",
                )
        mirrored_up_to = omap.next_source_offset or 0
        for s in source:
            if (complete or s.offset < mirrored_up_to) and omap.dest_of(s.offset) is None:
                if s.offset >= mirrored_up_to:
                    verdict.note(
                        "lost",
                        f"partition {p}: source offset {s.offset} (seq {_seq(s)}) not mirrored; "
                        f"mirrored up to {mirrored_up_to}",
                    )
                else:
                    verdict.note("lost", f"partition {p}: source offset {s.offset} (seq {_seq(s)}) skipped")
    return verdict


def assert_clean(*args, report=None, **kwargs) -> Verdict:
    """`compare`, failing with the first problems found unless the verdict is clean; `report(verdict)` first."""
    verdict = compare(*args, **kwargs)
    if report is not None:
        report(verdict)
    assert verdict.clean, verdict.problems
    return verdict


def _log_end(bootstrap: str, topic: str, partition: int, default: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-verdict"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=15, cached=False)[1]
    except Exception:
        return default
    finally:
        c.close()


def wait_for_open_transaction(bootstrap: str, topic: str, timeout_s: float) -> bool:
    """Return as soon as partition 0 of `topic` holds a transaction written and not yet ended (its end is past
    its last stable offset); False when none was seen within `timeout_s`.

    The end is asked before the stable offset: an end past a stable offset asked later means a transaction
    written before the first question was still open at the second."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = [(topic, 0)]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        end = kc.list_offsets(admin, tp, "latest", "destination", read_committed=False)[(topic, 0)]
        if end > kc.list_offsets(admin, tp, "latest", "destination")[(topic, 0)]:
            return True
    return False


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    return {p: _log_end(bootstrap, topic, p, default=-1) for p in range(partitions)}
