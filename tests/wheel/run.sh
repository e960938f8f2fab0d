#!/usr/bin/env bash
# The wheel and the source build where the build machine's libraries are not:
# `make test-wheel`, part of `make test`. Needs root (debootstrap, chroot and
# mount namespaces; it runs itself again under sudo when it is not root);
# the wheel `make wheel` left in dist/.
#
# 1. The wheel in a clean root. A minimal Debian root made by debootstrap
#    from Debian's packages (python3 and python3-venv, nothing else), with
#    libstdc++ deleted from it: no Abseil, no nlohmann-json, no CUDA toolkit,
#    no C++ runtime, and the distribution's own Python, not the one that
#    built the wheel. A real second root rather than a namespace that hides
#    a few files of this one: whatever the extension needs that was not named
#    in advance is missing there too. In a private mount namespace (its
#    /proc and /sys vanish with it) the wheel goes into a fresh venv with
#    `pip install --no-index`, and tests/wheel/check_installed.py checks
#    `ldd`, the import, a loop, `gpuscope doctor` and `gpuscope run`. The
#    root is kept in .devdeps/ between runs.
# 2. A plain `pip install .` (build isolation on, as a user types it) into a
#    fresh venv, in a mount namespace where the CUDA toolkit and the system's
#    nlohmann-json are hidden: the vendors' headers and nlohmann-json must
#    come from pyproject.toml's build requirements (the build log is checked
#    for where they were found). Abseil stays visible: PyPI has none; with it
#    hidden too, the configure step must fail saying what to do.
# 3. The sdist holds every tracked file (a clone's content): `pip install`
#    and `make wheel` from it read what a clone has.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
PYTHON="${PYTHON:-python3}"

if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    # As root from here on, with the same Python (sudo resets PATH).
    exec sudo PYTHON="$(command -v "$PYTHON")" bash "$0" "$@"
  fi
  echo "test-wheel: needs root (debootstrap, chroot, unshare --mount): run it as root or with sudo" >&2
  exit 1
fi
wheels=("$src"/dist/gpuscope-*.whl)
if [ "${#wheels[@]}" != 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "test-wheel: expected exactly one wheel in dist/ (make wheel): ${wheels[*]}" >&2
  exit 1
fi
wheel="${wheels[0]}"
version="$(sed -n 's/^project(gpuscope VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")"
work="$(mktemp -d /tmp/gpuscope-wheel-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# ---- 1. the wheel in a clean root -----------------------------------------
# The Debian release whose python3 is the wheel's Python.
pytag="$(basename "$wheel" | sed -n 's/^gpuscope-[^-]*-cp\([0-9]*\)-.*/\1/p')"
case "$pytag" in
  311) suite=bookworm ;;
  313) suite=trixie ;;
  *) echo "test-wheel: no Debian release with glibc >= 2.34 ships the wheel's Python (cp$pytag);" \
          "build the wheel with Python 3.11 or 3.13" >&2; exit 1 ;;
esac
# The Debian mirror this machine's apt uses, if it uses one.
mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
            2>/dev/null | grep -v '^[[:space:]]*#' | grep -oE '(https?|file)://[^ ]*/debian/?( |$)' \
            | grep -v security | head -n1 | tr -d ' ' || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
cache="$src/.devdeps/cleanroot-$suite"
if [ ! -f "$cache/.complete" ]; then
  echo "test-wheel: making a clean Debian $suite root (debootstrap, from $mirror)"
  rm -rf "$cache" "$cache.tmp"
  mkdir -p "$(dirname "$cache")"
  if ! debootstrap --variant=minbase --include=python3,python3-venv "$suite" "$cache.tmp" "$mirror" \
      >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    echo "test-wheel: debootstrap failed (log above)" >&2
    exit 1
  fi
  touch "$cache.tmp/.complete"
  mv "$cache.tmp" "$cache"
fi
root="$work/root"
cp -a "$cache" "$root"
# No C++ runtime: the extension must carry its own.
rm -f "$root"/usr/lib/*-linux-gnu/libstdc++.so* "$root"/usr/lib/libstdc++.so*
chroot "$root" /sbin/ldconfig
mkdir -p "$root/opt/check"
cp "$wheel" "$here/check_installed.py" "$root/opt/check/"
echo "test-wheel: $(basename "$wheel") in the clean $suite root"
unshare --mount --fork /bin/bash -euo pipefail -c '
  root="$1"; wheel="$2"; version="$3"
  mount --make-rprivate /
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount -o remount,bind,ro "$root/sys"
  exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 /bin/sh -ec "
    python3 -m venv /opt/venv
    /opt/venv/bin/pip install -q --no-index --disable-pip-version-check /opt/check/$wheel
    cd /opt/check && /opt/venv/bin/python check_installed.py $version /opt/check --clean-root"
' _ "$root" "$(basename "$wheel")" "$version"

# ---- 2. pip install . with build isolation ----------------------------------
echo "test-wheel: pip install . (build isolation on) into a fresh venv, CUDA toolkit and" \
     "system nlohmann-json hidden"
"$PYTHON" -m venv "$work/venv"
hide=()
for d in /usr/local/cuda*/ /usr/include/nlohmann /usr/share/cmake/nlohmann_json \
         /usr/lib/cmake/nlohmann_json /usr/lib/*-linux-gnu/cmake/nlohmann_json; do
  [ -d "$d" ] && [ ! -L "${d%/}" ] && hide+=("${d%/}")
done
mkdir -p "$work/empty"
if ! unshare --mount --fork /bin/bash -euo pipefail -c '
  empty="$1"; venv="$2"; src="$3"; shift 3
  mount --make-rprivate /
  for d in "$@"; do mount --bind "$empty" "$d"; done
  cd "$src"
  "$venv/bin/pip" install -v --disable-pip-version-check .
' _ "$work/empty" "$work/venv" "$src" "${hide[@]}" >"$work/pip.log" 2>&1; then
  tail -n 40 "$work/pip.log" >&2
  echo "test-wheel: pip install . failed (log above)" >&2
  exit 1
fi
# Where the build found the headers: the build environment pip made.
for what in "GPUSCOPE_NVTX_INCLUDE_DIR = " "gpuscope: vendor headers from " "gpuscope: nlohmann-json "; do
  line="$(grep -m1 "$what" "$work/pip.log" || true)"
  case "$line" in
    *" /usr/"* | *";/usr/"*) ;;
    *pip-build-env*) echo "  ok  ${line#*-- }"; continue ;;
  esac
  echo "test-wheel: FAILED: $what did not come from the build requirements: '$line'" >&2
  exit 1
done
(cd "$work" && "$work/venv/bin/python" "$here/check_installed.py" "$version" "$work")

# Without Abseil (hidden here: PyPI has none to put in the build environment)
# the configure step says what to install, and how to build it in without root.
hide=()
for d in /usr/include/absl /usr/lib/*-linux-gnu/cmake/absl /usr/lib/cmake/absl \
         /usr/local/include/absl /usr/local/lib/cmake/absl; do
  [ -d "$d" ] && hide+=("$d")
done
if unshare --mount --fork /bin/bash -euo pipefail -c '
  empty="$1"; src="$2"; build="$3"; shift 3
  mount --make-rprivate /
  for d in "$@"; do mount --bind "$empty" "$d"; done
  cmake -S "$src" -B "$build" -G Ninja -DGPUSCOPE_BUILD_TESTS=OFF -DGPUSCOPE_BUILD_BENCHMARKS=OFF \
    -DGPUSCOPE_BUILD_EXAMPLES=OFF -DGPUSCOPE_ENABLE_INSTALL=OFF
' _ "$work/empty" "$src" "$work/no-absl" "${hide[@]}" >"$work/no-absl.log" 2>&1; then
  echo "test-wheel: FAILED: CMake configured without Abseil" >&2
  exit 1
fi
said="$(tr -s ' \n' ' ' <"$work/no-absl.log")"
for what in "Abseil was not found" "apt-get install libabsl-dev" "GPUSCOPE_ABSEIL_SOURCE_DIR=" \
            "pip install gpuscope-*.whl"; do
  case "$said" in
    *"$what"*) ;;
    *) tail -n 20 "$work/no-absl.log" >&2
       echo "test-wheel: FAILED: without Abseil, CMake's error does not say '$what'" >&2
       exit 1 ;;
  esac
done
echo "  ok  without Abseil, configuring says what to install and how to build it in without root"

# ---- 3. the sdist -----------------------------------------------------------
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  sdist="$(cd "$src" && "$PYTHON" -c \
    'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' \
    "$work/sdist" | tail -n1)"
  tar -tzf "$work/sdist/$sdist" | sed 's|^[^/]*/||' | sort >"$work/sdist.files"
  git -C "$src" ls-files | sort >"$work/tracked.files"
  missing="$(comm -13 "$work/sdist.files" "$work/tracked.files")"
  if [ -n "$missing" ]; then
    echo "test-wheel: FAILED: the sdist lacks tracked files:" >&2
    echo "$missing" >&2
    exit 1
  fi
  echo "  ok  the sdist ($sdist) holds all $(wc -l <"$work/tracked.files") tracked files"
fi
echo "test-wheel: all passed"
