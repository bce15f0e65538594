#!/usr/bin/env bash
# Installs the .deb with apt-get on this machine (resolving its Depends from the
# distribution), checks the installed app and CLI, then removes the package and checks
# that nothing of it is left. Usage: packaging/install-test.sh dist/conduit_<version>_amd64.deb
set -euo pipefail

deb=$(realpath "${1:?usage: $0 path/to/conduit_<version>_amd64.deb}")
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-test: needs root or sudo" >&2; exit 1; }
  sudo=(sudo)
fi
if dpkg-query -W -f='${Status}' conduit 2>/dev/null | grep -q 'install ok installed'; then
  echo "install-test: a conduit package is already installed; not touching it" >&2
  exit 1
fi
apt() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }

say() { printf '\033[1minstall-test:\033[0m %s\n' "$*"; }
removed=no
cleanup() { [ "$removed" = yes ] || apt remove -y -qq conduit >/dev/null || true; }
trap cleanup EXIT

say "apt-get install $deb"
apt install -y -qq "$deb"
files=$(dpkg -L conduit)
for path in /usr/bin/conduit-desktop /usr/bin/conduit /usr/share/applications/Conduit.desktop; do
  grep -qx "$path" <<<"$files" || { echo "install-test: $path is not installed" >&2; exit 1; }
  [ -e "$path" ] || { echo "install-test: $path is listed but missing" >&2; exit 1; }
done
version=$(dpkg-query -W -f='${Version}' conduit)
[ "$(conduit --version)" = "conduit $version" ] || { echo "install-test: conduit --version says $(conduit --version)" >&2; exit 1; }
# Every library the installed binaries need resolves on this system.
if ldd /usr/bin/conduit-desktop /usr/bin/conduit | grep -q 'not found'; then
  ldd /usr/bin/conduit-desktop /usr/bin/conduit | grep 'not found' >&2
  exit 1
fi
say "installed: $(conduit --version); $(wc -l <<<"$files") paths"

say "apt-get remove conduit"
apt remove -y -qq conduit
removed=yes
left=()
while read -r path; do
  [ -f "$path" ] && left+=("$path")
done <<<"$files"
if [ ${#left[@]} -gt 0 ] || dpkg-query -W -f='${Status}' conduit 2>/dev/null | grep -q 'install ok installed'; then
  echo "install-test: left after removal: ${left[*]:-the package is still installed}" >&2
  exit 1
fi
say "removed cleanly: none of its files are left"
