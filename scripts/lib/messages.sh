# shellcheck shell=bash
# Messages and failing, shared by scripts/stack.sh and scripts/cluster.sh (sourced by both
# after their on_error trap; nothing here runs at source time).

say()  { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

# fail_with_log MESSAGE LOGFILE...: die, showing the end of each log that has something in it.
fail_with_log() {
  local msg=$1 logfile; shift
  for logfile in "$@"; do
    [ -s "$logfile" ] || continue
    printf -- '--- last lines of %s ---\n' "$logfile" >&2
    tail -n 25 "$logfile" >&2 || true
    printf -- '---\n' >&2
  done
  die "$msg (log: $*)"
}
