# shellcheck shell=bash
# The cluster profile's Postgres under automatic failover (issue 40): pg_auto_failover 2.0
# (Debian's postgresql-15-auto-failover), a monitor in a namespace of its own (pgmon,
# 10.77.0.14) and a keeper on each of pg1, pg2 and pg3, the same nodes and addresses as the
# scripted formation, so that CLUSTER_DATABASE_URL is the same. One of the two formations
# runs at a time. Sourced by scripts/cluster.sh (its helpers, NODE_ADDR, PG_NODES, CL, LOG).
#
# The monitor probes every node (pgautofailover.health_check_period, 5 s; a node is unhealthy
# after health_check_max_retries failed probes and node_considered_unhealthy_timeout, 20 s,
# without a keeper report) and promotes the most advanced standby of the replication quorum; a
# primary that loses the monitor and its standbys demotes itself (network_partition_timeout,
# 20 s). The formation keeps its defaults: synchronous replication to ANY 1 of the two
# standbys (both in the replication quorum), so that an acknowledged commit is on a standby.
# docs/cluster.md, "Automatic failover".

AUTO_MONITOR=pgmon
AUTO_DIR="$CL/auto"
AUTO_RUNNING="$CL/running-auto"
# The formation's settings over pg_auto_failover's (postgresql-auto-failover.conf): no-kafka's
# logical slot, the scripted formation's memory budget and keepalives, and a WAL reserve that fits
# this machine (pg_auto_failover keeps 8 GB for a standby that comes back).
AUTO_CONF=cluster-auto.conf

auto_bin() {
  local b
  for b in "$PG15_BIN/pg_autoctl" /usr/bin/pg_autoctl; do
    [ ! -x "$b" ] || { printf '%s' "$b"; return 0; }
  done
  die "pg_autoctl not found (postgresql-15-auto-failover); run: make deps-cluster"
}

auto_home() { printf '%s/%s' "$AUTO_DIR" "$1"; }
auto_pgdata() { printf '%s/%s/data' "$AUTO_DIR" "$1"; }
auto_monitor_url() { printf 'postgres://autoctl_node@%s:%s/pg_auto_failover?sslmode=disable' "${NODE_ADDR[$AUTO_MONITOR]}" "$PG_PORT"; }

# auto_env NODE: the environment pg_autoctl runs with on NODE: its configuration and state under
# .stack/cluster/auto/NODE (never the postgres user's home), and the node's own socket
# directory. Every node listens on port 5432 of its own address, but Unix sockets are files that
# all namespaces share: pg_autoctl starts Postgres with -k PG_REGRESS_SOCK_DIR when it is set, and
# connects to it through PGHOST.
auto_env() {
  local h
  h="$(auto_home "$1")"
  AUTO_ENV=(XDG_CONFIG_HOME="$h/config" XDG_DATA_HOME="$h/share" XDG_RUNTIME_DIR="$h/run"
    PG_REGRESS_SOCK_DIR="$(sockdir "$1")" PGHOST="$(sockdir "$1")" PGPORT="$PG_PORT"
    PATH="$PG15_BIN:/usr/bin:/bin")
}

# auto_ctl NODE ARGS...: pg_autoctl ARGS as the postgres user in NODE's namespace.
auto_ctl() {
  local node=$1
  shift
  auto_env "$node"
  ip netns exec "$(ns_of "$node")" runuser -u "$PG_USER" -- env "${AUTO_ENV[@]}" "$(auto_bin)" "$@"
}

# auto_spawn NODE ARGS...: the same, detached (its own session), its output appended to
# .stack/cluster/log/auto-NODE.log.
auto_spawn() {
  local node=$1
  shift
  auto_env "$node"
  touch "$LOG/auto-$node.log"
  ip netns exec "$(ns_of "$node")" runuser -u "$PG_USER" -- env "${AUTO_ENV[@]}" \
    setsid -f "$(auto_bin)" "$@" >>"$LOG/auto-$node.log" 2>&1 </dev/null
}

# auto_pids NODE: what runs in NODE's namespace (only the keeper or monitor and its Postgres).
auto_pids() { ip netns pids "$(ns_of "$1")" 2>/dev/null | tr '\n' ' ' | sed 's/ *$//'; }

# auto_prepare NODE: the node's directories, owned by the postgres user.
auto_prepare() {
  local h
  h="$(auto_home "$1")"
  mkdir -p "$h/config" "$h/share" "$h/run" "$(sockdir "$1")" "$LOG"
  chmod 700 "$h/run"
  chown -R "$PG_USER": "$h" "$(sockdir "$1")"
}

# auto_initdb NODE: a new data directory for NODE (as the scripted formation's primary_init):
# trust on the private network (write_hba), for the clients, the keepers, the monitor's probes
# and replication alike; pg_autoctl leaves pg_hba.conf alone (--skip-pg-hba). A standby's is
# copied from its primary.
auto_initdb() {
  local d
  d="$(auto_pgdata "$1")"
  mkdir -p "$d"
  chown "$PG_USER": "$d"
  chmod 700 "$d"
  say "$1: initdb (PostgreSQL 15) into $d"
  as_pg "$PG15_BIN/initdb" -D "$d" -U postgres --auth=trust --encoding=UTF8 --no-locale \
    >"$LOG/auto-$1-initdb.log" 2>&1 || fail_with_log "initdb failed" "$LOG/auto-$1-initdb.log"
  write_hba "$d"
}

# auto_conf NODE: write cluster-auto.conf into the node's data directory and include it last in
# postgresql.conf, after pg_auto_failover's own file, so that its settings win.
auto_conf() {
  local d
  d="$(auto_pgdata "$1")"
  cat >"$d/$AUTO_CONF" <<EOF
# Written by scripts/cluster.sh at every start of the pg_auto_failover formation; edit the
# script, not this file. Read after postgresql-auto-failover.conf: these settings win.
cluster_name = '$1'
$(node_budget_conf)
# no-kafka's replication slot decodes with wal2json (pg_auto_failover sets replica)
wal_level = logical
# pg_auto_failover keeps 8 GB of WAL for a standby that comes back; this machine shares its disk
wal_keep_size = 1GB
max_slot_wal_keep_size = 1GB
tcp_user_timeout = 10000
tcp_keepalives_idle = 10
tcp_keepalives_interval = 5
tcp_keepalives_count = 3
EOF
  chown "$PG_USER": "$d/$AUTO_CONF"
  sed -i "/^include_if_exists '$AUTO_CONF'/d" "$d/postgresql.conf"
  printf "include_if_exists '%s'\n" "$AUTO_CONF" >>"$d/postgresql.conf"
}

# auto_sql SQL: a query on the monitor's database, over the network (trust on it); tab-separated
# rows.
auto_sql() {
  PGCONNECT_TIMEOUT=3 "$CLIENT_BIN/psql" -X -q -tA -F $'\t' -v ON_ERROR_STOP=1 -h "${NODE_ADDR[$AUTO_MONITOR]}" -p "$PG_PORT" \
    -U postgres -d pg_auto_failover -c "$1"
}

# auto_states: each data node, its reported and its assigned state, as the monitor sees them.
auto_states() { auto_sql "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodename"; }

# auto_whole: one primary and two secondaries, each in the state the monitor assigned.
auto_whole() {
  local s
  s="$(auto_states 2>/dev/null)" || return 1
  [ "$(grep -c $'\tprimary\tprimary$' <<<"$s")" = 1 ] && [ "$(grep -c $'\tsecondary\tsecondary$' <<<"$s")" = 2 ]
}

# auto_primary: the node the monitor has as primary (empty when none).
auto_primary() { auto_states 2>/dev/null | awk -F'\t' '$2 == "primary" && $3 == "primary" { print $1 }'; }

# auto_wait_whole SECONDS: wait until auto_whole, at most SECONDS.
auto_wait_whole() {
  local i
  for ((i = 0; i < $1 * 2; i++)); do
    ! auto_whole || return 0
    sleep 0.5
  done
  return 1
}

# auto_start_monitor: create the monitor on first use (its own initdb, socket directory and
# trust for the private network), then run it.
auto_start_monitor() {
  local d i
  d="$(auto_pgdata "$AUTO_MONITOR")"
  auto_prepare "$AUTO_MONITOR"
  if [ -n "$(auto_pids "$AUTO_MONITOR")" ]; then
    info "$AUTO_MONITOR: already running"
  elif [ -f "$d/PG_VERSION" ] && [ -n "$(find "$(auto_home "$AUTO_MONITOR")/config" -name pg_autoctl.cfg 2>/dev/null)" ]; then
    say "$AUTO_MONITOR: starting the pg_auto_failover monitor on ${NODE_ADDR[$AUTO_MONITOR]}:$PG_PORT"
    auto_spawn "$AUTO_MONITOR" run --pgdata "$d"
  else
    # a data directory without pg_autoctl's configuration is a create that failed: start over
    rm -rf "$d"
    auto_initdb "$AUTO_MONITOR"
    say "$AUTO_MONITOR: creating the pg_auto_failover monitor on ${NODE_ADDR[$AUTO_MONITOR]}:$PG_PORT"
    auto_spawn "$AUTO_MONITOR" create monitor --pgctl "$PG15_BIN/pg_ctl" --pgdata "$d" --pgport "$PG_PORT" \
      --hostname "${NODE_ADDR[$AUTO_MONITOR]}" --skip-pg-hba --no-ssl --run
  fi
  for ((i = 0; i < 240; i++)); do
    ! auto_sql "SELECT 1 FROM pgautofailover.formation LIMIT 1" >/dev/null 2>&1 || return 0
    # the monitor's pg_autoctl exited (a refused option, a bad data directory): no use waiting
    [ "$i" -lt 10 ] || [ -n "$(auto_pids "$AUTO_MONITOR")" ] ||
      fail_with_log "the pg_auto_failover monitor exited" "$LOG/auto-$AUTO_MONITOR.log"
    sleep 0.5
  done
  fail_with_log "the pg_auto_failover monitor did not answer within 2 minutes" "$LOG/auto-$AUTO_MONITOR.log"
}

# auto_start_node NODE [standby]: create the keeper's node on first use (the first one becomes
# the primary, from its own initdb; with standby, a standby cloned from it), then run it; on
# later starts the keeper resumes its node in the role the monitor assigns.
auto_start_node() {
  local node=$1 d i
  d="$(auto_pgdata "$node")"
  auto_prepare "$node"
  if [ -n "$(auto_pids "$node")" ]; then
    info "$node: keeper already running"
    return
  fi
  if [ -f "$d/PG_VERSION" ] && [ -n "$(find "$(auto_home "$node")/config" -name pg_autoctl.cfg 2>/dev/null)" ]; then
    auto_conf "$node"
    say "$node: starting its pg_auto_failover keeper on ${NODE_ADDR[$node]}:$PG_PORT"
    auto_spawn "$node" run --pgdata "$d"
    return
  fi
  # The first node starts from a data directory of its own (the primary); the others from
  # none: pg_autoctl clones the primary (pg_basebackup) once the monitor has it ready.
  [ -n "${2:-}" ] || auto_initdb "$node"
  say "$node: creating its pg_auto_failover node on ${NODE_ADDR[$node]}:$PG_PORT"
  auto_ctl "$node" create postgres --pgctl "$PG15_BIN/pg_ctl" --pgdata "$d" --pgport "$PG_PORT" \
    --hostname "${NODE_ADDR[$node]}" --name "$node" --dbname "$PG_DB" --monitor "$(auto_monitor_url)" \
    --skip-pg-hba --no-ssl >>"$LOG/auto-$node.log" 2>&1 ||
    fail_with_log "$node: pg_autoctl create postgres failed" "$LOG/auto-$node.log"
  # the keeper starts Postgres with every setting, the formation's last: stop what create left
  for ((i = 0; i < 60; i++)); do
    as_pg "$PG15_BIN/pg_ctl" -D "$d" status >/dev/null 2>&1 || break
    as_pg "$PG15_BIN/pg_ctl" -D "$d" -m fast -w stop >/dev/null 2>&1 || sleep 0.5
  done
  auto_conf "$node"
  auto_spawn "$node" run --pgdata "$d"
}

# auto_wait_node NODE STATE SECONDS: wait until the monitor has NODE reported in STATE.
auto_wait_node() {
  local i
  for ((i = 0; i < $3 * 2; i++)); do
    [ "$(auto_states 2>/dev/null | awk -F'\t' -v n="$1" '$1 == n { print $2 }')" != "$2" ] || return 0
    sleep 0.5
  done
  fail_with_log "$1: not $2 within $3 s (the monitor's states: $(auto_states 2>/dev/null | tr '\n\t' '; ' || echo none))" "$LOG/auto-$1.log"
}

# cmd_up_postgres_auto: the formation, built the first time (monitor, then pg1 as the primary,
# then pg2 and pg3 as its standbys), resumed afterwards; then a database for the services.
cmd_up_postgres_auto() {
  need_root
  local node t0=$SECONDS first=""
  [ "$(pg_version)" = 15 ] || die "the pg_auto_failover formation runs PostgreSQL 15 (Debian's package has no 18)"
  auto_bin >/dev/null
  [ ! -s "$RUNNING_FILE" ] || die "the scripted PostgreSQL cluster runs; 'bash scripts/cluster.sh down postgres' first"
  mkdir -p "$AUTO_DIR" "$LOG" "$CL/run"
  [ "$(runuser -u "$PG_USER" -- test -x "$CL/run" && echo ok)" = ok ] ||
    die "user $PG_USER cannot reach $CL: every parent directory must be searchable (chmod o+x)"
  printf '15\n' >"$AUTO_RUNNING"
  net_up_nodes "${PG_NODES[@]}" "$AUTO_MONITOR"
  auto_start_monitor
  [ -n "$(auto_states 2>/dev/null)" ] || first=yes
  for node in "${PG_NODES[@]}"; do
    if [ -n "$first" ] && [ "$node" != "${PG_NODES[0]}" ]; then auto_start_node "$node" standby; else auto_start_node "$node"; fi
    # the first build: one node at a time, each a standby once the one before is
    if [ -n "$first" ]; then
      if [ "$node" = "${PG_NODES[0]}" ]; then auto_wait_node "$node" single 120; else auto_wait_node "$node" secondary 300; fi
    fi
  done
  auto_wait_whole 300 || { auto_status || true; die "the formation is not whole after 5 minutes (logs: $LOG/auto-*.log)"; }
  say "pg_auto_failover formation up in $((SECONDS - t0))s (PostgreSQL 15; logs in $LOG/auto-*.log)"
  auto_status || true
  echo
  print_env
}

# auto_down: every keeper stopped (pg_autoctl stop: Postgres shut down fast), the monitor last,
# then the namespaces.
auto_down() {
  local node
  for node in "${PG_NODES[@]}" "$AUTO_MONITOR"; do
    [ -n "$(auto_pids "$node")" ] || continue
    auto_ctl "$node" stop --pgdata "$(auto_pgdata "$node")" >/dev/null 2>&1 || true
    ns_wait_empty "$node"
  done
  for node in "${PG_NODES[@]}" "$AUTO_MONITOR"; do ns_down "$node"; done
  rm -f "$AUTO_RUNNING"
}

# auto_status: each node, its keeper's pids, its role as it answers, and the monitor's states.
auto_status() {
  local node pids role bad=0
  printf 'PostgreSQL cluster under pg_auto_failover (monitor %s, %s:%s):\n' "$AUTO_MONITOR" "${NODE_ADDR[$AUTO_MONITOR]}" "$PG_PORT"
  printf '%-6s %-10s %-12s %-18s %s\n' NODE NAMESPACE ADDRESS PIDS ANSWERS
  for node in "$AUTO_MONITOR" "${PG_NODES[@]}"; do
    pids="$(auto_pids "$node")" role=-
    if [ "$node" != "$AUTO_MONITOR" ]; then
      role="$(psql_tcp "$node" -d postgres -tAc "SELECT CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END" 2>/dev/null)" || role="no answer"
    fi
    [ -n "$pids" ] || bad=1
    printf '%-6s %-10s %-12s %-18s %s\n' "$node" "$(ns_of "$node")" "${NODE_ADDR[$node]}" "${pids:--}" "$role"
  done
  echo
  echo "the monitor's view (node, reported state, assigned state):"
  auto_states 2>/dev/null | sed 's/^/  /; s/\t/  /g' || { echo "  the monitor does not answer"; bad=1; }
  local p
  p="$(auto_primary)"
  if [ -n "$p" ]; then
    printf '\nsynchronous_standby_names on the primary, %s: %s\n' "$p" \
      "$(psql_tcp "$p" -d postgres -tAc 'SHOW synchronous_standby_names' 2>/dev/null || echo '?')"
  fi
  auto_whole || { echo "not whole: want one primary and two secondaries, each in its assigned state"; bad=1; }
  [ "$bad" = 0 ] || return 3
}

# cmd_auto_kill NODE: the node dies: SIGKILL to its keeper and its Postgres at once.
cmd_auto_kill() {
  need_root
  local node=${1:-} pids
  known_node "$node"
  [ -s "$AUTO_RUNNING" ] || die "auto-kill: the pg_auto_failover formation is not running (bash scripts/cluster.sh up postgres-auto)"
  pids="$(auto_pids "$node")"
  [ -n "$pids" ] || die "auto-kill: nothing runs on $node"
  # shellcheck disable=SC2086 # one pid per word
  kill -KILL $pids
  ns_wait_empty "$node"
  say "$node: killed (SIGKILL to its keeper and Postgres: $pids)"
}

# cmd_auto_start NODE: start the node's keeper again (after auto-kill): it asks the monitor for
# its role and rejoins as a standby (pg_rewind) when another node was promoted.
cmd_auto_start() {
  need_root
  local node=${1:-}
  known_node "$node"
  [ -s "$AUTO_RUNNING" ] || die "auto-start: the pg_auto_failover formation is not running (bash scripts/cluster.sh up postgres-auto)"
  auto_start_node "$node"
}

# cmd_auto_wait [SECONDS]: wait until the formation is whole (default 5 minutes); exit 3 if not.
cmd_auto_wait() {
  [ -s "$AUTO_RUNNING" ] || die "auto-wait: the pg_auto_failover formation is not running"
  auto_wait_whole "${1:-300}" || { auto_status || true; exit 3; }
  printf 'primary=%s\n' "$(auto_primary)"
}
