#!/usr/bin/env bash
# Install what spade-engine and its tests need on a Debian machine, reusing what is present.
#   scripts/setup.sh          python package (editable) + dev extras
#   scripts/setup.sh --system also Debian packages the sandbox's kernel filter (libseccomp2,
#                             python3-seccomp) and the service-backed tests use
#                             (kcat, chromium, chromium-driver, postgresql, docker-compose for
#                             `docker-compose config` on compose.yaml), the Kafka jars, and
#                             llama.cpp (llama-cpp-python, built once per machine)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--system" ]]; then
  need=()
  # the sandbox's seccomp filter: libseccomp and its official Python bindings (the worker loads
  # Debian's build when it matches this interpreter's ABI; pyseccomp from PyPI otherwise)
  [[ -e /usr/lib/x86_64-linux-gnu/libseccomp.so.2 || -e /usr/lib/aarch64-linux-gnu/libseccomp.so.2 ]] || need+=(libseccomp2)
  ls /usr/lib/python3/dist-packages/seccomp.*.so >/dev/null 2>&1 || need+=(python3-seccomp)
  command -v kcat >/dev/null || need+=(kcat)
  command -v chromium >/dev/null || need+=(chromium)
  command -v chromedriver >/dev/null || need+=(chromium-driver)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v java >/dev/null || need+=(default-jre-headless)
  command -v mvn >/dev/null || need+=(maven)
  command -v docker-compose >/dev/null || need+=(docker-compose)
  command -v g++ >/dev/null || need+=(g++)  # DeepSpeed builds its CPU communication op on first use
  if ((${#need[@]})); then
    echo "installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

PY=${PYTHON:-python3}
# the registries' certificates are in the system store: let uv use it (UV_NATIVE_TLS for older uv)
export UV_SYSTEM_CERTS=${UV_SYSTEM_CERTS:-1} UV_NATIVE_TLS=${UV_NATIVE_TLS:-1}
if ! $PY -m uv --version >/dev/null 2>&1; then
  $PY -m pip install -q uv
fi
# into $PY's own environment (the machine's interpreter by default), reusing whatever it already
# has (torch is gigabytes); --python, not --system, so PYTHON=/path/to/venv/bin/python is honoured
PYEXE=$($PY -c 'import sys; print(sys.executable)')
$PY -m uv pip install --python "$PYEXE" -q -e '.[dev]'

# The console script goes into the interpreter's scripts folder. Under pyenv that folder is not on
# PATH: the shims are, and a shim for a new script exists only after `pyenv rehash`.
SCRIPTS=$($PY -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
PYENV_BIN=$(command -v pyenv || true)
if [[ -z "$PYENV_BIN" && -x "${PYENV_ROOT:-$HOME/.pyenv}/bin/pyenv" ]]; then
  PYENV_BIN="${PYENV_ROOT:-$HOME/.pyenv}/bin/pyenv"
fi
if [[ -n "$PYENV_BIN" && "$SCRIPTS" == "$("$PYENV_BIN" root)"/* ]]; then
  "$PYENV_BIN" rehash
fi
if FOUND=$(command -v spade-engine); then
  echo "spade-engine is ready: $FOUND (try: spade-engine start)"
else
  echo "spade-engine was installed as $SCRIPTS/spade-engine, but $SCRIPTS is not on your PATH." >&2
  echo "  add it:  export PATH=\"$SCRIPTS:\$PATH\"   (or run: $PY -m spade_engine.cli start)" >&2
fi

if [[ "${1:-}" == "--system" && -f scripts/kafka_broker.py ]]; then
  $PY scripts/kafka_broker.py fetch
fi

if [[ "${1:-}" == "--system" ]]; then
  # llama.cpp for the real-model tests: built once per machine into ~/.cache/spade-engine/wheels
  # (about 10 minutes on 2 cores, with progress), then installed from there
  $PY -m spade_engine.cli models install-llamacpp
fi
