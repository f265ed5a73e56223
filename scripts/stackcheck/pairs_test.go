package stackcheck

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// servicesDir is where each built service of the pair table lives.
const servicesDir = "../../services"

// TestPairTableBackendsMatchStack checks the kit's pair table
// (services/kit/pairs) against scripts/ports.env and docker-compose.yml:
// every backend's default URL uses its ports.env port, and the compose
// service of that name publishes it.
func TestPairTableBackendsMatchStack(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	ports := readPortsEnv(t)
	for _, b := range pairs.Backends {
		want, ok := ports[b.PortVar]
		if !ok {
			t.Errorf("%s (%s): %s has no %s", b.Env, b.Name, portsEnvFile, b.PortVar)
			continue
		}
		got, err := pairs.Port(b.DefaultURL)
		if err != nil {
			t.Errorf("%s: %v", b.Env, err)
		} else if got != strconv.Itoa(want) {
			t.Errorf("%s's default %s uses port %s; %s says %s=%d", b.Env, b.DefaultURL, got, portsEnvFile, b.PortVar, want)
		}
		if name := publishedPorts[b.PortVar]; name != b.Name {
			t.Errorf("%s: the pair table says %s is %s's port, stackcheck's map says %q's", b.Env, b.PortVar, b.Name, name)
		}
		svc, ok := project.Services[b.Name]
		if !ok {
			t.Errorf("%s: no compose service %q for %s", composeFile, b.Name, b.Env)
			continue
		}
		if !publishes(svc, want) {
			t.Errorf("compose service %q does not publish %d (%s, %s's default); it publishes %v", b.Name, want, b.PortVar, b.Env, publishedList(svc))
		}
	}
}

// TestPairTableServices checks the pair table's services against the
// repository and the stack: each built service has its directory and each
// planned one does not yet, and no service's HTTP port is a port of the
// stack (ports.env) or one compose publishes.
func TestPairTableServices(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	ports := readPortsEnv(t)
	for _, s := range pairs.All {
		_, err := os.Stat(filepath.Join(servicesDir, s.Name, "main.go"))
		switch {
		case s.Planned && err == nil:
			t.Errorf("%s is marked Planned in the pair table but services/%s exists", s.Name, s.Name)
		case !s.Planned && err != nil:
			t.Errorf("%s is in the pair table but services/%s/main.go is missing: %v", s.Name, s.Name, err)
		}
		for key, port := range ports {
			if port == s.Port {
				t.Errorf("%s's port %d is %s in %s", s.Name, s.Port, key, portsEnvFile)
			}
		}
		for _, name := range project.ServiceNames() {
			if publishes(project.Services[name], s.Port) {
				t.Errorf("%s's port %d is published by compose service %q", s.Name, s.Port, name)
			}
		}
	}
}
