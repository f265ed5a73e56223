package stackcheck

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// loopback is the only host address docker-compose.yml may publish on.
const loopback = "127.0.0.1"

// TestComposePublishesOnLoopbackOnly checks that every published port of
// docker-compose.yml is bound to 127.0.0.1, so that nothing the stack runs
// (servers without TLS and with demo passwords, services without
// authentication) is reachable from other machines; and that a container
// running one of the pair table's services listens on every interface
// inside the container (ADDR=0.0.0.0:<port>, or the port mapping reaches
// nothing: the services' default ADDR is loopback) and is published on
// 127.0.0.1 at its own port.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, p := range composeProblems(loadCompose(t)) {
		t.Error(p)
	}
}

// TestComposeProblemsFindsExposedPorts checks the check itself on a
// compose file that breaks each rule, and on one that keeps them.
func TestComposeProblemsFindsExposedPorts(t *testing.T) {
	t.Parallel()
	bad := loadComposeText(t, `
services:
  redis:
    image: redis:7
    ports: ["6379:6379"]
  no-kafka:
    image: wpe/no-kafka
    environment:
      ADDR: 127.0.0.1:8084
    ports: ["127.0.0.1:9999:8084"]
  svc-redis:
    image: wpe/redis
    ports: ["127.0.0.1:8087:8087"]
`)
	got := strings.Join(composeProblems(bad), "\n")
	for _, want := range []string{
		`service "redis" publishes 6379 on all interfaces`,
		`service "no-kafka" sets ADDR="127.0.0.1:8084", want 0.0.0.0:8084`,
		`service "no-kafka" does not publish 127.0.0.1:8084:8084`,
		`service "svc-redis" sets ADDR="", want 0.0.0.0:8087`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	good := loadComposeText(t, `
services:
  redis:
    image: redis:7
    ports: ["127.0.0.1:6379:6379"]
  no-kafka:
    image: wpe/no-kafka
    environment:
      ADDR: 0.0.0.0:8084
    ports: ["127.0.0.1:8084:8084"]
`)
	if p := composeProblems(good); len(p) != 0 {
		t.Errorf("a compose file that keeps the rules: %v", p)
	}
}

// composeProblems returns what breaks the loopback rules in project.
func composeProblems(project *types.Project) []string {
	var problems []string
	for _, name := range project.ServiceNames() {
		svc := project.Services[name]
		for _, p := range svc.Ports {
			if p.Published != "" && p.HostIP != loopback {
				problems = append(problems, fmt.Sprintf("service %q publishes %s on all interfaces (host_ip %q): write \"%s:%s:%d\"",
					name, p.Published, p.HostIP, loopback, p.Published, p.Target))
			}
		}
		row, ok := serviceContainer(name)
		if !ok {
			continue
		}
		port := strconv.Itoa(row.Port)
		if got, want := env(svc, "ADDR"), "0.0.0.0:"+port; got != want {
			problems = append(problems, fmt.Sprintf("service %q sets ADDR=%q, want %s: the default ADDR is loopback, which a port mapping cannot reach", name, got, want))
		}
		published := false
		for _, p := range svc.Ports {
			published = published || (p.HostIP == loopback && p.Published == port && strconv.FormatUint(uint64(p.Target), 10) == port)
		}
		if !published {
			problems = append(problems, fmt.Sprintf("service %q does not publish %s:%s:%s (it publishes %v)", name, loopback, port, port, publishedList(svc)))
		}
	}
	return problems
}

// serviceContainer returns the pair table's row of a compose service that
// runs one of the services: a compose service that is not one of the
// stack's servers (expectedServices), named after the service, or
// "svc-<name>" where a specialist's name is its server's (svc-redis).
func serviceContainer(name string) (pairs.Service, bool) {
	if slices.Contains(expectedServices, name) {
		return pairs.Service{}, false
	}
	return pairs.Lookup(strings.TrimPrefix(name, "svc-"))
}

// loadComposeText loads a compose document given as text, as loadCompose
// loads the file.
func loadComposeText(tb testing.TB, text string) *types.Project {
	tb.Helper()
	dir := tb.TempDir()
	details := types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yml"), Content: []byte(text)}},
		Environment: types.Mapping{},
	}
	project, err := loader.LoadWithContext(tb.Context(), details, func(o *loader.Options) { o.SetProjectName(projectName, true) })
	if err != nil {
		tb.Fatalf("loading a compose text: %v", err)
	}
	return project
}
