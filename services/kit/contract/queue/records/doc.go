// Package records reads and writes the queue pair's business records (the
// tasks and payments tables of migrations/queue), which both services keep
// in Postgres whatever transports their tasks. Sharing this code keeps
// GET /tasks/{id} and GET /queue identical on both sides.
package records
