#!/usr/bin/env bash
# make fuzz: install the pinned Schemathesis into a venv under .stack/ (once;
# later runs reuse it), then let the load driver start each service on the
# running stack, run Schemathesis against its /openapi.yaml with every check
# and phase for FUZZ_SECONDS, and stop it. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
VENV=.stack/schemathesis-$SCHEMATHESIS_VERSION
PYTHON=${PYTHON:-python3}

if ! "$VENV/bin/st" --version 2>/dev/null | grep -qx "st, version $SCHEMATHESIS_VERSION"; then
	echo "installing schemathesis $SCHEMATHESIS_VERSION into $VENV"
	rm -rf "$VENV"
	mkdir -p .stack
	if ! "$PYTHON" -m venv "$VENV"; then
		echo "fuzz: $PYTHON -m venv failed: install python3-venv (apt-get install python3-venv)" >&2
		exit 1
	fi
	"$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# Hypothesis' example database; Schemathesis' own cache (failures to
# replay first on the next run) goes to .stack/fuzz, its working directory.
export HYPOTHESIS_STORAGE_DIRECTORY="$PWD/.stack/hypothesis"
exec go run ./loadtests fuzz -st "$VENV/bin/st" -seconds "$FUZZ_SECONDS" ${FUZZ_FLAGS:-}
