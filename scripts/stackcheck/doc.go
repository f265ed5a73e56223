// Package stackcheck holds checks of the stack itself, the servers the
// services are measured against, rather than of any one service.
//
// It checks that docker-compose.yml (repo root) is a well-formed Compose
// project, loaded with the same compose-go loader Docker Compose uses, so no
// Docker engine is needed; that every server in it has a healthcheck, a
// restart policy and the settings the comparisons depend on (logical
// decoding with wal2json on Postgres, transaction pooling on PgBouncer); and
// that the ports in scripts/ports.env agree with both docker-compose.yml and
// the native stack, scripts/stack.sh. It also checks the kit's pair table
// (services/kit/pairs): each backend's default URL uses its ports.env port
// and compose publishes it, each built service has its directory, and no
// service's HTTP port collides with the stack's. It checks that the Kafka
// cluster ids stack.sh formats storage with are ones Kafka's CLI accepts,
// that `make env` exports exactly the connection variables the services
// and tests read, with the stack's values, and that `make run-<service>`
// runs each service with that environment and the variables given to make.
// Against a running stack, it checks that no port of the stack (ports.env,
// epmd, RabbitMQ's distribution port) or of the services listens on a
// non-loopback address (listen_test.go). Smoke tests that each real server
// answers on its port are to be added here as well.
//
// It is its own Go module, so the compose-go dependency stays out of the
// services. Run it with:
//
//	cd scripts/stackcheck && go test ./...
package stackcheck
