// Package cluster reads the roles of a replicated Postgres from one
// multi-host connection string, such as the cluster profile's
// CLUSTER_DATABASE_URL (scripts/cluster.sh, docs/cluster.md): which host
// is the primary, which standbys stream from it, and whether each is
// synchronous. Hosts splits the string into one configuration per host,
// Discover asks every host, and WaitReplayed and WaitSlotSynced wait for a
// standby to catch up. Its tests check the running cluster profile's
// Postgres, RabbitMQ and Kafka and skip when CLUSTER_DATABASE_URL,
// CLUSTER_RABBITMQ_URLS and CLUSTER_KAFKA_BROKERS are not set (make
// test-cluster sets those of the clusters that run).
package cluster
