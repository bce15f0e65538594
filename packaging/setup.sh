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

if command -v dpkg-query >/dev/null; then
  "$here/../scripts/apt-install.sh" desktop-file-utils
fi
