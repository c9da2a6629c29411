#!/usr/bin/env bash
# Installs the Debian packages TokenPulse needs, only when something is missing.
#   ensure-debs.sh stack   what `make up` runs: prometheus, prometheus-alertmanager
#   ensure-debs.sh         that plus what the tests use: promtool, amtool (same packages), docker-compose
set -euo pipefail
need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null || need+=(prometheus-alertmanager)
if [ "${1:-all}" != "stack" ]; then
  command -v promtool >/dev/null || need+=(prometheus)
  command -v amtool >/dev/null || need+=(prometheus-alertmanager)
  command -v docker-compose >/dev/null || need+=(docker-compose)
fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
mapfile -t pkgs < <(printf '%s\n' "${need[@]}" | sort -u)
echo "installing Debian packages: ${pkgs[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${pkgs[@]}"
