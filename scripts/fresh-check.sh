#!/usr/bin/env bash
# fresh-check: prove the README's set-up and test commands on a machine that has never
# seen this project.
#
#   bash scripts/fresh-check.sh          (make fresh-check)
#
# It runs `make deps`, `make up` and `make test` inside a clean Debian root, as a new
# user would on a fresh machine of this project's kind:
#
#   1. base   A Debian root made by debootstrap from Debian's packages, plus what a
#             machine of this project's kind ships before anyone touches it (make, gcc
#             for -race, Java 17 + Maven, python3, git, iproute2) and its
#             /usr/sbin/policy-rc.d (packages do not auto-start). None of the stack's
#             servers (PostgreSQL, RabbitMQ, Redis, pgbouncer, Kafka, FerretDB) is
#             there. The host's Go toolchain is bind-mounted read-only, as Go comes with
#             the machine. Cached under .stack/fresh/base-<key>; the key changes when
#             this script's package list does.
#   2. deps   A copy of the working tree (tracked and untracked-not-ignored files: what
#             a clone plus your uncommitted change would hold, never .stack/) in a
#             throw-away overlay over the base, then `make deps` there. It downloads
#             from Debian's mirror, Maven Central and the Go module proxy, so it runs
#             in the host's network namespace; it binds no port (policy-rc.d keeps the
#             packages' servers down).
#   3. test   `make up` and `make test` in a network namespace of its own (unshare):
#             its servers take the stack's usual ports without clashing with a stack
#             already running on this machine, and nothing can be downloaded any more
#             (GOPROXY=off), so a step that `make deps` forgot fails here.
#
# Every step runs in its own PID namespace: the servers it started die with it.
# Logs: .stack/fresh/base.log, .stack/fresh/run/{deps,test}.log. Needs root (debootstrap, chroot,
# unshare, overlayfs); installs debootstrap from apt when it is missing.
#
# Environment knobs:
#   FRESH_DIR=DIR        where the base and the run live (default <repo>/.stack/fresh)
#   FRESH_REBUILD=1      rebuild the base even when a cached one exists
#   FRESH_DEPS_CMD=...   the deps step's command (default: make deps)
#   FRESH_EXTRA_PACKAGES="a b"  more Debian packages in the base (its own cached base)
#   FRESH_TEST_CMD=...   the test step's command (default: make up && make test)
#   DEBIAN_MIRROR=URL    mirror for debootstrap (default: the host's first apt source,
#                        else http://deb.debian.org/debian)
#
# make fresh-check-cluster runs it with FRESH_DEPS_CMD="make deps && make deps-cluster",
# FRESH_EXTRA_PACKAGES="nodejs npm" (make deps-cluster runs npm pack; the machine's Node
# has npm, a Debian root has neither), and a test step that starts the cluster profile
# (make up-cluster, on PostgreSQL 15, then its Postgres again on 18) and checks it with
# make status-cluster.
set -Eeuo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FRESH="${FRESH_DIR:-$ROOT/.stack/fresh}"
RUN="$FRESH/run"
STEP=setup

say() { printf '==> [fresh-check %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() {
  printf 'error: fresh-check: %s\n' "$*" >&2
  exit 1
}

on_error() {
  printf '\nerror: fresh-check, step %s: `%s` failed with exit status %s (line %s).\n' \
    "$STEP" "${3%%$'\n'*}" "$1" "$2" >&2
  local log="$RUN/$STEP.log"
  [ "$STEP" = base ] && log="$FRESH/base.log"
  printf 'What to do: read %s; the root is kept in %s/root until the next run.\n' "$log" "$RUN" >&2
  exit "$1"
}
trap 'on_error $? $LINENO "$BASH_COMMAND"' ERR

# What a fresh machine of this project's kind has before `make deps` (see the README's
# quick start). The stack's own servers are deliberately absent.
BASE_PACKAGES=(
  ca-certificates make gcc libc6-dev git procps iproute2 less
  openjdk-17-jdk-headless maven python3
)
# FRESH_EXTRA_PACKAGES: more of what the machine ships, for a check that needs it
# (fresh-check-cluster: nodejs npm, as the machine's Node comes with npm).
read -r -a EXTRA_PACKAGES <<<"${FRESH_EXTRA_PACKAGES:-}"
BASE_PACKAGES+=("${EXTRA_PACKAGES[@]}")
BASE_VERSION=1 # bump to force a new base when the recipe below changes

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, unshare and overlayfs)"
for t in unshare chroot mount; do
  command -v "$t" >/dev/null || die "$t not found (util-linux)"
done
GOROOT_HOST="$(go env GOROOT 2>/dev/null)" || die "go not found: the machine's Go toolchain is bind-mounted into the root"
[ -x "$GOROOT_HOST/bin/go" ] || die "no go binary under GOROOT=$GOROOT_HOST"

if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
    die "apt-get install debootstrap failed; install it by hand and retry"
fi

host_codename() { (. /etc/os-release && printf '%s' "${VERSION_CODENAME:-bookworm}"); }
host_mirror() {
  local m
  m="$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
    grep -oE 'https?://[^ ]+' | head -n1)" || true
  printf '%s' "${m:-http://deb.debian.org/debian}"
}

SUITE="$(host_codename)"
MIRROR="${DEBIAN_MIRROR:-$(host_mirror)}"
# The machine's own trust anchors (/usr/local/share/ca-certificates) are part of the
# machine, not of the project: a root without them cannot reach the registries where
# TLS goes through a local CA (seen here: Maven failed with "No plugin found").
LOCAL_CAS=(/usr/local/share/ca-certificates/*.crt)
[ -e "${LOCAL_CAS[0]}" ] || LOCAL_CAS=()
KEY="$( (printf '%s\n' "$BASE_VERSION" "$SUITE" "${BASE_PACKAGES[*]}"; cat "${LOCAL_CAS[@]}" </dev/null) | sha256sum | cut -c1-12)"
BASE="$FRESH/base-$KEY"

# in_root ROOTDIR NET CMD: run CMD (a bash script) as root inside ROOTDIR, in new mount
# and PID namespaces, plus a new network namespace with only loopback when NET=isolated.
# The root gets /proc, /dev, a private /dev/shm and /tmp, the host's Go read-only, and a
# plain environment.
in_root() {
  local root=$1 net=$2 cmd=$3 flags=(--mount --pid --fork)
  [ "$net" = isolated ] && flags+=(--net)
  local goproxy
  goproxy="$(go env GOPROXY)"
  [ "$net" = isolated ] && goproxy=off
  unshare "${flags[@]}" -- bash -euo pipefail -c '
    root=$1 net=$2 goroot=$3 goproxy=$4 cmd=$5
    mount --make-rprivate /
    [ "$net" = isolated ] && ip link set lo up
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    mkdir -p "$root/usr/local/go"
    mount --bind "$goroot" "$root/usr/local/go"
    mount -o remount,bind,ro "$root/usr/local/go"
    [ "$net" = isolated ] || cp /etc/resolv.conf "$root/etc/resolv.conf"
    exec chroot "$root" /usr/bin/env -i \
      PATH=/usr/local/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
      GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOPROXY="$goproxy" \
      bash -euo pipefail -c "$cmd"
  ' fresh-root "$root" "$net" "$GOROOT_HOST" "$goproxy" "$cmd"
}

build_base() {
  local tmp="$FRESH/base.tmp"
  STEP=base
  rm -rf "$tmp"
  say "base: debootstrap $SUITE from $MIRROR (cached afterwards in ${BASE#"$ROOT"/})"
  debootstrap --variant=minbase "$SUITE" "$tmp" "$MIRROR" >"$FRESH/base.log" 2>&1
  # the apt sources and the policy of a machine of this kind: packages never auto-start
  cat >"$tmp/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian*}/debian-security $SUITE-security main
EOF
  printf '#!/bin/sh\n# packages do not start services here (as on the machines of this kind)\nexit 101\n' \
    >"$tmp/usr/sbin/policy-rc.d"
  chmod 755 "$tmp/usr/sbin/policy-rc.d"
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
  mkdir -p "$tmp/usr/local/share/ca-certificates"
  [ "${#LOCAL_CAS[@]}" -eq 0 ] || cp "${LOCAL_CAS[@]}" "$tmp/usr/local/share/ca-certificates/"
  say "base: apt-get install ${BASE_PACKAGES[*]}"
  in_root "$tmp" host "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${BASE_PACKAGES[*]} \
    && update-ca-certificates --fresh >/dev/null && apt-get clean" >>"$FRESH/base.log" 2>&1
  rm -rf "$BASE"
  mv "$tmp" "$BASE"
  touch "$BASE/.complete"
  # keep only the newest base
  find "$FRESH" -maxdepth 1 -name 'base-*' ! -name "base-$KEY" -exec rm -rf {} +
}

# overlay: mount the throw-away root (the base below, $RUN/upper above) in this
# process's own mount namespace and run "$@" there.
with_overlay() {
  unshare --mount -- bash -euo pipefail -c '
    mount --make-rprivate /
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$2/upper,workdir=$2/work" "$2/root"
    shift 2
    "$@"
  ' with-overlay "$BASE" "$RUN" "$@"
}

export -f in_root say
export GOROOT_HOST

t0=$SECONDS
mkdir -p "$FRESH"
if [ "${FRESH_REBUILD:-0}" = 1 ] || [ ! -f "$BASE/.complete" ]; then
  build_base
else
  say "base: cached ${BASE#"$ROOT"/} ($SUITE; ${BASE_PACKAGES[*]})"
fi

# a new run: a new upper layer over the base
rm -rf "$RUN"
mkdir -p "$RUN/upper" "$RUN/work" "$RUN/root"
STEP=copy
SRC=/src/where-postgres-ends
mkdir -p "$RUN/upper$SRC"
say "copy: the working tree (tracked + untracked-not-ignored files) to $SRC in the root"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | grep -zv '^\.stack/' |
  xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
  tar --null -T - -cf -) | tar -xf - -C "$RUN/upper$SRC"

# step NAME NET CMD: run CMD in the throw-away root; on failure show the end of its log.
step() {
  local name=$1 net=$2 cmd=$3 rc=0 t=$SECONDS
  STEP=$name
  with_overlay bash -c 'in_root "$1" "$2" "cd '"$SRC"' && $3"' _ "$RUN/root" "$net" "$cmd" >"$RUN/$name.log" 2>&1 || rc=$?
  if [ "$name" = test ]; then
    # the go test lines of the run inside: one per package, then the failures' details
    grep -E '^(ok|FAIL|---|panic:)[[:space:]]' "$RUN/$name.log" || true
  fi
  if [ "$rc" -ne 0 ]; then
    printf -- '--- last 60 lines of %s ---\n' "$RUN/$name.log" >&2
    tail -n 60 "$RUN/$name.log" >&2
    die "step $name ($cmd) failed with exit status $rc in the fresh root; full log: $RUN/$name.log"
  fi
  say "$name: done in $((SECONDS - t))s"
}

DEPS_CMD="${FRESH_DEPS_CMD:-make deps}"
say "deps: $DEPS_CMD (host network: Debian mirror, Maven Central, Go module proxy, npm registry)"
step deps host "$DEPS_CMD"

TEST_CMD="${FRESH_TEST_CMD:-make up && make test}"
say "test: $TEST_CMD (own network namespace: loopback only, GOPROXY=off)"
step test isolated "$TEST_CMD"
say "fresh-check passed in $((SECONDS - t0))s: $DEPS_CMD and $TEST_CMD work on a clean $SUITE root"
