#!/usr/bin/env bash
# Makes sure the two services the platform and its tests need are running:
# PostgreSQL (≥ 15) on 127.0.0.1:5432 and Redis (≥ 7) on 127.0.0.1:6379.
# When one is installed but stopped, it is started; when it is missing, the
# script says how to install it and fails.
set -euo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
wait_for() { for _ in $(seq 1 100); do "$1" && return 0; sleep 0.1; done; return 1; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    echo "starting PostgreSQL $version" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  elif command -v pg_ctl >/dev/null 2>&1 && [ -n "${PGDATA:-}" ]; then
    pg_ctl -D "$PGDATA" -l "$PGDATA/server.log" start || true
  fi
  wait_for pg_up || {
    echo "PostgreSQL is not running on 127.0.0.1:5432 and could not be started." >&2
    echo "Install it (Debian: apt-get install postgresql) with trust auth for user postgres on 127.0.0.1," >&2
    echo "or point YUXI_TEST_DATABASE_URL / DATABASE_URL at a server." >&2
    exit 1
  }
fi

if ! redis_up; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "starting Redis" >&2
    mkdir -p /tmp/yuxi-redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /tmp/yuxi-redis --logfile /tmp/yuxi-redis/redis.log
  fi
  wait_for redis_up || {
    echo "Redis is not running on 127.0.0.1:6379 and could not be started." >&2
    echo "Install it (Debian: apt-get install redis-server) or set YUXI_TEST_REDIS_URL / REDIS_URL." >&2
    exit 1
  }
fi
