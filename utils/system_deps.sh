#!/usr/bin/env bash
# Install the Debian packages listed in utils/system-packages.txt (or only those named as
# arguments) that are missing, when this machine allows it (apt-get present and running as root).
# Tests that need a package that could not be installed skip with a message naming it. Prints
# what it did.
set -u
list="$(dirname "$0")/system-packages.txt"
if [ $# -gt 0 ]; then
  wanted=("$@")
else
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
  exit 0
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
  || echo "could not install some of: ${missing[*]}; what needs them skips or says so"
exit 0
