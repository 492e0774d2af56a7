"""Where the Kafka broker's jars are looked for: ``$SPADE_KAFKA_CACHE``, else the user-wide
``$XDG_CACHE_HOME/spade-engine/kafka`` (an installed package never looks in a source checkout),
and a checkout's ``.cache/kafka`` from earlier versions only while it holds the jars."""

from __future__ import annotations

from pathlib import Path

from spade_engine.devtools import kafka_broker
from spade_engine.devtools.kafka_broker import KAFKA_VERSION, default_cache_dir


def _checkout(root: Path, *, jars: bool) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    if jars:
        done = root / ".cache" / "kafka" / KAFKA_VERSION / ".complete"
        done.parent.mkdir(parents=True)
        done.write_text(KAFKA_VERSION + "\n")
    return root


def test_the_jar_cache_is_user_wide_and_overridable(tmp_path, monkeypatch):
    monkeypatch.delenv("SPADE_KAFKA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    user = tmp_path / "xdg" / "spade-engine" / "kafka"
    # an installed package (no checkout above it) and a fresh checkout: the user-wide cache
    monkeypatch.setattr(kafka_broker, "_REPO_ROOT", tmp_path / "site-packages")
    assert default_cache_dir() == user
    monkeypatch.setattr(kafka_broker, "_REPO_ROOT", _checkout(tmp_path / "fresh", jars=False))
    assert default_cache_dir() == user
    # a checkout an earlier version fetched the jars into keeps using them
    old = _checkout(tmp_path / "old", jars=True)
    monkeypatch.setattr(kafka_broker, "_REPO_ROOT", old)
    assert default_cache_dir() == old / ".cache" / "kafka"
    assert default_cache_dir("0.0.1") == user, "not for a version it does not hold"
    # the documented override wins over both
    monkeypatch.setenv("SPADE_KAFKA_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    # a fetch that is already complete there returns its libs without running maven
    done = tmp_path / "mine" / KAFKA_VERSION / ".complete"
    done.parent.mkdir(parents=True)
    done.write_text(KAFKA_VERSION)
    monkeypatch.setattr(kafka_broker.shutil, "which", lambda name: None)
    assert kafka_broker.fetch() == tmp_path / "mine" / KAFKA_VERSION / "libs"
