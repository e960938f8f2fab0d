#!/usr/bin/env bash
# Fetches Abseil's source, as the distribution patches it, into DIR, for a
# build that links Abseil in (GPUSCOPE_ABSEIL_SOURCE_DIR; `make wheel`).
#
#   bash scripts/fetch-abseil.sh DIR
#
# Why the distribution's source package: it is the version the system's
# libabsl-dev has (the one every other build here is tested against), with
# its security fixes applied, from a signed archive. The distribution's own
# static archives cannot be used: they are not position-independent, so they
# cannot go into the Python extension (a shared object).
#
# The source package comes from the apt archives this machine already uses,
# with their deb-src twins written into a private apt state under DIR's
# parent: nothing in /etc/apt is changed and no root is needed. Needs
# dpkg-source (Debian's dpkg-dev; `make deps` installs it). Safe to run
# again: a DIR that holds a source tree is kept.
set -euo pipefail

dest="${1:?usage: fetch-abseil.sh DIR}"
if [ -f "$dest/CMakeLists.txt" ] && [ -f "$dest/absl/status/status.h" ]; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "fetch-abseil: needs apt-get (Debian/Ubuntu); elsewhere, unpack an abseil-cpp release" \
       "(https://github.com/abseil/abseil-cpp/releases) into $dest yourself" >&2
  exit 1
}
command -v dpkg-source >/dev/null 2>&1 || {
  echo "fetch-abseil: dpkg-source is missing: apt-get install dpkg-dev (or make deps)" >&2
  exit 1
}

parent="$(dirname "$dest")"
mkdir -p "$parent"
work="$(mktemp -d "$parent/.abseil-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial"

# deb-src twins of the machine's deb entries: one-line lists and deb822 files.
shopt -s nullglob
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >>"$work/parts/twins.list"
done
n=0
for f in /etc/apt/sources.list.d/*.sources; do
  n=$((n + 1))
  # A stanza whose Types names deb gets Types: deb-src; the others are dropped.
  awk 'BEGIN { RS = ""; ORS = "\n\n" }
       /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ {
         gsub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' \
    "$f" >"$work/parts/twins$n.sources"
done
if ! cat "$work/parts/"* 2>/dev/null | grep -q 'deb-src'; then
  echo "fetch-abseil: no apt archive is configured on this machine (/etc/apt/sources.list*)" >&2
  exit 1
fi

apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
          -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")
echo "fetch-abseil: downloading the abseil source package"
apt-get "${apt_opts[@]}" -qq update
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only abseil >/dev/null)
dsc="$(ls "$work"/abseil_*.dsc | head -n1)"
rm -rf "$dest"
# The signature is apt's to check (the archive's signed index names the
# files' hashes); dpkg-source checks the hashes and says it cannot check
# the uploader's key, which only its log keeps.
if ! dpkg-source -x "$dsc" "$dest" >"$work/unpack.log" 2>&1; then
  cat "$work/unpack.log" >&2
  exit 1
fi
rm -f "$parent"/abseil_*.orig.tar.*
echo "fetch-abseil: $(basename "$dsc" .dsc) unpacked into $dest"
