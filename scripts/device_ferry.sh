#!/usr/bin/env bash
# Ferry a fetched catalogue model to the lent device machine in chunks of at most 60 MiB, one
# device call per chunk, and rebuild it there (see scripts/device_ferry.py and scripts/device_plan.md).
#
#   scripts/device_ferry.sh split NAME [--extra FILE]...  here: chunk folders .ferry/NAME/chunkNN,
#                                                         prints the device calls (one per chunk)
#   scripts/device_ferry.sh plan NAME                     here: print those calls again
#   scripts/device_ferry.sh receive                       there: check the chunks that arrived,
#                                                         store them, print "k of N chunks present"
#   scripts/device_ferry.sh status                        there: the same count, receiving nothing
#   scripts/device_ferry.sh join NAME                     there: join + check, install NAME in the
#                                                         model cache ($SPADE_MODEL_CACHE); prints its hf/ dir
#
# SPADE_FERRY_CHUNK_BYTES sets the chunk size, SPADE_FERRY_STORE where the device keeps the chunks
# (default .ferry/store/ in the repository root: ignored, so kept between calls of a warm machine).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# join needs the engine's wheels (scripts/device_bench.sh puts msgspec and pydantic in /tmp/site,
# the ferried ones in the interpreter's environment); receive needs nothing but the standard library
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d /tmp/site ]; then PYTHONPATH="/tmp/site:$PYTHONPATH"; fi
exec "$PY" scripts/device_ferry.py "$@"
