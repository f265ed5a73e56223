package main

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
)

// TestDocsMatchConfig checks docs/cache.md's and the README's env tables
// against the variables readConfig reads and their Default* constants.
func TestDocsMatchConfig(t *testing.T) {
	t.Parallel()
	configtest.CheckDocs(t, info.Service, readConfig, "../../docs/cache.md", "../../README.md")
}
