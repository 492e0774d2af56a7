"""The faust worker's supervisor (`consumers run --backend kafka`) on a real broker: a frozen worker
is replaced, SIGTERM stops the worker too, and a worker whose supervisor was SIGKILLed stops by
itself. SIGINT stops it even where it started with SIGINT ignored (a shell's background job),
within its bound, and its shutdown never waits on a broker call. Plus the log filter that keeps a
broker outage from flooding stderr."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from consumer_support import ROOT, SIGINT_IGNORED, counted, read_snapshot, start_supervisor, wait_until
from factories import env_chain

from spade_engine.consumers.faust_app import STOP_BOUND_S, RepeatFilter, _close_bounded, _StopSignals
from spade_engine.events.kafka.log import KafkaEventLog

# a stopping supervisor returns within STOP_BOUND_S; the rest is for two Python processes to exit
# on a machine that may be loaded
STOP_WAIT_S = STOP_BOUND_S + 60


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", logging.ERROR, __file__, 1, msg, args, None)


def test_repeat_filter_lets_one_record_of_a_kind_through_per_window():
    f = RepeatFilter(window_s=0.3)
    first = [f.filter(_record("Unable connect to node with id %s: %s", 1, f"refused {i}")) for i in range(50)]
    assert first == [True] + [False] * 49  # same template, other arguments: held back
    assert f.filter(_record("Failed fetch messages from %s", 1))  # another kind passes
    time.sleep(0.35)
    again = _record("Unable connect to node with id %s: %s", 1, "refused 50")
    assert f.filter(again)
    assert again.getMessage().startswith("Unable connect to node with id 1: refused 50 [49 more like this")
    assert not f.filter(_record("Unable connect to node with id %s: %s", 1, "refused 51"))


# -- the shutdown path, in this process --------------------------------------------------------


def test_sigint_stops_the_supervisor_even_where_it_was_ignored_at_start():
    """A shell without job control starts `cmd &` with SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler: the supervisor ignored SIGINT for good (a CI run that started the
    tests so timed out in `sup.wait` after SIGINT), while its faust worker stopped on it."""
    saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
    term = signal.getsignal(signal.SIGTERM)
    try:
        signals = _StopSignals().install()
        try:
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
            assert signals.received == signal.SIGINT
            signal.raise_signal(signal.SIGTERM)  # again while stopping: ignored, the stop goes on
            signal.raise_signal(signal.SIGINT)
        finally:
            signals.restore()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # as it was
        assert signal.getsignal(signal.SIGTERM) == term
    finally:
        signal.signal(signal.SIGINT, saved)


def test_a_stop_signal_while_a_worker_is_being_started_is_held_until_it_started():
    signals = _StopSignals().install()
    try:
        reached = False
        with pytest.raises(KeyboardInterrupt), signals.deferred():
            signal.raise_signal(signal.SIGTERM)
            reached = True  # not interrupted halfway through starting a process
        assert reached
    finally:
        signals.restore()


def test_closing_the_lag_check_client_is_bounded():
    class Hangs:  # a client whose broker does not answer
        def __init__(self) -> None:
            self.release = threading.Event()

        def close(self) -> None:
            self.release.wait()

    class Closes:
        closed = False

        def close(self) -> None:
            self.closed = True

    class Fails:
        def close(self) -> None:
            raise OSError("connection reset")

    hangs = Hangs()
    try:
        assert _close_bounded(hangs, 0.2) is False  # given up on, left to the process's exit
    finally:
        hangs.release.set()
    closes = Closes()
    assert _close_bounded(closes, 30) is True and closes.closed
    assert _close_bounded(Fails(), 30) is True  # an error while closing is not the stop's concern


# -- processes on a real broker -------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """Live worker processes started by ``pid`` (from /proc; zombies and multiprocessing's
    resource tracker excluded)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmdline:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)


def _run(bootstrap: str, run_id: str, tmp_path: Path, request) -> tuple[KafkaEventLog, Path]:
    """A fresh run on the broker (closed after the test) and where its stats snapshot will be."""
    log = KafkaEventLog(bootstrap, run_id, create=True, partitions=3)
    request.addfinalizer(log.close)
    return log, tmp_path / "runs" / run_id / "projections" / "stats.json"


def _supervise(
    bootstrap: str, run_id: str, tmp_path: Path, err: Path, request, *extra: str, sigint_ignored: bool = False
) -> subprocess.Popen:
    sup = start_supervisor(bootstrap, run_id, tmp_path, err, *extra, sigint_ignored=sigint_ignored)
    request.addfinalizer(lambda: _stop(sup))
    return sup


@pytest.mark.kafka
@pytest.mark.slow
def test_a_frozen_worker_is_replaced_and_counts_stay_exact(kafka_bootstrap, tmp_path, request):
    run_id = "run-faust-frozen"
    log, snap = _run(kafka_bootstrap, run_id, tmp_path, request)
    err = tmp_path / "supervisor.err"
    # started as a shell's background job is (SIGINT ignored): SIGINT must stop it all the same
    sup = _supervise(kafka_bootstrap, run_id, tmp_path, err, request, "--stall-s", "6", sigint_ignored=True)
    first = env_chain(run_id, "env-0")
    log.append(first)
    wait_until(lambda: counted(snap) == len(first), 120, "the worker to apply the first events")
    [worker] = _children(sup.pid)
    os.kill(worker, signal.SIGSTOP)  # its event loop stops: no heartbeat, no commits
    try:
        more = env_chain(run_id, "env-1") + env_chain(run_id, "env-2")
        log.append(more)
        wait_until(lambda: counted(snap) == len(first) + len(more), 180, "a replacement worker to catch up")
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGCONT)
    assert not _alive(worker)  # the frozen one was killed, not left behind
    assert sup.poll() is None  # the supervisor carries on
    text = err.read_text()
    assert f"faust worker {worker}" in text and "restarting" in text, text[-3000:]
    counts = read_snapshot(snap)["state"]["counts"]
    assert counts == log.count_by_type()  # each event once: re-delivery after the kill is ignored

    [replacement] = _children(sup.pid)
    sup.send_signal(signal.SIGINT)
    assert sup.wait(STOP_WAIT_S) == 0, err.read_text()[-3000:]
    assert not _alive(replacement)
    assert read_snapshot(snap)["state"]["counts"] == counts


@pytest.mark.kafka
@pytest.mark.slow
def test_sigterm_stops_the_worker_and_an_orphaned_worker_exits(kafka_bootstrap, tmp_path, request):
    run_id = "run-faust-orphan"
    log, snap = _run(kafka_bootstrap, run_id, tmp_path, request)
    events = env_chain(run_id, "env-0")
    log.append(events)

    # SIGTERM (what process managers send) stops the worker gracefully with the supervisor
    sup = _supervise(kafka_bootstrap, run_id, tmp_path, tmp_path / "a.err", request)
    wait_until(lambda: counted(snap) == len(events), 120, "the worker to apply the events")
    [worker] = _children(sup.pid)
    sup.terminate()
    assert sup.wait(STOP_WAIT_S) == 0, (tmp_path / "a.err").read_text()[-3000:]
    assert not _alive(worker)

    # a supervisor killed outright cannot stop its worker: the worker notices and stops itself
    sup = _supervise(kafka_bootstrap, run_id, tmp_path, tmp_path / "b.err", request)
    late = env_chain(run_id, "env-1")
    log.append(late)
    wait_until(lambda: counted(snap) == len(events) + len(late), 120, "the new worker to apply the new events")
    [worker] = _children(sup.pid)
    sup.kill()
    sup.wait(30)
    wait_until(lambda: not _alive(worker), 60, "the orphaned worker to exit")


@pytest.mark.slow
def test_sigint_stops_the_supervisor_while_the_broker_never_answers(tmp_path, request):
    """A "broker" that accepts connections and never answers: the worker hangs in its bootstrap,
    the supervisor has no lag answer. SIGINT (ignored at start, as for a background job) still
    stops both, within the bound, because the stop waits on no broker call."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)  # the kernel completes the handshakes; nothing ever reads or replies
    request.addfinalizer(hole.close)
    code = (
        "import sys; from spade_engine.consumers.faust_app import supervise_stats; "
        "print(supervise_stats(sys.argv[1], 'run-no-answer', sys.argv[2], stall_s=6))"
    )
    err = tmp_path / "supervisor.err"
    with open(err, "w") as fh:
        sup = subprocess.Popen(
            [*SIGINT_IGNORED, "-c", code, f"127.0.0.1:{hole.getsockname()[1]}", str(tmp_path / "stats.json")],
            stdout=subprocess.PIPE, stderr=fh, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    request.addfinalizer(lambda: _stop(sup))
    wait_until(lambda: _children(sup.pid), 120, "the supervisor to start its worker")
    [worker] = _children(sup.pid)
    time.sleep(5)  # into its faust start (whether it got there or not, the stop must work)
    sup.send_signal(signal.SIGINT)
    assert sup.wait(STOP_WAIT_S) == 0, err.read_text()[-3000:]
    assert sup.stdout.read().strip() == b"(0, 0)"  # nothing applied, no restart
    assert not _alive(worker)
