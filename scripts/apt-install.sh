#!/usr/bin/env bash
# Installs those of the Debian packages named that are missing, as root or through sudo,
# waiting for another apt (a freshly booted machine's unattended upgrades) to let go of
# its locks. Usage: scripts/apt-install.sh package...
set -euo pipefail

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -gt 0 ] || exit 0

say "installing Debian packages: ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
# DPkg::Lock::Timeout makes `install` wait for dpkg's lock; `update` takes the package
# lists' lock, which it does not wait for: asked again every 10 s for up to 10 minutes
# while another apt holds it.
apt=(apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
for attempt in $(seq 60); do
  if out=$("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq 2>&1); then
    break
  fi
  if [ "$attempt" -lt 60 ] && grep -qiE 'could not get lock|unable to lock|is held by process' <<<"$out"; then
    [ "$attempt" -gt 1 ] || say "another apt holds its lock (unattended upgrades?): waiting for it"
    sleep 10
    continue
  fi
  printf '%s\n' "$out" >&2
  exit 1
done
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
