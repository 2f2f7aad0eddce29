#!/usr/bin/env bash
# Makes sure a Docker Engine answers for the docker sandbox backend's tests
# and prints its host (unix:///…). Order: $YUXI_TEST_DOCKER_HOST, this
# script's private daemon, the system daemon at /var/run/docker.sock; when
# none answers, Debian's docker.io (and busybox-static, the test image's
# root file system) is installed if missing and a private dockerd is started
# with its own data root, exec root, pid file and socket under
# $YUXI_DOCKERD_DIR (default /var/tmp/yuxi-dockerd). The private daemon
# makes no bridge and touches no iptables rules: sandboxes run with no
# network, and the tests' internal networks need none of them.
# Idempotent; concurrent callers wait on one lock.
set -euo pipefail

dir=${YUXI_DOCKERD_DIR:-/var/tmp/yuxi-dockerd}
sock=$dir/docker.sock

answers() { curl -fsS --max-time 3 --unix-socket "$1" http://docker/_ping >/dev/null 2>&1; }

sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo -n"

if [ -n "${YUXI_TEST_DOCKER_HOST:-}" ]; then echo "$YUXI_TEST_DOCKER_HOST"; exit 0; fi
if ! command -v curl >/dev/null 2>&1; then
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq curl >/dev/null; } >&2
fi
if answers "$sock"; then echo "unix://$sock"; exit 0; fi
if answers /var/run/docker.sock; then echo "unix:///var/run/docker.sock"; exit 0; fi

missing=""
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || missing="$missing busybox-static"
if [ -n "$missing" ]; then
  echo "docker-engine: installing$missing" >&2
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq$missing >/dev/null; } >&2
fi

mkdir -p "$dir"
exec 9>"$dir/lock"
flock 9
if ! answers "$sock"; then
  echo "docker-engine: starting a private dockerd on $sock" >&2
  if [ -f "$dir/dockerd.pid" ] && ! kill -0 "$(cat "$dir/dockerd.pid")" 2>/dev/null; then rm -f "$dir/dockerd.pid"; fi
  rm -f "$sock"
  setsid $sudo dockerd --host "unix://$sock" --data-root "$dir/data" --exec-root "$dir/exec" \
    --pidfile "$dir/dockerd.pid" --bridge none --iptables=false --ip6tables=false --ip-masq=false \
    --userland-proxy=false --log-level warn </dev/null >"$dir/dockerd.log" 2>&1 &
  for _ in $(seq 1 300); do answers "$sock" && break; sleep 0.1; done
  answers "$sock" || { echo "docker-engine: dockerd did not answer; see $dir/dockerd.log" >&2; tail -n 20 "$dir/dockerd.log" >&2; exit 1; }
fi
echo "unix://$sock"
