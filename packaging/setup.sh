#!/usr/bin/env bash
# Installs what `make package` and its test need beyond `make setup`: the Tauri
# bundler's command line (prebuilt, from npm, pinned by packaging/package-lock.json to the
# app's Tauri version) and desktop-file-validate (Debian's desktop-file-utils).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }

stamp="$here/node_modules/.conduit-lock-stamp"
if [ ! -f "$stamp" ] || ! cmp -s "$here/package-lock.json" "$stamp"; then
  say "installing the Tauri bundler (npm ci in packaging)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$stamp"
fi

missing=()
for pkg in desktop-file-utils; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  # A freshly booted machine's unattended upgrades hold apt's locks for a while.
  apt=(apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi
