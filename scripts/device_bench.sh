#!/usr/bin/env bash
# The GPU benchmark (bench/gpu.py, issue 9) on a lent device machine, prepared so that one call does it.
#
#   scripts/device_bench.sh fetch   here (with PyPI): download the wheels the device image lacks
#                                   (msgspec, pydantic and its parts) for its Python 3.12 into .whl/
#   scripts/device_bench.sh run     there (no network): install them from .whl/ into /tmp/site,
#                                   print the GPU, run bench/gpu.py, and keep its output in $OUT
#
# The device image already holds torch, transformers, safetensors and numpy. Call `run` through
# the device tool with carry [".whl"] and a timeout that leaves room for one rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(msgspec==0.23.0 pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2)

case "${1:-}" in
  fetch)
    mkdir -p .whl
    for w in "${WHEELS[@]}"; do
      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "$w"
    done
    ls -1 .whl
    ;;
  run)
    OUT=${OUT:-/tmp/spade-device-out}
    mkdir -p "$OUT"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"; } | tee "$OUT/gpu.txt"
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
    python3 bench/gpu.py "${@:2}" 2>&1 | tee "$OUT/gpu_bench.log"
    tail -1 "$OUT/gpu_bench.log" > "$OUT/gpu_bench.json"
    ;;
  *)
    echo "usage: scripts/device_bench.sh fetch|run [bench/gpu.py options]" >&2
    exit 2
    ;;
esac
