package report

import (
	"os"
	"testing"
)

// TestMain gives the report the project's pairs, as the load driver does
// at start-up from its pair table (cli's loadPairs, which these tests
// cannot import: cli imports report). TestPairReportsArePairs checks the
// list against services/kit/pairs, so a pair added to the driver and
// forgotten here fails it; cli's TestEveryPairIsDriven checks the
// driver's own list the same way.
func TestMain(m *testing.M) {
	Use(Queue(), Log(), Documents(), Cache(), EventStore())
	os.Exit(m.Run())
}
