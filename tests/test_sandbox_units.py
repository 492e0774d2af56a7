"""Units of the sandbox's hardening, without a pool: uid leases, reply schemas, limits, seeded
probes, the hook fingerprint and the seccomp filter in a forked child."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from spade_engine.sandbox import hookguard, limits, probes, replies
from spade_engine.sandbox.uids import lease_uids


def test_uid_leases_never_overlap_and_are_given_back(tmp_path):
    a = lease_uids(1000, 2, directory=str(tmp_path))
    b = lease_uids(1000, 2, directory=str(tmp_path))
    c = lease_uids(1001, 3, directory=str(tmp_path))  # another base, overlapping a's range
    assert a.uids == [1000, 1001] and b.uids == [1002, 1003]
    assert set(c.uids).isdisjoint(a.uids + b.uids)
    a.release()
    assert lease_uids(1000, 2, directory=str(tmp_path)).uids == [1000, 1001]  # free again
    b.release()
    c.release()


def _reply(data: bytes, *, ok: bool = True, seq: int = 1) -> bytes:
    return b'{"op":"reply","seq":%d,"ok":%s,"guard":{"fp":"f","beat":%d},"data":%s}' % (seq, b"true" if ok else b"false", seq, data)


@pytest.mark.parametrize(
    ("op", "data", "why"),
    [
        ("new", b'{"iid":"1"}', "Expected `int`"),
        ("new", b'{"iid":0}', ">= 1"),
        ("new", b'{"iid":1,"extra":2}', "unknown field"),
        ("step", b'{"obs":{"v":"x"}}', "missing required field"),
        ("reset", b'{"obs":{"v":["x"]},"info":{"v":{}}}', "Expected `str | null`"),
        ("reset", b'{"obs":{"v":"%s"},"info":{"v":{}}}' % (b"a" * (limits.MAX_OBS_CHARS + 1)), "length <="),
        ("new", b'{"iid":1,"spaces":{"observation_space":{"max_length":-1},"action_space":{"max_length":5}}}', ">= 0"),
        ("new", b'{"iid":1,"spaces":{"observation_space":{"max_length":5,"charset":"%s"},"action_space":{"max_length":5}}}'
         % (b"a" * (limits.MAX_CHARSET_CHARS + 1)), "length <="),
        ("check_env", b'{"passed":true}', "no schema for replies"),  # gymnasium's checker runs in the engine now
        ("solution", b'{"kind":"win"}', "Invalid enum value"),
        ("load", b'{"class_name":"E","contract":"other","has_solution":true}', "Invalid enum value"),
        ("parse", b'{"classes":[{"name":"E"}]}', "missing required field"),
    ],
)
def test_replies_that_do_not_fit_their_schema_are_refused(op, data, why):
    frame = replies.decode_task_frame(_reply(data))
    with pytest.raises(replies.ReplyError, match=why):
        replies.decode_data(op, frame)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"seq":1,"ok":true}',  # no op tag
        b'{"op":"ready","seq":3,"guard":{"fp":"","beat":0}}',  # ready is seq 0 only
        b'{"op":"forbidden","event":"%s"}' % (b"e" * 500),
        b'{"op":"reply","seq":true,"ok":true,"guard":{"fp":"","beat":1}}',
        b'{"op":"reply","seq":1,"ok":true,"guard":{"fp":"","beat":1},"error":{"kind":"crash","message":"%s"}}' % (b"m" * 5000),
        b"[" * 100_000,
        b'{"op":"forbidden","event":"\\ud800"}',  # a lone surrogate is no text
    ],
)
def test_frames_that_do_not_fit_are_refused(payload):
    with pytest.raises(replies.ReplyError):
        replies.decode_task_frame(payload)


def test_info_limits_and_clipping():
    assert limits.info_problem({"a": [1, 2, {"b": "c"}]}) is None
    assert "items" in limits.info_problem({str(i): i for i in range(limits.MAX_INFO_LIST + 1)})
    assert "characters" in limits.info_problem({"a": "x" * (limits.MAX_INFO_STR + 1)})
    assert "deeper" in limits.info_problem({"a": [[[[[[1]]]]]]})
    assert "values" in limits.info_problem({str(i): list(range(40)) for i in range(20)})
    assert limits.clip("abc", 3) == "abc"
    cut = limits.clip("x" * 1000, 100)
    assert len(cut) <= 100 and cut.endswith("characters]") and cut.startswith("x")


def test_probes_are_a_function_of_their_seed():
    assert probes.validation_seeds(1) == probes.validation_seeds(1) and probes.probe_actions(1) == probes.probe_actions(1)
    assert probes.validation_seeds(1) != probes.validation_seeds(2) and probes.probe_actions(1) != probes.probe_actions(2)
    a, b = probes.validation_seeds(7)
    assert a != b and 0 <= a < 2**31
    acts = probes.probe_actions(7)
    assert "" in acts and "\\boxed{" in acts and max(map(len, acts)) >= 3000 and max(map(len, acts)) <= limits.MAX_ACTION_CHARS
    assert probes.garbage_actions(3, 8) == probes.garbage_actions(3, 8) and len(set(probes.garbage_actions(3, 8))) > 1
    from spade_engine.engine.stages import derive_seed

    assert probes.seed_for(5, "x", 2) == derive_seed(5, "x", 2)  # the engine's derivation


def _hook_like():
    table = {"os.remove": (0,)}
    banned = frozenset({"os.system"})

    def die(event):
        raise SystemExit(event)

    def hook(event, args):
        if event in banned or event in table:
            die(event)

    return hook


def _noop_with_three_free_vars():
    banned = die = table = None

    def hook(event, args):
        return banned, die, table

    return hook


def test_the_fingerprint_changes_when_the_hook_is_disarmed():
    for disarm in (
        lambda hook: setattr(next(c for c in hook.__closure__ if isinstance(c.cell_contents, frozenset)), "cell_contents", frozenset()),
        lambda hook: next(c for c in hook.__closure__ if isinstance(c.cell_contents, dict)).cell_contents.clear(),  # emptied in place
        lambda hook: setattr(next(c for c in hook.__closure__ if callable(c.cell_contents)), "cell_contents", lambda event: None),
        lambda hook: setattr(hook, "__code__", _noop_with_three_free_vars().__code__),
    ):
        hook = _hook_like()
        guard = hookguard.HookGuard(hook)
        fp = guard.fingerprint()
        assert guard.fingerprint() == fp  # stable while nothing changes
        disarm(hook)
        assert guard.fingerprint() != fp


def _allowed(event):
    return event.startswith("open")


def test_the_fingerprint_changes_when_a_name_it_looks_up_is_patched(monkeypatch):
    import sys

    def hook(event, args):
        return _allowed(event) and len(args) > 0  # a module global and a builtin

    guard = hookguard.HookGuard(hook)
    fp = guard.fingerprint()
    monkeypatch.setattr(sys.modules[__name__], "_allowed", lambda event: True)
    assert guard.fingerprint() != fp
    monkeypatch.undo()
    assert guard.fingerprint() == fp


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_seccomp_filter_in_a_forked_child():
    from spade_engine.sandbox import seccomp_filter

    if seccomp_filter.load_binding()[0] is None:
        pytest.fail("no libseccomp binding: install python3-seccomp or pyseccomp (scripts/setup.sh --system)")

    def child(fn) -> int:
        pid = os.fork()
        if pid == 0:
            ok, _ = seccomp_filter.install()
            if not ok:
                os._exit(99)
            try:
                fn()
            except BaseException:  # noqa: BLE001
                os._exit(3)
            os._exit(0)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def allowed() -> None:
        a, b = socket.socketpair()
        a.send(b"x")
        assert b.recv(1) == b"x"
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    assert child(allowed) == 0
    assert child(lambda: os.execv("/bin/true", ["true"])) == -signal.SIGSYS
    assert child(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)) == -signal.SIGSYS
