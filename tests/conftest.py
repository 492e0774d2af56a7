"""Shared pytest configuration: tests import helpers from this folder, run offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# a real Kafka broker for tests marked `kafka` (started on first use, once per session)
from kafka_broker_fixture import kafka_bootstrap, kafka_broker, kafka_faults  # noqa: E402,F401
