package main

import (
	"slices"
	"testing"
)

// make fuzz covers every built service that runs here: all but kurrentdb.
func TestFuzzTargets(t *testing.T) {
	t.Parallel()
	got := fuzzTargets("")
	want := []string{"rabbitmq", "no-rabbitmq", "kafka", "no-kafka", "mongodb", "no-mongodb", "redis", "no-redis", "no-kurrentdb", "kafka-eventstore"}
	if !slices.Equal(got, want) {
		t.Errorf("fuzzTargets() = %v, want %v", got, want)
	}
	if got := fuzzTargets(" no-kafka, kafka ,"); !slices.Equal(got, []string{"no-kafka", "kafka"}) {
		t.Errorf("fuzzTargets(list) = %v", got)
	}
}
