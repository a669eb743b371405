#!/usr/bin/env bash
# Installs the named Debian packages with apt-get, but only those not yet
# installed, so repeated `make` runs cost nothing. Needs root (as on the
# project's machines) or sudo.
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Several builds may install at once on a shared machine: wait for dpkg's lock.
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
