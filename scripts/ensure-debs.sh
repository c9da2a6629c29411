#!/usr/bin/env bash
# Installs the Debian packages TokenPulse needs, only when something is missing (silent otherwise).
#   ensure-debs.sh stack   what `make up` runs: prometheus, prometheus-alertmanager,
#                          libtcmalloc-minimal4
#   ensure-debs.sh         that plus what the tests use: promtool, amtool (same packages), docker-compose
#
# Another apt or dpkg (unattended-upgrades, a second `make`) may hold a lock. apt-get waits for the
# dpkg lock itself with -o DPkg::Lock::Timeout, but not for the package lists lock (`update`) or
# the archives lock (downloads), so before each apt-get this script waits for all of them, saying
# which process holds which lock.
#   TOKENPULSE_APT_LOCK_TIMEOUT_S  seconds to wait for a lock (default 600)
#   TOKENPULSE_APT_LOCKS           colon-separated lock files to wait for (default: apt's four)
set -euo pipefail
need=()
command -v prometheus >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null || need+=(prometheus-alertmanager)
# tcmalloc, which the components TensorFlow runs in preload (stack/allocator.py)
dpkg-query -W -f='${Status}' libtcmalloc-minimal4 2>/dev/null | grep -q "ok installed" || need+=(libtcmalloc-minimal4)
if [ "${1:-all}" != "stack" ]; then
  command -v promtool >/dev/null || need+=(prometheus)
  command -v amtool >/dev/null || need+=(prometheus-alertmanager)
  command -v docker-compose >/dev/null || need+=(docker-compose)
fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
mapfile -t pkgs < <(printf '%s\n' "${need[@]}" | sort -u)

timeout_s="${TOKENPULSE_APT_LOCK_TIMEOUT_S:-600}"
IFS=: read -r -a locks <<<"${TOKENPULSE_APT_LOCKS:-/var/lib/dpkg/lock-frontend:/var/lib/dpkg/lock:/var/lib/apt/lists/lock:/var/cache/apt/archives/lock}"

# "pid N (command line)" of each process holding a POSIX lock on $1, from /proc/locks (readable
# without root, unlike other users' /proc/N/fd). Matched on the inode only: on btrfs, for one,
# /proc/locks names another device than stat does. Waiting lockers ("->" lines) are not holders.
holders() {
  local ino pid cmd
  ino=$(stat -c %i -- "$1" 2>/dev/null) || return 0
  [ -r /proc/locks ] || return 0
  for pid in $(awk -v ino="$ino" '$2 != "->" { n = split($6, d, ":"); if (d[n] == ino) print $5 }' /proc/locks | sort -u); do
    cmd=$(tr '\0\n' '  ' 2>/dev/null </proc/"$pid"/cmdline | sed 's/ *$//' || true)
    printf 'pid %s%s\n' "$pid" "${cmd:+ ($cmd)}"
  done
}

# Wait until no lock in $locks is held (saying who holds each, once per holder), at most timeout_s;
# then go on anyway: apt-get waits for the dpkg lock itself, and otherwise says what it could not get.
wait_for_locks() {
  local step=$1 deadline=$((SECONDS + timeout_s)) said="" lock who busy
  while true; do
    busy=""
    for lock in "${locks[@]}"; do
      who=$(holders "$lock")
      [ -n "$who" ] || continue
      busy=1
      if [[ "$said" != *"[$lock $who]"* ]]; then
        echo "waiting for $lock before $step (up to ${timeout_s}s), held by ${who//$'\n'/, }"
        said+="[$lock $who]"
      fi
    done
    [ -n "$busy" ] || return 0
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "still locked after ${timeout_s}s; trying $step anyway"
      return 0
    fi
    sleep 1
  done
}

echo "installing Debian packages: ${pkgs[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
apt_opts=(-q -o "DPkg::Lock::Timeout=$timeout_s")
wait_for_locks "apt-get update"
$sudo_cmd apt-get "${apt_opts[@]}" update
wait_for_locks "apt-get install"
$sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${pkgs[@]}"
