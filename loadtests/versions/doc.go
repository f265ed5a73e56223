// Package versions asks each server of the stack for its version, for the
// results file: Postgres (SHOW server_version over pgx), RabbitMQ (the
// management API's /api/overview, guest/guest by default), Kafka (the
// native stack's jar names, else the docker-compose image tag) and the
// MongoDB side (buildInfo, which tells FerretDB from MongoDB: FerretDB adds
// ferretdb* fields). A server that cannot be asked leaves its field empty
// and says why in Versions.Errors; collecting never fails.
package versions
