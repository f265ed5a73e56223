package service

import (
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Info returns the names that the service of row s reports in /stats and
// /metrics (New takes them): its name, its pair and its backend, as the
// pair table writes them. A service's main calls it with its own row.
func Info(s pairs.Service) stats.Info {
	return stats.Info{Service: s.Name, Pair: s.Pair, Backend: s.Backend}
}
