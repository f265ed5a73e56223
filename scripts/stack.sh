#!/usr/bin/env bash
# Native dev stack: real servers on this machine, no Docker needed.
#
#   bash scripts/stack.sh deps     install/fetch/build what the stack needs (idempotent)
#   bash scripts/stack.sh up       start everything (or `docker compose up -d --wait` if a Docker engine answers)
#   bash scripts/stack.sh down     stop everything this script started (safe to run twice)
#   bash scripts/stack.sh status   one line per server; exit 0 when all are up, 3 otherwise
#   bash scripts/stack.sh env      print the connection URLs as shell exports (alias: urls;
#                                  `env keep` keeps values already set)
#   bash scripts/stack.sh kafka-tool CLASS [ARGS...]
#                                  run a Kafka CLI class from the stack's jars, e.g.
#                                  org.apache.kafka.tools.TopicCommand --bootstrap-server localhost:9092 --list
#   bash scripts/stack.sh kafka-cluster-id [N]
#                                  print N (default 1) new Kafka cluster ids, as `up` formats with
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
  # shellcheck disable=SC2016 # the backquotes are literal
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
# The Erlang distribution port of the node (RabbitMQ's default: AMQP port + 20000), bound
# to 127.0.0.1 like epmd (4369): see rmq() and rmq_prepare.
RMQ_DIST_PORT=$((RABBITMQ_PORT + 20000))
KAFKA_DIR="$STACK/kafka"
KAFKA_LIBS="$KAFKA_DIR/libs"
FERRET_DIR="$STACK/ferretdb"
FERRET_BIN="$STACK/bin/ferretdb"

# ---------------------------------------------------------------------------
# helpers

# say, info, warn, die, fail_with_log; kafka_cluster_id, kafka_java_tool, kafka_broker_cmd
# shellcheck source=lib/messages.sh
source "$ROOT/scripts/lib/messages.sh"
# shellcheck source=lib/kafka.sh
source "$ROOT/scripts/lib/kafka.sh"

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
# The servers: one row each, in start order; down stops them in reverse order. A server runs
# (and is ours) when the pid in PIDFILE is alive with MATCH in its command line or environment.
# PORTS are ports.env variables (LABEL=VAR shows as name-LABEL); LOGS (under $LOG) are shown
# when it fails. up checks every port first, then for each server that does not run: PREPARE
# (config, initdb, storage format; - for none), START (daemonises or backgrounds it, leaving
# its pid in PIDFILE); once all are launched, so that the slow ones boot in parallel, it polls
# each READY check for READY_S seconds and runs SETUP. down runs STOP (- for SIGTERM), waits
# STOP_S seconds, then sends SIGTERM, and SIGKILL as the last resort.
S_NAME=() S_PORTS=() S_PIDFILE=() S_MATCH=() S_LOGS=() S_PREPARE=() S_START=() S_READY=()
S_READY_S=() S_SETUP=() S_STOP=() S_STOP_S=()
server() {
  S_NAME+=("$1") S_PORTS+=("$2") S_PIDFILE+=("$3") S_MATCH+=("$4") S_LOGS+=("$5") S_PREPARE+=("$6")
  S_START+=("$7") S_READY+=("$8") S_READY_S+=("$9") S_SETUP+=("${10}") S_STOP+=("${11}") S_STOP_S+=("${12}")
}

PGB_PID="$PGB_DIR/pgbouncer.pid"
REDIS_PID="$REDIS_DIR/redis.pid"
RMQ_PID="$RMQ_DIR/rabbitmq.pid"
KAFKA_PID="$KAFKA_DIR/kafka.pid"
KAFKA_PROPS="$KAFKA_DIR/server.properties"
FERRET_PID="$FERRET_DIR/ferretdb.pid"

#      NAME      PORTS                                         PIDFILE                  MATCH
#        LOGS                                                 PREPARE       START        READY       READY_S SETUP    STOP       STOP_S
server postgres  PG_PORT                                       "$PGDATA/postmaster.pid" "$PGDATA" \
         "postgres.log"                                       pg_prepare    pg_start     pg_ping     30      pg_setup pg_stop    60
server pgbouncer PGBOUNCER_PORT                                "$PGB_PID"               "$PGB_DIR/pgbouncer.ini" \
         "pgbouncer.log"                                      pgb_prepare   pgb_start    pgb_ping    15      -        -          15
server redis     REDIS_PORT                                    "$REDIS_PID"             redis-server \
         "redis.log"                                          -             redis_start  redis_ping  15      -        redis_stop 10
server rabbitmq  "RABBITMQ_PORT mgmt=RABBITMQ_MGMT_PORT"       "$RMQ_PID"               "RABBITMQ_PID_FILE=$RMQ_PID" \
         "rabbitmq/$RMQ_NODE.log rabbitmq-wait.log rabbitmq-start.log" \
                                                              rmq_prepare   rmq_start    rmq_ready   120     -        rmq_stop   30
server kafka     "KAFKA_PORT controller=KAFKA_CONTROLLER_PORT" "$KAFKA_PID"             "$KAFKA_PROPS" \
         "kafka/server.log kafka/kafka.out"                   kafka_prepare kafka_start  kafka_ready 120     -        -          60
server ferretdb  MONGO_PORT                                    "$FERRET_PID"            "$FERRET_BIN" \
         "ferretdb.log"                                       -             ferret_start ferret_ping 30      -        -          15

server_running() { pid_is "$(read_pid "${S_PIDFILE[$1]}")" "${S_MATCH[$1]}"; }

# server_ports I: one line "LABEL PORT" for each port of server I.
server_ports() {
  local var label
  for var in ${S_PORTS[$1]}; do
    label=${S_NAME[$1]}
    if [[ $var == *=* ]]; then label+="-${var%%=*}" var=${var#*=}; fi
    printf '%s %s\n' "$label" "${!var}"
  done
}

# fail_server I MESSAGE: die, showing the end of server I's logs.
fail_server() {
  local log logs=()
  for log in ${S_LOGS[$1]}; do logs+=("$LOG/$log"); done
  fail_with_log "${S_NAME[$1]} $2" "${logs[@]}"
}

start_server() {
  local i=$1 label port
  if server_running "$i"; then
    info "${S_NAME[i]}: already running (pid $(read_pid "${S_PIDFILE[i]}"))"
    return
  fi
  while read -r label port; do check_port "$label" "$port"; done < <(server_ports "$i")
  rm -f "${S_PIDFILE[i]}"
  [ "${S_PREPARE[i]}" = - ] || "${S_PREPARE[i]}"
  "${S_START[i]}" || fail_server "$i" "failed to start"
}

ready_server() {
  local i=$1 deadline=$((SECONDS + S_READY_S[$1]))
  until "${S_READY[i]}" >/dev/null 2>&1; do
    # a daemon writes its pid file a moment after its launcher returns: no file yet is no death
    if [ -s "${S_PIDFILE[i]}" ] && ! server_running "$i"; then fail_server "$i" "exited while starting"; fi
    [ "$SECONDS" -lt "$deadline" ] || fail_server "$i" "did not answer within ${S_READY_S[i]}s"
    sleep 0.3
  done
  [ "${S_SETUP[i]}" = - ] || "${S_SETUP[i]}"
}

stop_server() {
  local i=$1 name=${S_NAME[$1]} pid
  pid="$(read_pid "${S_PIDFILE[i]}")"
  server_running "$i" || { info "$name: not running"; return; }
  say "stopping $name (pid $pid)"
  if [ "${S_STOP[i]}" = - ]; then kill -TERM "$pid" 2>/dev/null || true; else "${S_STOP[i]}" >/dev/null 2>&1 || true; fi
  if ! wait_pid_gone "$pid" "${S_STOP_S[i]}"; then
    warn "$name did not stop within ${S_STOP_S[i]}s; sending SIGTERM, then SIGKILL after 10s"
    kill -TERM "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null || true
    wait_pid_gone "$pid" 5 || die "$name (pid $pid) would not die"
  fi
  rm -f "${S_PIDFILE[i]}"
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
# The planner's cost of a random page read, for data on SSD or in RAM (the
# default 4 assumes spinning disks). With 4, a batch statement's
# "id = ANY(\$1)" on a queue's records table that a fresh start (TRUNCATE,
# a new deploy) left without statistics scans the whole table until
# autovacuum's first ANALYZE, and the scan grows with the backlog (the
# suspected cause of the rabbitmq side's collapse at twice its sustainable
# rate in issue 21's runs; docs/queue.md, Tuning).
random_page_cost = 1.1
# A frozen or network-hung client must not keep a backend blocked in a send
# (a walsender that a CHECKPOINT invalidating its slot waits for held every
# checkpoint for 12+ minutes; wal_sender_timeout does not end a blocked
# send): data unacknowledged for 10 s, a zero window included, aborts the
# connection (tcp_user_timeout, Linux), and keepalives find a silent peer
# gone within 10 + 3 x 5 s. loadtests/experiments checks these lines
# (TestStackTCPSettings) and uses them in slot-wal-retention.
tcp_user_timeout = 10000
tcp_keepalives_idle = 10
tcp_keepalives_interval = 5
tcp_keepalives_count = 3
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

pg_prepare() {
  local bin
  bin="$(pg_bindir)"
  [ -s "$PGDATA/PG_VERSION" ] || pg_init "$bin"
  [ -f "$bin/../lib/wal2json.so" ] || [ -f "$("$bin/pg_config" --pkglibdir 2>/dev/null)/wal2json.so" ] ||
    warn "wal2json not found for $bin; run: bash scripts/stack.sh deps"
  pg_write_conf "$bin"
  touch "$LOG/postgres.log" && own "$PG_USER" "$LOG/postgres.log"
}

pg_start() {
  local bin
  bin="$(pg_bindir)"
  say "postgres: starting on 127.0.0.1:$PG_PORT ($(basename "$(dirname "$bin")"))"
  as_user "$PG_USER" "$bin/pg_ctl" -D "$PGDATA" -l "$LOG/postgres.log" -w -t 60 start >/dev/null
}

pg_ping() { pg_psql -d postgres -c 'SELECT 1'; }

# pg_setup: the server runs with the current stack.conf (reloadable settings apply now, the
# others at the next restart) and the stack's database exists.
pg_setup() {
  pg_write_conf "$(pg_bindir)"
  pg_psql -d postgres -tAc 'SELECT pg_reload_conf()' >/dev/null || true
  pg_psql -d postgres -c "ALTER ROLE postgres PASSWORD '$PG_PASSWORD'" >/dev/null
  if [ "$(pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
    info "postgres: creating database $PG_DB"
    pg_psql -d postgres -c "CREATE DATABASE $PG_DB" >/dev/null
  fi
}

# fast shutdown: SIGTERM would wait for every client to disconnect
pg_stop() { as_user "$PG_USER" "$(pg_bindir)/pg_ctl" -D "$PGDATA" stop -m fast -w -t 60; }

# ---------------------------------------------------------------------------
# pgbouncer (transaction pooling in front of the stack's PostgreSQL)

pgb_prepare() {
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
}

pgb_start() {
  say "pgbouncer: starting on 127.0.0.1:$PGBOUNCER_PORT (transaction pooling -> :$PG_PORT)"
  # runuser's PAM session resets the fd limit to 1024: raise it again for max_client_conn
  # shellcheck disable=SC2016
  as_user "$PG_USER" bash -c 'h="$(ulimit -Hn)"; if [ "$h" = unlimited ] || [ "$h" -gt 65536 ]; then h=65536; fi
      ulimit -Sn "$h" 2>/dev/null; exec pgbouncer -d -q "$1"' _ "$PGB_DIR/pgbouncer.ini"
}

pgb_ping() { "$(pg_bindir)/psql" -X -q -h 127.0.0.1 -p "$PGBOUNCER_PORT" -U postgres -d "$PG_DB" -c 'SELECT 1'; }

# ---------------------------------------------------------------------------
# Redis

redis_start() {
  mkdir -p "$REDIS_DIR"
  say "redis: starting on 127.0.0.1:$REDIS_PORT"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save '' --appendonly no \
    --dir "$REDIS_DIR" --pidfile "$REDIS_PID" --logfile "$LOG/redis.log"
}

redis_ping() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

redis_stop() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave; }

# ---------------------------------------------------------------------------
# RabbitMQ (+ management plugin)

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
# (killed after $RMQ_TIMEOUT seconds when that is set). Everything the node and its CLI
# listen on is on 127.0.0.1: AMQP (RABBITMQ_NODE_IP_ADDRESS), management (rabbitmq.conf),
# epmd, which the first Erlang node to start launches (ERL_EPMD_ADDRESS; an epmd already
# running keeps its addresses), and the Erlang distribution listeners of the node
# (RABBITMQ_DIST_PORT, inet_dist_use_interface in advanced.config) and of the CLI tools
# (RABBITMQ_CTL_ERL_ARGS; ports 35672-35682). Anyone who reaches epmd and the
# distribution port and knows the cookie can run code on the node.
rmq() {
  local tool=$1; shift
  local cmd=(env \
    HOME="$(rmq_home)" \
    ERL_EPMD_ADDRESS=127.0.0.1 \
    RABBITMQ_NODENAME="$RMQ_NODE" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$RABBITMQ_PORT" \
    RABBITMQ_DIST_PORT="$RMQ_DIST_PORT" \
    RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
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

rmq_prepare() {
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
  # The distribution listener on 127.0.0.1 only (rabbitmq.conf has no key for it).
  printf '[{kernel, [{inet_dist_use_interface, {127,0,0,1}}]}].\n' >"$RMQ_DIR/advanced.config"
  own "$RMQ_USER" "$RMQ_DIR" "$RMQ_DIR/mnesia" "$LOG/rabbitmq" "$RMQ_DIR"/rabbitmq-env.conf \
    "$RMQ_DIR/rabbitmq.conf" "$RMQ_DIR/enabled_plugins" "$RMQ_DIR/advanced.config"
  : >"$LOG/rabbitmq-wait.log"
}

rmq_start() {
  say "rabbitmq: starting on 127.0.0.1:$RABBITMQ_PORT (management :$RABBITMQ_MGMT_PORT, distribution :$RMQ_DIST_PORT)"
  # An epmd started earlier without ERL_EPMD_ADDRESS (by another Erlang program, or by an
  # older stack.sh) is reused as it is, on every address: say so rather than hide it.
  if command -v ss >/dev/null && ss -Hltn 'sport = :4369' 2>/dev/null | awk '{print $4}' | grep -qvE '^(127\.0\.0\.1|\[::1\]|\[::ffff:127\.0\.0\.1\]):4369$'; then
    warn "epmd (:4369) already listens on a non-loopback address; stop it ('epmd -kill' once no Erlang node uses it) so the node's own epmd binds 127.0.0.1"
  fi
  rmq rabbitmq-server -detached >"$LOG/rabbitmq-start.log" 2>&1
}

# rmq_ready: `rabbitmqctl wait` blocks until the pid file appears and the broker app runs
# (`await_startup` fails straight after -detached); then the management listener.
rmq_ready() {
  RMQ_TIMEOUT=100 rmq rabbitmqctl -n "$RMQ_NODE" wait --timeout 90 "$RMQ_PID" >"$LOG/rabbitmq-wait.log" 2>&1 &&
    port_open "$RABBITMQ_MGMT_PORT"
}

# `stop PIDFILE` waits for the OS process to exit; it can hang forever when the CLI cannot
# reach the node (e.g. Erlang cookie mismatch), hence the timeout (then SIGTERM, SIGKILL).
rmq_stop() { RMQ_TIMEOUT=45 rmq rabbitmqctl -n "$RMQ_NODE" stop "$RMQ_PID"; }

# epmd_stop: rabbitmqctl stop leaves the Erlang port mapper (epmd, :4369) behind; `epmd -kill`
# only stops it when no other Erlang node is registered with it.
epmd_stop() {
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

# kafka_tool CLASS ARGS...: run a Kafka CLI class from the stack's jars.
kafka_tool() {
  [ -d "$KAFKA_LIBS" ] || die "Kafka jars missing ($KAFKA_LIBS); run: bash scripts/stack.sh deps"
  kafka_java_tool "$@"
}

# kafka_prepare: write server.properties; format the storage before the very first start.
kafka_prepare() {
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
# The broker's retention sweep runs every 30 s instead of every 5 min, so that
# make results' cleanup scenario (loadtests/eventstore/cleanup.go) measures
# when the space comes back without waiting up to 5 min for the sweep.
log.retention.check.interval.ms=30000
EOF
  if [ ! -f "$KAFKA_DIR/data/meta.properties" ]; then
    local cluster_id
    cluster_id="$(kafka_cluster_id)"
    say "kafka: formatting storage (cluster id $cluster_id)"
    kafka_tool kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_PROPS" >"$LOG/kafka-format.log" 2>&1 ||
      fail_with_log "kafka storage format failed" "$LOG/kafka-format.log"
  fi
}

kafka_start() {
  say "kafka: starting on localhost:$KAFKA_PORT (controller :$KAFKA_CONTROLLER_PORT)"
  kafka_broker_cmd "${KAFKA_HEAP_OPTS:--Xms512m -Xmx512m}" "$LOG/kafka" "$KAFKA_PROPS"
  setsid nohup "${KAFKA_CMD[@]}" >>"$LOG/kafka/kafka.out" 2>&1 </dev/null &
  echo $! >"$KAFKA_PID"
}

# kafka_ready: the port answering is not enough: an ApiVersions + Metadata round trip
# through the advertised listener.
kafka_ready() {
  local out
  port_open "$KAFKA_PORT" || return 1
  out="$(KAFKA_TOOL_TIMEOUT=30 kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand \
    --bootstrap-server "localhost:$KAFKA_PORT" 2>/dev/null)" || return 1
  grep -q "(id: 1 " <<<"$out"
}

# ---------------------------------------------------------------------------
# FerretDB (MongoDB wire protocol, SQLite backend)

ferret_start() {
  mkdir -p "$FERRET_DIR/data"
  say "ferretdb: starting on 127.0.0.1:$MONGO_PORT (SQLite in $FERRET_DIR/data)"
  setsid nohup "$FERRET_BIN" -listen "127.0.0.1:$MONGO_PORT" -data-dir "$FERRET_DIR/data" \
    >>"$LOG/ferretdb.log" 2>&1 </dev/null &
  echo $! >"$FERRET_PID"
}

ferret_ping() { port_open "$MONGO_PORT"; }

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
  # curl and jq: the README's transcripts use them, and scripts/transcripts runs those in make test
  for p in rabbitmq-server redis-server pgbouncer curl jq; do pkg_installed "$p" || need+=("$p"); done
  local jv
  jv="$(java_major)"
  command -v mvn >/dev/null || need+=(maven)
  # make fuzz installs Schemathesis into a venv: Debian's python3 needs
  # python3-venv (ensurepip) for that.
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
  # The loadtests/report charts test renders every chart to PNG with
  # librsvg's rsvg-convert.
  command -v rsvg-convert >/dev/null || need+=(librsvg2-bin)
  if [ -n "$pgv" ] && [ "${#need[@]}" -eq 0 ] && [ "${jv:-0}" -ge 17 ]; then
    info "apt: all packages already installed (PostgreSQL $pgv, wal2json, RabbitMQ, Redis, pgbouncer, curl, jq, Java $jv, Maven, python3-venv, librsvg2-bin)"
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

print_table() {
  local i label port state not_up=0
  printf '%-17s %-6s %s\n' SERVER PORT STATUS
  for i in "${!S_NAME[@]}"; do
    while read -r label port; do
      if server_running "$i" 2>/dev/null; then
        if port_open "$port"; then state=up; else state="starting (process up, port closed)"; not_up=1; fi
      elif port_open "$port"; then
        state="port in use by another process ($(port_holder "$port"))"
        not_up=1
      else
        state=down
        not_up=1
      fi
      printf '%-17s %-6s %s\n' "$label" "$port" "$state"
    done < <(server_ports "$i")
  done
  # KurrentDB has no Debian/Maven/PyPI/npm package: docker compose only; not counted here
  if port_open "$KURRENTDB_PORT"; then state="up (not managed by this script)"; else state="not run natively (docker compose only)"; fi
  printf '%-17s %-6s %s\n' kurrentdb "$KURRENTDB_PORT" "$state"
  return "$not_up"
}

# print_urls prints the stack's connection URLs as shell exports, under the names the
# services and tests read (services/kit/pairs.Backends; scripts/stackcheck's
# TestEnvMatchesServices checks both ways), for: eval "$(make -s env)". With "keep", each
# line keeps a value already set in the environment (make run-<service> uses that, so
# `DATABASE_URL=... make run-no-kafka` wins).
print_urls() {
  local keep=${1:-} name value
  printf '# the stack'"'"'s connection URLs, as the services and tests read them; load with: eval "$(make -s env)"\n'
  while read -r name value; do
    if [ "$keep" = keep ]; then
      printf 'export %s="${%s:-%s}"\n' "$name" "$name" "$value"
    else
      printf "export %s='%s'\n" "$name" "$value"
    fi
  done <<EOF
DATABASE_URL postgres://postgres:$PG_PASSWORD@localhost:$PG_PORT/$PG_DB?sslmode=disable
PGBOUNCER_URL postgres://postgres:$PG_PASSWORD@localhost:$PGBOUNCER_PORT/$PG_DB?sslmode=disable&default_query_exec_mode=exec
RABBITMQ_URL amqp://guest:guest@localhost:$RABBITMQ_PORT/
RABBITMQ_MANAGEMENT_URL http://guest:guest@localhost:$RABBITMQ_MGMT_PORT
KAFKA_BROKERS localhost:$KAFKA_PORT
MONGO_URL mongodb://localhost:$MONGO_PORT/
REDIS_URL redis://localhost:$REDIS_PORT/0
EOF
  # KURRENTDB_URL stays unset on purpose: KurrentDB runs under docker compose only, and
  # the kurrentdb tests run (and need the server) exactly when it is set.
  printf '# KURRENTDB_URL is not set: KurrentDB runs under docker compose only (then: export KURRENTDB_URL='"'"'kurrentdb://localhost:%s?tls=false'"'"')\n' "$KURRENTDB_PORT"
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
  local i label port conflicts=()
  for i in "${!S_NAME[@]}"; do
    ! server_running "$i" 2>/dev/null || continue
    while read -r label port; do
      if port_open "$port"; then conflicts+=("  $label: port $port is in use by $(port_holder "$port")"); fi
    done < <(server_ports "$i")
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
  local t0=$SECONDS i
  mkdir -p "$STACK" "$LOG" "$STACK/run"
  preflight
  # servers inherit this: pgbouncer (max_client_conn 1000) and redis want more than 1024 fds
  local hard
  hard="$(ulimit -Hn)"
  if [ "$hard" = unlimited ] || [ "$hard" -gt 65536 ]; then hard=65536; fi
  ulimit -Sn "$hard" 2>/dev/null || true
  preflight_ports
  for i in "${!S_NAME[@]}"; do start_server "$i"; done
  for i in "${!S_NAME[@]}"; do ready_server "$i"; done
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
  local i
  for ((i = ${#S_NAME[@]} - 1; i >= 0; i--)); do stop_server "$i"; done
  epmd_stop
  say "stack down"
}

cmd_status() {
  if docker_ok; then
    say "a Docker engine answers: docker compose ps"
    (cd "$ROOT" && docker compose ps) || true
    echo
    say "native stack:"
  fi
  # exit, not return: a failing function would trip the ERR trap's "failed" report
  print_table || exit 3
}

usage() {
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
    urls | env) print_urls "${1:-}" ;;
    kafka-tool) kafka_tool "$@" ;;
    kafka-cluster-id)
      local i
      for ((i = 0; i < ${1:-1}; i++)); do kafka_cluster_id; done
      ;;
    rabbitmqctl) rmq rabbitmqctl -n "$RMQ_NODE" "$@" ;;
    -h | --help | help) usage ;;
    *) printf 'unknown command: %s\n' "$sub" >&2; usage ;;
  esac
}

main "$@"
