#!/usr/bin/env bash
# Fetches Abseil's source, as the distribution patches it, into DIR, for a
# build that links Abseil in (GPUSCOPE_ABSEIL_SOURCE_DIR; `make wheel`).
#
#   bash scripts/fetch-abseil.sh DIR
#
# Why the distribution's source package: it is the version the system's
# libabsl-dev has (the one every other build here is tested against; the
# newest the archive has where libabsl-dev is not installed), with its
# security fixes and configuration applied, from a signed archive. The distribution's own
# static archives cannot be used: they are not position-independent, so they
# cannot go into the Python extension (a shared object).
#
# The source package comes from the Debian or Ubuntu archives this machine's
# apt already uses, with their deb-src twins written into a private apt
# state under DIR's parent: nothing in /etc/apt is changed and no root is
# needed. Needs dpkg-source (Debian's dpkg-dev; `make deps` installs both it
# and, through this script, the source). Safe to run again: a DIR this
# script completed (its stamp file written last) is kept; anything else there
# is replaced.
set -euo pipefail
shopt -s nullglob

dest="${1:?usage: fetch-abseil.sh DIR}"
mkdir -p "$(dirname "$dest")"
dest="$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")"  # apt reads relative paths from /etc/apt
stamp="$dest/.gpuscope-fetched"
if [ -f "$stamp" ]; then
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || {
  echo "fetch-abseil: needs apt-get (Debian/Ubuntu); elsewhere, unpack an abseil-cpp source" \
       "tree into $dest yourself and pass it as GPUSCOPE_ABSEIL_SOURCE_DIR" >&2
  exit 1
}
command -v dpkg-source >/dev/null 2>&1 || {
  echo "fetch-abseil: dpkg-source is missing: apt-get install dpkg-dev (or make deps)" >&2
  exit 1
}

parent="$(dirname "$dest")"
work="$(mktemp -d "$parent/.abseil-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parts" "$work/lists/partial" "$work/cache/archives/partial"

# deb-src twins of the machine's Debian and Ubuntu archive entries (a
# third-party repository may publish no sources): one-line lists and
# deb822 files.
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n -E 's#^[[:space:]]*deb[[:space:]]+(.*(/debian|/ubuntu).*)#deb-src \1#p' "$f" \
    >>"$work/parts/twins.list"
done
n=0
for f in /etc/apt/sources.list.d/*.sources; do
  n=$((n + 1))
  # A stanza of type deb from such an archive gets Types: deb-src; the
  # others are dropped.
  awk 'BEGIN { RS = ""; ORS = "\n\n" }
       /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && /(^|\n)URIs:[^\n]*\/(debian|ubuntu)/ {
         gsub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' \
    "$f" >"$work/parts/twins$n.sources"
done
parts=("$work/parts/"*)
if ((${#parts[@]} == 0)) || ! grep -qs 'deb-src' "${parts[@]}"; then
  echo "fetch-abseil: no Debian or Ubuntu archive is configured on this machine" \
       "(/etc/apt/sources.list*)" >&2
  exit 1
fi

# The source version of the installed libabsl-dev, where there is one.
want="abseil"
installed="$(dpkg-query -W -f='${source:Version}' libabsl-dev 2>/dev/null || true)"
[ -n "$installed" ] && want="abseil=$installed"

apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
          -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
          -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")
echo "fetch-abseil: downloading the source package $want"
apt-get "${apt_opts[@]}" -qq update
if ! (cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "$want" >/dev/null); then
  echo "fetch-abseil: the archive no longer has $want; taking its newest abseil" >&2
  (cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only abseil >/dev/null)
fi
dscs=("$work"/abseil_*.dsc)
if ((${#dscs[@]} != 1)); then
  echo "fetch-abseil: expected one abseil .dsc, apt-get source gave ${#dscs[@]}" >&2
  exit 1
fi
# Unpacked (and patched) beside, then moved into place: an interrupted run
# leaves no half-patched tree behind. The signature is apt's to check (the
# archive's signed index names the files' hashes); dpkg-source checks the
# hashes and says it cannot check the uploader's key, which only its log
# keeps.
if ! dpkg-source -x "${dscs[0]}" "$work/tree" >"$work/unpack.log" 2>&1; then
  cat "$work/unpack.log" >&2
  exit 1
fi
basename "${dscs[0]}" .dsc >"$work/tree/.gpuscope-fetched"
rm -rf "$dest"
mv "$work/tree" "$dest"
echo "fetch-abseil: $(cat "$stamp") unpacked into $dest"
