#!/usr/bin/env python3
"""Fetch, start and stop a real single-node Apache Kafka broker (KRaft) on 127.0.0.1.

    scripts/kafka_broker.py fetch                       jars from Maven Central into the jar cache
                                                        (~/.cache/spade-engine/kafka, or $SPADE_KAFKA_CACHE)
    scripts/kafka_broker.py start [--port P] [--dir D]  start detached, print the bootstrap address
    scripts/kafka_broker.py start --foreground          run in this process (Ctrl-C stops)
    scripts/kafka_broker.py stop [--dir D]              stop the broker started in D

The code lives in :mod:`spade_engine.devtools.kafka_broker` (shared with the pytest fixture and
the benches).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spade_engine.devtools.kafka_broker import (  # noqa: E402
    KAFKA_VERSION,
    BrokerError,
    KafkaBroker,
    fetch,
    stop_detached,
)

DEFAULT_DIR = ROOT / ".cache" / "kafka-broker"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="fetch the broker jars (reuses the cache)")
    f.add_argument("--version", default=KAFKA_VERSION)
    s = sub.add_parser("start", help="format storage if needed, start, wait until it serves")
    s.add_argument("--port", type=int, default=0, help="client port (default: a free one)")
    s.add_argument("--controller-port", type=int, default=0)
    s.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"broker directory (default {DEFAULT_DIR})")
    s.add_argument("--heap", default="512m")
    s.add_argument("--timeout", type=float, default=120.0)
    s.add_argument("--foreground", action="store_true", help="run in this process instead of detaching")
    t = sub.add_parser("stop", help="stop the broker started detached in --dir")
    t.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "fetch":
            print(fetch(version=args.version))
        elif args.cmd == "start":
            broker = KafkaBroker(args.dir, port=args.port, controller_port=args.controller_port, heap=args.heap)
            if args.foreground:
                print(broker.bootstrap, flush=True)
                broker.start(foreground=True)  # execs java
            broker.start(timeout=args.timeout)
            print(broker.bootstrap)
        elif args.cmd == "stop":
            if not stop_detached(args.dir):
                print(f"no broker running in {args.dir}", file=sys.stderr)
                return 1
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
