#!/usr/bin/env bash
# Install the Debian packages listed in utils/system-packages.txt (or only those named as
# arguments) that are missing, when this machine allows it (apt-get present and running as root). Tests that need a package that could
# not be installed skip with a message naming it. Then the npm packages of utils/npm-packages.txt
# (JupyterHub's proxy), globally with npm, when running as root with npm present and no package was
# named as an argument. Prints what it did; installs nothing that is already there.
#
#   bash utils/system_deps.sh                  what the test suite needs (make test)
#   bash utils/system_deps.sh bubblewrap       only the packages named (make demo)
#   bash utils/system_deps.sh --class-server   what a class server needs, and only that
#                                              (utils/classroom/packages.txt, the proxy from npm,
#                                              nodejs and npm from Debian where npm is missing);
#                                              fails when something cannot be installed
set -u
here="$(dirname "$0")"
class_server=0
if [ "${1:-}" = "--class-server" ]; then
  class_server=1
  shift
fi

install_npm_packages() {
  local npmlist="$here/npm-packages.txt" want=() missing=() spec name have
  [ -f "$npmlist" ] || return 0
  mapfile -t want < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' -e '/^$/d' "$npmlist")
  for spec in "${want[@]}"; do
    name="${spec%@*}"
    have="$(npm ls -g --depth=0 --parseable --long "$name" 2>/dev/null | sed -n 's/^[^:]*:\(.*\)$/\1/p' | head -n 1)"
    [ "$have" = "$spec" ] || missing+=("$spec")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "npm packages present: ${want[*]}"
  elif ! command -v npm >/dev/null || [ "$(id -u)" != 0 ]; then
    echo "npm packages missing and not installable here (need root and npm): ${missing[*]}; tests that need them will skip"
    [ $class_server = 0 ] || failed=1
  else
    echo "installing npm packages: ${missing[*]}"
    if ! npm install -g --no-fund --no-audit --silent "${missing[@]}" >/dev/null 2>&1; then
      echo "could not install some of: ${missing[*]}; tests that need them will skip"
      [ $class_server = 0 ] || failed=1
    fi
  fi
}
failed=0
list="$here/system-packages.txt"
if [ $class_server = 1 ]; then
  list="$here/classroom/packages.txt"
  trap 'install_npm_packages; exit $failed' EXIT
  mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' -e '/^$/d' "$list")
  # JupyterHub's proxy runs on Node.js; Debian's nodejs and npm only where npm is not there already
  command -v npm >/dev/null || wanted+=(nodejs npm)
elif [ $# -gt 0 ]; then
  wanted=("$@")
else
  trap install_npm_packages EXIT
  [ -f "$list" ] || exit 0
  mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' -e '/^$/d' "$list")
fi
[ ${#wanted[@]} -gt 0 ] || exit 0
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages present: ${wanted[*]}"
  exit 0
fi
if ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
  echo "system packages missing and not installable here (need root and apt-get): ${missing[*]}; what needs them skips or says so"
  [ $class_server = 0 ] || failed=1
  exit 0
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  echo "could not install some of: ${missing[*]}; what needs them skips or says so"
  [ $class_server = 0 ] || failed=1
fi
exit 0
