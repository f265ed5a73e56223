package scenario

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

func TestLargeProfileSizeAndVariants(t *testing.T) {
	a, b := LargeProfile(512<<10, 1), LargeProfile(512<<10, 2)
	if len(a) < 500<<10 || len(a) > 520<<10 || string(a) == string(b) {
		t.Errorf("sizes %d %d, equal %v", len(a), len(b), string(a) == string(b))
	}
}

// TestDeclaredScenariosAreValid checks every declared rate scenario, and
// that Validate does catch a variant aimed at a service outside the pair
// and a ceiling that cannot climb.
func TestDeclaredScenariosAreValid(t *testing.T) {
	for _, s := range []RateScenario{QueueScenario, LogScenario} {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", s.Pair.Name, err)
		}
	}
	bad := LogScenario
	bad.VariantEnv = map[string]map[string]string{"rabbitmq": {"X": "1"}}
	bad.Defaults.CeilingOpts.Factor = 1
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), `"rabbitmq"`) || !strings.Contains(err.Error(), "cannot climb") {
		t.Errorf("a broken scenario: %v", err)
	}
	if err := DocumentsScenario.Validate(); err != nil {
		t.Errorf("documents: %v", err)
	}
	docs := DocumentsScenario
	docs.SearchQueries = []string{`{"a":`}
	if err := docs.Validate(); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("a broken search query: %v", err)
	}
	if QueueScenario.VariantFlag() != "durable" || LogScenario.VariantFlag() != "sync-off" {
		t.Errorf("variant flags %q %q", QueueScenario.VariantFlag(), LogScenario.VariantFlag())
	}
}

// TestSetupSidesFailsTheSideAndGoesOn: a side whose users cannot be
// created is failed in the point with the error; the other side is set up
// and the run is not aborted. A cancelled context is returned.
func TestSetupSidesFailsTheSideAndGoesOn(t *testing.T) {
	p := driver.Point{Scenario: "documents.rewrite", Name: "2MB", Sides: []string{"no-mongodb", "mongodb"}}
	var set []string
	err := setupSides(context.Background(), &p, "creating its 4 users with a 2MB profile", func(svc string) error {
		set = append(set, svc)
		if svc == "mongodb" {
			return errors.New(`mongodb POST /users: 503 {"error":"backend unavailable or too slow; retry later"}`)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("setupSides returned %v: the run would abort", err)
	}
	if !reflect.DeepEqual(set, []string{"no-mongodb", "mongodb"}) {
		t.Errorf("set up %v, want both sides tried", set)
	}
	if p.SetupFailed("no-mongodb") || !p.SetupFailed("mongodb") {
		t.Fatalf("statuses %v: want mongodb failed only", p.Status)
	}
	if r := p.SideStatus("mongodb").String(); !strings.HasPrefix(r, "failed: creating its 4 users with a 2MB profile failed: mongodb POST /users: 503") {
		t.Errorf("mongodb: %q", r)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q := driver.Point{Sides: []string{"a", "b"}}
	if err := setupSides(ctx, &q, "x", func(string) error { return ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
