#!/usr/bin/env bash
# Native dev stack: real servers on this machine, no Docker needed.
#
#   bash scripts/stack.sh deps     install/fetch/build what the stack needs (idempotent)
#   bash scripts/stack.sh up       start everything (or `docker compose up -d --wait` if a Docker engine answers)
#   bash scripts/stack.sh down     stop everything this script started (safe to run twice)
#   bash scripts/stack.sh status   one line per server; exit 0 when all are up, 3 otherwise
#   bash scripts/stack.sh urls     print the connection URLs
#   bash scripts/stack.sh kafka-tool CLASS [ARGS...]
#                                  run a Kafka CLI class from the stack's jars, e.g.
#                                  org.apache.kafka.tools.TopicCommand --bootstrap-server localhost:9092 --list
#   bash scripts/stack.sh rabbitmqctl ARGS...
#                                  rabbitmqctl against the stack's node (rabbit@localhost)
#
# Servers: PostgreSQL (>= 15, wal2json, logical replication), pgbouncer (transaction
# pooling), RabbitMQ (+ management), Redis, Apache Kafka (KRaft, single node, jars from
# Maven Central), FerretDB (MongoDB wire protocol on SQLite, built from scripts/ferretdb).
# KurrentDB is docker compose only (no native package); status just reports its port.
# Ports come from scripts/ports.env (shared with docker-compose.yml).
# Everything (data, logs, pid files, jars, binaries) lives under .stack/ at the repo root.
#
# Environment knobs:
#   STACK_NATIVE=1     start natively even if a Docker engine answers
#   STACK_DIR=DIR      use DIR instead of <repo>/.stack
#   PG_BINDIR=DIR      PostgreSQL bin dir (default /usr/lib/postgresql/15/bin, else the newest >= 15)
#   KAFKA_HEAP_OPTS    JVM heap of the broker (default -Xms512m -Xmx512m)
#
# When run as root, PostgreSQL and pgbouncer run as the `postgres` user and RabbitMQ
# as the `rabbitmq` user (initdb and pgbouncer refuse root); otherwise everything runs
# as the invoking user.
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail

# Any command that fails outside die() lands here: say which command, where, and what to
# do, instead of make's bare "Error N". (die() exits on purpose and does not pass here.)
on_error() {
  local rc=$1 line=$2 cmd=$3
  printf '\nerror: scripts/stack.sh %s: `%s` failed with exit status %s (line %s).\n' \
    "${STACK_CMD:-}" "$cmd" "$rc" "$line" >&2
  case "${STACK_CMD:-}" in
    deps) printf '%s\n' "What to do: the logs of each step are in ${LOG:-.stack/log}; check that the Debian" \
      "mirror, Maven Central and the Go module proxy answer, then run 'make deps' again (it is idempotent)." >&2 ;;
    up) printf '%s\n' "What to do: 'make status' shows which server is down and the logs are in ${LOG:-.stack/log};" \
      "run 'make deps' if something is missing, 'make down' to stop what started, then 'make up' again." >&2 ;;
    *) printf '%s\n' "What to do: the logs are in ${LOG:-.stack/log}; 'make status' shows the servers." >&2 ;;
  esac
  exit "$rc"
}
trap 'on_error $? $LINENO "$BASH_COMMAND"' ERR

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPTS="$ROOT/scripts"
STACK="${STACK_DIR:-$ROOT/.stack}"
LOG="$STACK/log"

# shellcheck source=ports.env
source "$SCRIPTS/ports.env"

PG_DB=wpe
PG_PASSWORD=postgres
PGDATA="$STACK/pg"
PGB_DIR="$STACK/pgbouncer"
REDIS_DIR="$STACK/redis"
RMQ_DIR="$STACK/rabbitmq"
RMQ_NODE="rabbit@localhost"
KAFKA_DIR="$STACK/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
FERRET_DIR="$STACK/ferretdb"
FERRET_BIN="$STACK/bin/ferretdb"

# ---------------------------------------------------------------------------
# helpers

say()  { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

if is_root; then
  PG_USER=postgres
  RMQ_USER=rabbitmq
else
  PG_USER="$(id -un)"
  RMQ_USER="$(id -un)"
fi

# rmq_home: the HOME of the RabbitMQ node and CLI, where the Erlang cookie lives. As root,
# the rabbitmq user's home (so the distro's `rabbitmqctl -n rabbit@localhost ...` wrapper
# can talk to the node); otherwise the invoking user's home. Asked only when RabbitMQ runs:
# before `deps` has installed rabbitmq-server the user does not exist, and getent exits 2.
rmq_home() {
  local home=""
  if is_root; then
    home="$(getent passwd "$RMQ_USER" 2>/dev/null | cut -d: -f6)" || home=""
  else
    home="${HOME:-}"
  fi
  printf '%s' "${home:-$RMQ_DIR}"
}

# as_user USER CMD...: run CMD as USER (only switches user when we are root).
as_user() {
  local user=$1; shift
  if is_root && [ "$user" != root ]; then
    runuser -u "$user" -- "$@"
  else
    "$@"
  fi
}

# own USER PATH...: chown to USER when root (no-op otherwise).
own() {
  local user=$1; shift
  if is_root; then chown "$user": "$@"; fi
}

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# port_holder PORT: best-effort description of the process listening on PORT.
port_holder() {
  local out=""
  if command -v ss >/dev/null 2>&1; then
    out="$(ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:(([^)]*))' | head -n1 || true)"
  fi
  printf '%s' "${out:-unknown process}"
}

# read_pid FILE: print the pid in FILE (empty if none).
read_pid() {
  [ -s "$1" ] || return 0
  head -n1 "$1" 2>/dev/null | tr -dc '0-9' || true
}

# pid_is PID PATTERN: PID is alive and its command line or environment contains PATTERN
# (RabbitMQ's beam gets its paths from the environment, not the command line).
pid_is() {
  local pid=$1 pattern=$2
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  cat "/proc/$pid/cmdline" "/proc/$pid/environ" 2>/dev/null | tr '\0' '\n' | grep -F -- "$pattern" >/dev/null
}

# wait_pid_gone PID SECONDS: wait for PID to exit; false on timeout.
wait_pid_gone() {
  local pid=$1 i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# stop_pid NAME PIDFILE PATTERN SECONDS: SIGTERM, wait, SIGKILL as last resort.
stop_pid() {
  local name=$1 pidfile=$2 pattern=$3 secs=$4 pid
  pid="$(read_pid "$pidfile")"
  if ! pid_is "$pid" "$pattern"; then
    info "$name: not running"
    rm -f "$pidfile"
    return 0
  fi
  say "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_pid_gone "$pid" "$secs"; then
    warn "$name did not stop within ${secs}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 5 || die "$name (pid $pid) would not die"
  fi
  rm -f "$pidfile"
}

# fail_with_log MESSAGE LOGFILE: die, showing the end of the log.
fail_with_log() {
  local msg=$1 logfile=$2
  if [ -f "$logfile" ]; then
    printf -- '--- last lines of %s ---\n' "$logfile" >&2
    tail -n 25 "$logfile" >&2 || true
    printf -- '---\n' >&2
  fi
  die "$msg (log: $logfile)"
}

# wait_until NAME SECONDS LOGFILE PIDFILE PATTERN CMD...: poll CMD until it succeeds.
# Fails early if the process in PIDFILE (when given) dies.
wait_until() {
  local name=$1 secs=$2 logfile=$3 pidfile=$4 pattern=$5; shift 5
  local deadline=$((SECONDS + secs)) pid
  until "$@" >/dev/null 2>&1; do
    if [ -n "$pidfile" ]; then
      pid="$(read_pid "$pidfile")"
      pid_is "$pid" "$pattern" || fail_with_log "$name exited while starting" "$logfile"
    fi
    [ "$SECONDS" -lt "$deadline" ] || fail_with_log "$name did not answer within ${secs}s" "$logfile"
    sleep 0.3
  done
}

# check_port NAME PORT: die if PORT is taken by something that is not ours.
check_port() {
  local name=$1 port=$2
  if port_open "$port"; then
    die "port $port ($name) is already in use by $(port_holder "$port"), which is not this stack's.
       Stop that server (e.g. 'sudo systemctl stop ...' for a distro service) or free the port, then retry."
  fi
}

docker_ok() {
  [ "${STACK_NATIVE:-0}" != 1 ] || return 1
  command -v docker >/dev/null 2>&1 || return 1
  timeout 15 docker info >/dev/null 2>&1
}

# ---------------------------------------------------------------------------
# PostgreSQL

# pg_majors: installed PostgreSQL major versions under /usr/lib/postgresql, ascending.
pg_majors() {
  local d
  for d in /usr/lib/postgresql/*/; do
    d="${d%/}"; d="${d##*/}"
    case "$d" in *[!0-9]* | '') ;; *) echo "$d" ;; esac
  done | sort -n
}

pg_bindir() {
  if [ -n "${PG_BINDIR:-}" ]; then
    [ -x "$PG_BINDIR/postgres" ] || die "PG_BINDIR=$PG_BINDIR has no postgres binary"
    printf '%s' "$PG_BINDIR"
    return
  fi
  if [ -s "$PGDATA/PG_VERSION" ]; then
    local v
    v="$(cat "$PGDATA/PG_VERSION")"
    [ -x "/usr/lib/postgresql/$v/bin/postgres" ] ||
      die "$PGDATA was created by PostgreSQL $v, whose binaries are missing (/usr/lib/postgresql/$v/bin); install postgresql-$v or remove $PGDATA"
    printf '%s' "/usr/lib/postgresql/$v/bin"
    return
  fi
  local v best=""
  if [ -x /usr/lib/postgresql/15/bin/postgres ]; then
    best=15
  else
    for v in $(pg_majors); do
      [ "$v" -ge 15 ] && [ -x "/usr/lib/postgresql/$v/bin/postgres" ] && best=$v
    done
  fi
  [ -n "$best" ] || die "PostgreSQL >= 15 not found under /usr/lib/postgresql; run: bash scripts/stack.sh deps"
  printf '%s' "/usr/lib/postgresql/$best/bin"
}

pg_running() {
  [ -s "$PGDATA/PG_VERSION" ] || return 1
  as_user "$PG_USER" "$(pg_bindir)/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1
}

pg_psql() {
  "$(pg_bindir)/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"
}

pg_write_conf() {
  local bin=$1 sockdir="$STACK/run/pg" plugins=""
  # unix socket paths are limited to ~107 bytes; skip the socket on deep checkouts
  if [ "${#sockdir}" -gt 90 ]; then sockdir=""; else mkdir -p "$sockdir" && own "$PG_USER" "$sockdir"; fi
  # PostgreSQL 15.19+ (and the matching minors of other majors) only decode with the
  # output plugins listed in output_plugin_libraries; older servers reject the name.
  # (no `grep -q` after a pipe here: with pipefail, its early exit can fail the pipeline)
  if as_user "$PG_USER" "$bin/postgres" --describe-config 2>/dev/null | grep '^output_plugin_libraries' >/dev/null; then
    plugins="output_plugin_libraries = 'pgoutput, test_decoding, wal2json'"
  fi
  cat >"$PGDATA/stack.conf" <<EOF
# Written by scripts/stack.sh at every start; edit the script, not this file.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sockdir'
max_connections = 300
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
$plugins
EOF
  own "$PG_USER" "$PGDATA/stack.conf"
  grep -q "^include_if_exists 'stack.conf'" "$PGDATA/postgresql.conf" ||
    printf "\n# native stack settings (scripts/stack.sh)\ninclude_if_exists 'stack.conf'\n" >>"$PGDATA/postgresql.conf"
}

pg_init() {
  local bin=$1
  mkdir -p "$PGDATA"
  own "$PG_USER" "$PGDATA"
  chmod 700 "$PGDATA"
  as_user "$PG_USER" test -w "$PGDATA" ||
    die "user $PG_USER cannot write $PGDATA: every parent directory of $STACK must be searchable by $PG_USER (e.g. chmod o+x on your home directory), or set STACK_DIR"
  say "postgres: initdb into $PGDATA"
  as_user "$PG_USER" "$bin/initdb" -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$LOG/postgres-initdb.log" 2>&1 ||
    fail_with_log "initdb failed" "$LOG/postgres-initdb.log"
  cat >"$PGDATA/pg_hba.conf" <<'EOF'
# Written by scripts/stack.sh (local dev stack: trust on loopback, replication allowed)
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  trust
host    all          all   127.0.0.1/32   trust
host    all          all   ::1/128        trust
local   replication  all                  trust
host    replication  all   127.0.0.1/32   trust
host    replication  all   ::1/128        trust
EOF
  own "$PG_USER" "$PGDATA/pg_hba.conf"
}

pg_ensure_db() {
  pg_psql -d postgres -c "ALTER ROLE postgres PASSWORD '$PG_PASSWORD'" >/dev/null
  if [ "$(pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
    info "postgres: creating database $PG_DB"
    pg_psql -d postgres -c "CREATE DATABASE $PG_DB" >/dev/null
  fi
}

start_postgres() {
  local bin
  bin="$(pg_bindir)"
  if pg_running; then
    info "postgres: already running ($PGDATA)"
    # keep stack.conf current; reloadable settings apply now, the others at the next restart
    pg_write_conf "$bin"
    pg_psql -d postgres -tAc 'SELECT pg_reload_conf()' >/dev/null || true
  else
    check_port postgres "$PG_PORT"
    [ -s "$PGDATA/PG_VERSION" ] || pg_init "$bin"
    [ -f "$bin/../lib/wal2json.so" ] || [ -f "$("$bin/pg_config" --pkglibdir 2>/dev/null)/wal2json.so" ] ||
      warn "wal2json not found for $bin; run: bash scripts/stack.sh deps"
    pg_write_conf "$bin"
    touch "$LOG/postgres.log" && own "$PG_USER" "$LOG/postgres.log"
    say "postgres: starting on 127.0.0.1:$PG_PORT ($(basename "$(dirname "$bin")"))"
    as_user "$PG_USER" "$bin/pg_ctl" -D "$PGDATA" -l "$LOG/postgres.log" -w -t 60 start >/dev/null ||
      fail_with_log "postgres failed to start" "$LOG/postgres.log"
  fi
  wait_until postgres 30 "$LOG/postgres.log" "" "" pg_psql -d postgres -c 'SELECT 1'
  pg_ensure_db
}

stop_postgres() {
  if pg_running; then
    say "stopping postgres"
    as_user "$PG_USER" "$(pg_bindir)/pg_ctl" -D "$PGDATA" stop -m fast -w -t 60 >/dev/null
  else
    info "postgres: not running"
  fi
}

# ---------------------------------------------------------------------------
# pgbouncer (transaction pooling in front of the stack's PostgreSQL)

PGB_PID="$PGB_DIR/pgbouncer.pid"

pgb_running() { pid_is "$(read_pid "$PGB_PID")" "$PGB_DIR/pgbouncer.ini"; }

start_pgbouncer() {
  if pgb_running; then
    info "pgbouncer: already running (pid $(read_pid "$PGB_PID"))"
    return
  fi
  check_port pgbouncer "$PGBOUNCER_PORT"
  command -v pgbouncer >/dev/null || die "pgbouncer not installed; run: bash scripts/stack.sh deps"
  mkdir -p "$PGB_DIR"
  cat >"$PGB_DIR/pgbouncer.ini" <<EOF
; Written by scripts/stack.sh at every start; edit the script, not this file.
[databases]
$PG_DB = host=127.0.0.1 port=$PG_PORT dbname=$PG_DB
; any other database name goes to the same server
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGBOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $PGB_DIR/userlist.txt
admin_users = postgres
stats_users = postgres
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
reserve_pool_size = 5
max_db_connections = 120
ignore_startup_parameters = extra_float_digits
logfile = $LOG/pgbouncer.log
pidfile = $PGB_PID
EOF
  printf '"postgres" "%s"\n' "$PG_PASSWORD" >"$PGB_DIR/userlist.txt"
  chmod 600 "$PGB_DIR/userlist.txt"
  touch "$LOG/pgbouncer.log"
  own "$PG_USER" "$PGB_DIR" "$PGB_DIR/pgbouncer.ini" "$PGB_DIR/userlist.txt" "$LOG/pgbouncer.log"
  rm -f "$PGB_PID"
  say "pgbouncer: starting on 127.0.0.1:$PGBOUNCER_PORT (transaction pooling -> :$PG_PORT)"
  # runuser's PAM session resets the fd limit to 1024: raise it again for max_client_conn
  # shellcheck disable=SC2016
  as_user "$PG_USER" bash -c 'h="$(ulimit -Hn)"; if [ "$h" = unlimited ] || [ "$h" -gt 65536 ]; then h=65536; fi
      ulimit -Sn "$h" 2>/dev/null; exec pgbouncer -d -q "$1"' _ "$PGB_DIR/pgbouncer.ini" ||
    fail_with_log "pgbouncer failed to start" "$LOG/pgbouncer.log"
  wait_until pgbouncer 15 "$LOG/pgbouncer.log" "" "" \
    "$(pg_bindir)/psql" -X -q -h 127.0.0.1 -p "$PGBOUNCER_PORT" -U postgres -d "$PG_DB" -c 'SELECT 1'
}

stop_pgbouncer() { stop_pid pgbouncer "$PGB_PID" "$PGB_DIR/pgbouncer.ini" 15; }

# ---------------------------------------------------------------------------
# Redis

REDIS_PID="$REDIS_DIR/redis.pid"

redis_running() { pid_is "$(read_pid "$REDIS_PID")" "redis-server"; }

start_redis() {
  if redis_running; then
    info "redis: already running (pid $(read_pid "$REDIS_PID"))"
    return
  fi
  check_port redis "$REDIS_PORT"
  command -v redis-server >/dev/null || die "redis-server not installed; run: bash scripts/stack.sh deps"
  mkdir -p "$REDIS_DIR"
  rm -f "$REDIS_PID"
  say "redis: starting on 127.0.0.1:$REDIS_PORT"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save '' --appendonly no \
    --dir "$REDIS_DIR" --pidfile "$REDIS_PID" --logfile "$LOG/redis.log" ||
    fail_with_log "redis failed to start" "$LOG/redis.log"
  wait_until redis 15 "$LOG/redis.log" "" "" redis_ping
}

redis_ping() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

stop_redis() {
  local pid
  pid="$(read_pid "$REDIS_PID")"
  if ! pid_is "$pid" redis-server; then
    info "redis: not running"
    return
  fi
  say "stopping redis (pid $pid)"
  redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  wait_pid_gone "$pid" 10 || stop_pid redis "$REDIS_PID" redis-server 5
  rm -f "$REDIS_PID"
}

# ---------------------------------------------------------------------------
# RabbitMQ (+ management plugin)

RMQ_PID="$RMQ_DIR/rabbitmq.pid"

rmq_bindir() {
  if [ -d /usr/lib/rabbitmq/bin ]; then
    printf '%s' /usr/lib/rabbitmq/bin # Debian/Ubuntu: the real scripts, not the su wrappers
  elif command -v rabbitmqctl >/dev/null; then
    dirname "$(command -v rabbitmqctl)"
  else
    die "rabbitmq-server not installed; run: bash scripts/stack.sh deps"
  fi
}

# rmq TOOL ARGS...: run a RabbitMQ script as the RabbitMQ user with the stack's environment
# (killed after $RMQ_TIMEOUT seconds when that is set).
rmq() {
  local tool=$1; shift
  local cmd=(env \
    HOME="$(rmq_home)" \
    RABBITMQ_NODENAME="$RMQ_NODE" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$RABBITMQ_PORT" \
    RABBITMQ_CONF_ENV_FILE="$RMQ_DIR/rabbitmq-env.conf" \
    RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$RMQ_DIR/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia" \
    RABBITMQ_LOG_BASE="$LOG/rabbitmq" \
    RABBITMQ_PID_FILE="$RMQ_PID" \
    ERL_CRASH_DUMP="$LOG/rabbitmq/erl_crash.dump" \
    "$(rmq_bindir)/$tool" "$@")
  if is_root && [ "$RMQ_USER" != root ]; then cmd=(runuser -u "$RMQ_USER" -- "${cmd[@]}"); fi
  ${RMQ_TIMEOUT:+timeout -k 5 "$RMQ_TIMEOUT"} "${cmd[@]}"
}

rmq_running() { pid_is "$(read_pid "$RMQ_PID")" "RABBITMQ_PID_FILE=$RMQ_PID"; }

start_rabbitmq() {
  if rmq_running; then
    info "rabbitmq: already running (pid $(read_pid "$RMQ_PID"))"
    return
  fi
  check_port rabbitmq "$RABBITMQ_PORT"
  check_port rabbitmq-management "$RABBITMQ_MGMT_PORT"
  mkdir -p "$RMQ_DIR/mnesia" "$LOG/rabbitmq"
  : >"$RMQ_DIR/rabbitmq-env.conf"
  cat >"$RMQ_DIR/rabbitmq.conf" <<EOF
# Written by scripts/stack.sh at every start; edit the script, not this file.
listeners.tcp.default = 127.0.0.1:$RABBITMQ_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $RABBITMQ_MGMT_PORT
# guest/guest, allowed from localhost only (RabbitMQ's default)
loopback_users.guest = true
log.console = false
log.file.level = info
EOF
  printf '[rabbitmq_management].\n' >"$RMQ_DIR/enabled_plugins"
  printf '[].\n' >"$RMQ_DIR/advanced.config"
  own "$RMQ_USER" "$RMQ_DIR" "$RMQ_DIR/mnesia" "$LOG/rabbitmq" "$RMQ_DIR"/rabbitmq-env.conf \
    "$RMQ_DIR/rabbitmq.conf" "$RMQ_DIR/enabled_plugins" "$RMQ_DIR/advanced.config"
  rm -f "$RMQ_PID"
  say "rabbitmq: starting on 127.0.0.1:$RABBITMQ_PORT (management :$RABBITMQ_MGMT_PORT)"
  rmq rabbitmq-server -detached >"$LOG/rabbitmq-start.log" 2>&1 ||
    fail_with_log "rabbitmq-server -detached failed" "$LOG/rabbitmq-start.log"
}

wait_rabbitmq() {
  local log="$LOG/rabbitmq/$RMQ_NODE.log"
  # `wait` blocks until the pid file appears and the broker app runs
  RMQ_TIMEOUT=100 rmq rabbitmqctl -n "$RMQ_NODE" wait --timeout 90 "$RMQ_PID" >"$LOG/rabbitmq-wait.log" 2>&1 ||
    fail_with_log "rabbitmq did not start within 90s (see also $LOG/rabbitmq-wait.log)" "$log"
  wait_until rabbitmq-management 30 "$log" "$RMQ_PID" "RABBITMQ_PID_FILE=$RMQ_PID" port_open "$RABBITMQ_MGMT_PORT"
}

stop_rabbitmq() {
  local pid
  pid="$(read_pid "$RMQ_PID")"
  if pid_is "$pid" "RABBITMQ_PID_FILE=$RMQ_PID"; then
    say "stopping rabbitmq (pid $pid)"
    # `stop PIDFILE` waits for the OS process to exit; it can hang forever when the CLI
    # cannot reach the node (e.g. Erlang cookie mismatch), hence the timeout + SIGTERM fallback
    RMQ_TIMEOUT=45 rmq rabbitmqctl -n "$RMQ_NODE" stop "$RMQ_PID" >/dev/null 2>&1 || true
    wait_pid_gone "$pid" 30 || stop_pid rabbitmq "$RMQ_PID" "RABBITMQ_PID_FILE=$RMQ_PID" 10
  else
    info "rabbitmq: not running"
  fi
  rm -f "$RMQ_PID"
  # rabbitmqctl stop leaves the Erlang port mapper (epmd, :4369) behind; `epmd -kill`
  # only stops it when no other Erlang node is registered with it.
  if command -v epmd >/dev/null && port_open 4369; then
    if ! epmd -names 2>/dev/null | grep '^name ' >/dev/null; then
      if epmd -kill >/dev/null 2>&1; then info "epmd stopped"; fi
    else
      info "epmd left running: other Erlang nodes use it"
    fi
  fi
}

# ---------------------------------------------------------------------------
# Apache Kafka (KRaft, broker+controller in one JVM)

KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_PROPS="$KAFKA_DIR/server.properties"

kafka_running() { pid_is "$(read_pid "$KAFKA_PID")" "$KAFKA_PROPS"; }

# kafka_tool CLASS ARGS...: run a Kafka CLI class from the stack's jars.
kafka_tool() {
  [ -d "$KAFKA_LIBS" ] || die "Kafka jars missing ($KAFKA_LIBS); run: bash scripts/stack.sh deps"
  ${KAFKA_TOOL_TIMEOUT:+timeout "$KAFKA_TOOL_TIMEOUT"} \
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$SCRIPTS/kafka/tools-log4j2.xml" \
    -cp "$KAFKA_LIBS/*" "$@"
}

kafka_write_props() {
  mkdir -p "$KAFKA_DIR/data" "$LOG/kafka"
  cat >"$KAFKA_PROPS" <<EOF
# Written by scripts/stack.sh at every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://localhost:$KAFKA_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DIR/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
auto.create.topics.enable=true
group.initial.rebalance.delay.ms=0
log.retention.hours=24
EOF
}

start_kafka() {
  if kafka_running; then
    info "kafka: already running (pid $(read_pid "$KAFKA_PID"))"
    return
  fi
  check_port kafka "$KAFKA_PORT"
  check_port kafka-controller "$KAFKA_CONTROLLER_PORT"
  [ -f "$KAFKA_LIBS/.complete" ] || die "Kafka jars missing ($KAFKA_LIBS); run: bash scripts/stack.sh deps"
  command -v java >/dev/null || die "java not found; run: bash scripts/stack.sh deps"
  kafka_write_props
  if [ ! -f "$KAFKA_DIR/data/meta.properties" ]; then
    local cluster_id
    # a Kafka cluster id is 16 random bytes, base64url without padding
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    say "kafka: formatting storage (cluster id $cluster_id)"
    kafka_tool kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_PROPS" >"$LOG/kafka-format.log" 2>&1 ||
      fail_with_log "kafka storage format failed" "$LOG/kafka-format.log"
  fi
  say "kafka: starting on localhost:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT)"
  rm -f "$KAFKA_PID"
  # shellcheck disable=SC2086
  setsid nohup java ${KAFKA_HEAP_OPTS:--Xms512m -Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$SCRIPTS/kafka/log4j2.xml" \
    -Dkafka.logs.dir="$LOG/kafka" \
    -cp "$KAFKA_LIBS/*" kafka.Kafka "$KAFKA_PROPS" \
    >>"$LOG/kafka/kafka.out" 2>&1 </dev/null &
  echo $! >"$KAFKA_PID"
}

# kafka_api_versions: an ApiVersions + Metadata round trip through the advertised listener.
kafka_api_versions() {
  local out
  out="$(KAFKA_TOOL_TIMEOUT=30 kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand \
    --bootstrap-server "localhost:$KAFKA_PORT" 2>/dev/null)" || return 1
  grep -q "(id: 1 " <<<"$out"
}

wait_kafka() {
  local log="$LOG/kafka/server.log"
  [ -f "$log" ] || log="$LOG/kafka/kafka.out"
  wait_until kafka 90 "$log" "$KAFKA_PID" "$KAFKA_PROPS" port_open "$KAFKA_PORT"
  # the port answering is not enough: ask the broker for its API versions and metadata
  wait_until kafka 90 "$LOG/kafka/server.log" "$KAFKA_PID" "$KAFKA_PROPS" kafka_api_versions
}

stop_kafka() { stop_pid kafka "$KAFKA_PID" "$KAFKA_PROPS" 60; }

# ---------------------------------------------------------------------------
# FerretDB (MongoDB wire protocol, SQLite backend)

FERRET_PID="$FERRET_DIR/ferretdb.pid"

ferret_running() { pid_is "$(read_pid "$FERRET_PID")" "$FERRET_BIN"; }

start_ferretdb() {
  if ferret_running; then
    info "ferretdb: already running (pid $(read_pid "$FERRET_PID"))"
    return
  fi
  check_port ferretdb "$MONGO_PORT"
  [ -x "$FERRET_BIN" ] || die "FerretDB binary missing ($FERRET_BIN); run: bash scripts/stack.sh deps"
  mkdir -p "$FERRET_DIR/data"
  rm -f "$FERRET_PID"
  say "ferretdb: starting on 127.0.0.1:$MONGO_PORT (SQLite in $FERRET_DIR/data)"
  setsid nohup "$FERRET_BIN" -listen "127.0.0.1:$MONGO_PORT" -data-dir "$FERRET_DIR/data" \
    >>"$LOG/ferretdb.log" 2>&1 </dev/null &
  echo $! >"$FERRET_PID"
  wait_until ferretdb 30 "$LOG/ferretdb.log" "$FERRET_PID" "$FERRET_BIN" port_open "$MONGO_PORT"
}

stop_ferretdb() { stop_pid ferretdb "$FERRET_PID" "$FERRET_BIN" 15; }

# ---------------------------------------------------------------------------
# deps

pkg_installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }

java_major() {
  command -v java >/dev/null || { echo 0; return; }
  java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n1
}

deps_apt() {
  command -v apt-get >/dev/null || die "apt-get not found: deps supports Debian/Ubuntu only"
  local sudo=() pgv="" need=() p
  if ! is_root; then
    command -v sudo >/dev/null || die "not root and no sudo: cannot install packages"
    sudo=(sudo)
  fi
  if [ -x /usr/lib/postgresql/15/bin/postgres ] || pkg_installed postgresql-15; then
    pgv=15
  else
    for p in $(pg_majors); do
      [ "$p" -ge 15 ] && pkg_installed "postgresql-$p" && pgv=$p
    done
  fi
  if [ -n "$pgv" ]; then
    for p in "postgresql-$pgv" "postgresql-$pgv-wal2json"; do pkg_installed "$p" || need+=("$p"); done
  fi
  for p in rabbitmq-server redis-server pgbouncer; do pkg_installed "$p" || need+=("$p"); done
  local jv
  jv="$(java_major)"
  command -v mvn >/dev/null || need+=(maven)
  if [ -n "$pgv" ] && [ "${#need[@]}" -eq 0 ] && [ "${jv:-0}" -ge 17 ]; then
    info "apt: all packages already installed (PostgreSQL $pgv, wal2json, RabbitMQ, Redis, pgbouncer, Java $jv, Maven)"
    return
  fi
  say "apt-get update"
  "${sudo[@]}" apt-get update -qq
  if [ -z "$pgv" ]; then
    if apt-cache show postgresql-15 >/dev/null 2>&1; then
      pgv=15
    else
      pgv="$(apt-cache pkgnames postgresql- | grep -E '^postgresql-[0-9]+$' | sed 's/postgresql-//' | sort -n | tail -n1)"
      if [ -z "$pgv" ] || [ "$pgv" -lt 15 ]; then die "no postgresql-NN (>= 15) package available from apt"; fi
      warn "postgresql-15 is not available here; using PostgreSQL $pgv"
    fi
    need+=("postgresql-$pgv" "postgresql-$pgv-wal2json")
  fi
  if [ "${jv:-0}" -lt 17 ]; then
    if apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then need+=(openjdk-17-jre-headless); else need+=(default-jre-headless); fi
  fi
  say "apt-get install ${need[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >"$LOG/apt.log" 2>&1 ||
    fail_with_log "apt-get install failed" "$LOG/apt.log"
  info "note: on a host with systemd the distro services may now be running on the default ports;"
  info "      stop them (sudo systemctl disable --now postgresql rabbitmq-server redis-server pgbouncer) before 'up'"
}

deps_kafka() {
  local pom="$SCRIPTS/kafka/pom.xml" sum tmp
  sum="$(sha256sum "$pom" | cut -d' ' -f1)"
  if [ -f "$KAFKA_LIBS/.complete" ] && [ "$(cat "$KAFKA_LIBS/.complete")" = "$sum" ]; then
    info "kafka: jars already in $KAFKA_LIBS"
    return
  fi
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
  [ "$(java_major)" -ge 17 ] || die "Kafka 4 needs Java >= 17 (found $(java_major))"
  say "kafka: fetching jars from Maven Central (scripts/kafka/pom.xml)"
  tmp="$KAFKA_DIR/libs.tmp"
  rm -rf "$tmp"
  mkdir -p "$KAFKA_DIR"
  mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$tmp" >"$LOG/kafka-mvn.log" 2>&1 ||
    fail_with_log "mvn dependency:copy-dependencies failed" "$LOG/kafka-mvn.log"
  ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "no kafka_2.13 jar in $tmp"
  rm -rf "$KAFKA_LIBS"
  mv "$tmp" "$KAFKA_LIBS"
  printf '%s\n' "$sum" >"$KAFKA_LIBS/.complete"
  local jars=("$KAFKA_LIBS"/*.jar)
  info "kafka: ${#jars[@]} jars in $KAFKA_LIBS"
}

deps_ferretdb() {
  local src="$SCRIPTS/ferretdb" f stale=0
  if [ -x "$FERRET_BIN" ]; then
    for f in "$src"/*.go "$src/go.mod" "$src/go.sum"; do
      [ "$f" -nt "$FERRET_BIN" ] && stale=1
    done
    if [ "$stale" = 0 ]; then
      info "ferretdb: $FERRET_BIN is up to date"
      return
    fi
  fi
  command -v go >/dev/null || die "go not found: install Go >= 1.24 to build FerretDB (scripts/ferretdb)"
  say "ferretdb: building $FERRET_BIN (first build takes a minute or two)"
  mkdir -p "$STACK/bin"
  (cd "$src" && GOWORK=off go build -mod=readonly -trimpath -buildvcs=false -o "$FERRET_BIN" .) ||
    die "FerretDB build failed"
}

cmd_deps() {
  mkdir -p "$STACK" "$LOG"
  local t0=$SECONDS
  deps_apt
  deps_kafka
  deps_ferretdb
  say "deps done in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# up / down / status

# name port check-function: check prints nothing, returns 0 when ours and running
SERVERS=(
  "postgres:PG_PORT:pg_running"
  "pgbouncer:PGBOUNCER_PORT:pgb_running"
  "rabbitmq:RABBITMQ_PORT:rmq_running"
  "rabbitmq-mgmt:RABBITMQ_MGMT_PORT:rmq_running"
  "redis:REDIS_PORT:redis_running"
  "kafka:KAFKA_PORT:kafka_running"
  "kafka-controller:KAFKA_CONTROLLER_PORT:kafka_running"
  "ferretdb:MONGO_PORT:ferret_running"
)

print_table() {
  local row name portvar check port state not_up=0
  printf '%-17s %-6s %s\n' SERVER PORT STATUS
  for row in "${SERVERS[@]}"; do
    IFS=: read -r name portvar check <<<"$row"
    port="${!portvar}"
    if $check 2>/dev/null; then
      if port_open "$port"; then state=up; else state="starting (process up, port closed)"; not_up=1; fi
    elif port_open "$port"; then
      state="port in use by another process ($(port_holder "$port"))"
      not_up=1
    else
      state=down
      not_up=1
    fi
    printf '%-17s %-6s %s\n' "$name" "$port" "$state"
  done
  # KurrentDB has no Debian/Maven/PyPI/npm package: docker compose only; not counted here
  if port_open "$KURRENTDB_PORT"; then state="up (not managed by this script)"; else state="not run natively (docker compose only)"; fi
  printf '%-17s %-6s %s\n' kurrentdb "$KURRENTDB_PORT" "$state"
  return "$not_up"
}

print_urls() {
  cat <<EOF
DATABASE_URL=postgres://postgres:$PG_PASSWORD@localhost:$PG_PORT/$PG_DB?sslmode=disable
PGBOUNCER_URL=postgres://postgres:$PG_PASSWORD@localhost:$PGBOUNCER_PORT/$PG_DB?sslmode=disable
AMQP_URL=amqp://guest:guest@localhost:$RABBITMQ_PORT/
RABBITMQ_MANAGEMENT_URL=http://guest:guest@localhost:$RABBITMQ_MGMT_PORT/
KAFKA_BROKERS=localhost:$KAFKA_PORT
MONGO_URL=mongodb://localhost:$MONGO_PORT/
REDIS_URL=redis://localhost:$REDIS_PORT/0
EOF
}

preflight() {
  local missing=()
  pg_bindir >/dev/null
  command -v pgbouncer >/dev/null || missing+=(pgbouncer)
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v rabbitmqctl >/dev/null || [ -x /usr/lib/rabbitmq/bin/rabbitmqctl ] || missing+=(rabbitmq-server)
  command -v java >/dev/null || missing+=(java)
  [ -f "$KAFKA_LIBS/.complete" ] || missing+=("kafka jars")
  [ -x "$FERRET_BIN" ] || missing+=(ferretdb)
  [ "${#missing[@]}" -eq 0 ] || die "missing: ${missing[*]}; run: bash scripts/stack.sh deps"
  if is_root; then
    as_user "$PG_USER" test -x "$STACK" ||
      die "user $PG_USER cannot reach $STACK: make every parent directory searchable (chmod o+x) or set STACK_DIR"
  fi
}

# preflight_ports: before starting anything, every port of a server that is not already
# ours and running must be free.
preflight_ports() {
  local row name portvar check port conflicts=()
  for row in "${SERVERS[@]}"; do
    IFS=: read -r name portvar check <<<"$row"
    port="${!portvar}"
    if ! $check 2>/dev/null && port_open "$port"; then
      conflicts+=("  $name: port $port is in use by $(port_holder "$port")")
    fi
  done
  [ "${#conflicts[@]}" -eq 0 ] && return 0
  printf 'error: ports needed by the native stack are taken by processes that are not this stack'"'"'s:\n' >&2
  printf '%s\n' "${conflicts[@]}" >&2
  printf '%s\n' "Stop those servers (distro services: e.g. 'sudo systemctl disable --now postgresql pgbouncer" \
    "rabbitmq-server redis-server') or free the ports, then retry. Nothing was started." >&2
  exit 1
}

cmd_up() {
  if docker_ok; then
    say "a Docker engine answers: the stack runs with 'docker compose up -d --wait' (STACK_NATIVE=1 forces the native stack)"
    cd "$ROOT" && exec docker compose up -d --wait
  fi
  local t0=$SECONDS
  mkdir -p "$STACK" "$LOG" "$STACK/run"
  preflight
  # servers inherit this: pgbouncer (max_client_conn 1000) and redis want more than 1024 fds
  local hard
  hard="$(ulimit -Hn)"
  if [ "$hard" = unlimited ] || [ "$hard" -gt 65536 ]; then hard=65536; fi
  ulimit -Sn "$hard" 2>/dev/null || true
  preflight_ports
  start_postgres
  start_pgbouncer
  start_redis
  # the two slow starters boot in parallel
  start_kafka
  start_rabbitmq
  start_ferretdb
  wait_kafka
  wait_rabbitmq
  say "stack up in $((SECONDS - t0))s (logs in $LOG)"
  print_table || die "some servers are not up"
  echo
  print_urls
}

cmd_down() {
  if docker_ok; then
    say "a Docker engine answers: 'docker compose down' (STACK_NATIVE=1 forces the native stack)"
    (cd "$ROOT" && docker compose down) || warn "docker compose down failed"
  fi
  [ -d "$STACK" ] || { info "nothing to stop ($STACK does not exist)"; return; }
  stop_ferretdb
  stop_kafka
  stop_rabbitmq
  stop_redis
  stop_pgbouncer
  stop_postgres
  say "stack down"
}

cmd_status() {
  if docker_ok; then
    say "a Docker engine answers: docker compose ps"
    (cd "$ROOT" && docker compose ps) || true
    echo
    say "native stack:"
  fi
  if print_table; then return 0; else return 3; fi
}

usage() {
  sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

main() {
  [ $# -ge 1 ] || usage
  local sub=$1; shift
  STACK_CMD=$sub
  case "$sub" in
    deps) cmd_deps ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    urls | env) print_urls ;;
    kafka-tool) kafka_tool "$@" ;;
    rabbitmqctl) rmq rabbitmqctl -n "$RMQ_NODE" "$@" ;;
    -h | --help | help) usage ;;
    *) printf 'unknown command: %s\n' "$sub" >&2; usage ;;
  esac
}

main "$@"
