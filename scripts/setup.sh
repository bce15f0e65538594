#!/usr/bin/env bash
# Installs what Conduit's build needs and is missing: Debian packages, npm packages,
# Rust crates, and (for tests) tauri-driver. Usage: scripts/setup.sh run|test
set -euo pipefail

mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
tauri_driver_version=2.1.0

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

# Prerequisites these commands cannot install for you.
command -v cargo >/dev/null ||
  die "Rust is missing: install it with: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
# The workspace's rust-version: Debian's and Ubuntu's own cargo packages are older.
rust_wanted=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
rust_have=$(rustc --version | sed -n 's/^rustc \([0-9][0-9.]*\).*/\1/p')
if [ -n "$rust_wanted" ] && [ "$(printf '%s\n%s\n' "$rust_wanted" "$rust_have" | sort -V | head -n 1)" != "$rust_wanted" ]; then
  die "Rust $rust_have is older than the $rust_wanted Conduit needs: update it (rustup update stable), or install it with rustup instead of the system package"
fi
# `make test` checks formatting and lints: a minimal rustup profile has neither.
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    command -v rustup >/dev/null || die "cargo $component is missing: install it with your Rust (rustup component add $component)"
    say "installing the Rust component $component"
    rustup component add "$component"
  fi
done
command -v node >/dev/null && command -v npm >/dev/null ||
  die "Node.js 20.19 or newer is missing: install it from https://nodejs.org or your package manager (e.g. NodeSource's nodejs package)"
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' ||
  die "Node.js $(node --version) is too old: Conduit's UI build needs 20.19 or newer"

packages=(build-essential pkg-config curl file libwebkit2gtk-4.1-dev libxdo-dev libssl-dev librsvg2-dev)
if [ "$mode" = test ]; then
  # procps: the tests end and look for processes with kill, pgrep and pkill.
  # desktop-file-utils: the package test validates the desktop entry; installed now,
  # with the rest, not after half an hour of tests when sudo asks for its password again.
  packages+=(xvfb xauth webkit2gtk-driver python3 python3-venv xdotool x11-utils procps desktop-file-utils)
fi
if command -v dpkg-query >/dev/null; then
  "$root/scripts/apt-install.sh" "${packages[@]}"
else
  say "not a Debian/Ubuntu system: make sure these (or your system's equivalents) are installed: ${packages[*]}"
fi

# npm packages, reinstalled when a lock file changed since the last install.
npm_install() {
  local dir="$1" stamp="$1/node_modules/.conduit-lock-stamp"
  if [ ! -f "$stamp" ] || ! cmp -s "$dir/package-lock.json" "$stamp"; then
    say "installing npm packages in ${dir#"$root"/} (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$dir/package-lock.json" "$stamp"
  fi
}
npm_install "$root/ui"
if [ "$mode" = test ]; then
  # `make test` ends by building and testing the package: its bundler now, not later.
  "$root/packaging/setup.sh"
  # Real MCP servers for the tests, pinned by their lock files.
  npm_install "$root/tests/mcp-servers"
  venv="$root/tests/mcp-servers/.venv"
  lock="$root/tests/mcp-servers/requirements.lock"
  # The stamp is the lock file and the Python that made the venv: a venv outlives no
  # Python upgrade (its interpreter link breaks).
  stamp_text=$(cat "$lock"; python3 --version 2>&1 || true)
  if [ ! -f "$venv/.conduit-lock-stamp" ] || [ "$(cat "$venv/.conduit-lock-stamp")" != "$stamp_text" ] ||
     ! "$venv/bin/python" -c 'pass' 2>/dev/null; then
    command -v python3 >/dev/null || die "python3 is missing: install it (Debian: apt-get install python3 python3-venv)"
    say "installing Python MCP servers for the tests (pip)"
    rm -rf "$venv"
    python3 -m venv "$venv" || die "python3 -m venv failed: install python3-venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
    printf '%s' "$stamp_text" > "$venv/.conduit-lock-stamp"
  fi
fi

say "fetching Rust crates"
(cd "$root" && cargo fetch --locked --quiet)

if [ "$mode" = test ]; then
  # Read whole before it is searched: `grep -q` leaving a pipe early can fail cargo's
  # write, which pipefail would take for a missing tauri-driver (minutes of rebuilding).
  installed=$(cargo install --list)
  if ! command -v tauri-driver >/dev/null ||
     ! grep -q "^tauri-driver v$tauri_driver_version:" <<<"$installed"; then
    say "installing tauri-driver $tauri_driver_version"
    # Built in a folder of its own, not the workspace's (CARGO_TARGET_DIR, which the
    # Makefile exports): cargo install removes its own folder when it is done.
    env -u CARGO_TARGET_DIR cargo install tauri-driver --locked --version "$tauri_driver_version" --quiet
  fi
fi
