package stackcheck

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// Paths relative to this package's directory, which is where go test runs.
const (
	composeFile  = "../../docker-compose.yml"
	portsEnvFile = "../ports.env"
	stackScript  = "../stack.sh"
)

// projectName is the name the loader is given; it need not match the name:
// in the file, it only has to be a valid one.
const projectName = "stackcheck"

// expectedServices are the servers the comparisons need, by compose service
// name. The services and scripts refer to them by these names.
var expectedServices = []string{
	"postgres", "pgbouncer", "rabbitmq", "kafka", "mongodb", "redis", "kurrentdb",
}

// publishedPorts maps each variable of scripts/ports.env that names a port
// clients use to the compose service that must publish it on the host.
var publishedPorts = map[string]string{
	"PG_PORT":            "postgres",
	"PGBOUNCER_PORT":     "pgbouncer",
	"RABBITMQ_PORT":      "rabbitmq",
	"RABBITMQ_MGMT_PORT": "rabbitmq",
	"KAFKA_PORT":         "kafka",
	"MONGO_PORT":         "mongodb",
	"REDIS_PORT":         "redis",
	"KURRENTDB_PORT":     "kurrentdb",
}

// internalPorts are variables of scripts/ports.env that compose does not
// publish; each is checked some other way (see TestComposeKafkaListeners).
var internalPorts = []string{"KAFKA_CONTROLLER_PORT"}

// statefulServices keep data that should outlive the container, so each
// must mount a named volume.
var statefulServices = []string{"postgres", "rabbitmq", "kafka", "mongodb", "redis", "kurrentdb"}

func TestComposeLoads(t *testing.T) {
	t.Parallel()
	project, vars := loadComposeVars(t)

	// The file is self-contained: a $VAR in it would take its value from the
	// shell of whoever runs compose (blank here), so what this test sees
	// would not be what runs. Above all, a $ meant for a shell or a
	// Dockerfile must be written $$.
	for _, name := range slices.Compact(slices.Sorted(slices.Values(vars))) {
		t.Errorf("%s refers to variable %s; write $$ for a literal $", composeFile, name)
	}

	for _, name := range expectedServices {
		if _, ok := project.Services[name]; !ok {
			t.Errorf("%s: no service %q (services: %v)", composeFile, name, project.ServiceNames())
		}
	}
	for _, name := range project.ServiceNames() {
		if !slices.Contains(expectedServices, name) {
			t.Logf("%s: service %q is not one stackcheck knows about", composeFile, name)
		}
	}
}

func TestComposeHealthchecksAndRestart(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)

	for _, name := range project.ServiceNames() {
		svc := project.Services[name]
		switch hc := svc.HealthCheck; {
		case hc == nil:
			t.Errorf("service %q has no healthcheck", name)
		case hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE":
			t.Errorf("service %q has its healthcheck disabled: %q", name, hc.Test)
		}
		if svc.Restart == "" || svc.Restart == types.RestartPolicyNo {
			t.Errorf("service %q has no restart policy (restart: %q)", name, svc.Restart)
		}
	}
}

func TestComposeNamedVolumes(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)

	for _, name := range statefulServices {
		svc, ok := project.Services[name]
		if !ok {
			continue // reported by TestComposeLoads
		}
		named := false
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeVolume || v.Source == "" {
				continue
			}
			if _, declared := project.Volumes[v.Source]; !declared {
				t.Errorf("service %q mounts volume %q, which is not declared under volumes:", name, v.Source)
			}
			named = true
		}
		if !named {
			t.Errorf("service %q keeps data but mounts no named volume", name)
		}
	}
}

func TestComposePortsMatchPortsEnv(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	ports := readPortsEnv(t)

	for key := range ports {
		if _, ok := publishedPorts[key]; !ok && !slices.Contains(internalPorts, key) {
			t.Errorf("%s: %s is neither mapped to a compose service nor listed as internal in stackcheck", portsEnvFile, key)
		}
	}
	for key, name := range publishedPorts {
		port, ok := ports[key]
		if !ok {
			t.Errorf("%s: no %s (expected the host port of service %q)", portsEnvFile, key, name)
			continue
		}
		svc, ok := project.Services[name]
		if !ok {
			t.Errorf("service %q (for %s=%d) is missing", name, key, port)
			continue
		}
		if !publishes(svc, port) {
			t.Errorf("service %q does not publish host port %d (%s in %s); it publishes %v",
				name, port, key, portsEnvFile, publishedList(svc))
		}
	}
}

// TestComposeKafkaListeners checks the parts of the Kafka setup that ports
// alone do not show: clients on the host are told to use the published port,
// and the controller listens on KAFKA_CONTROLLER_PORT without being published.
func TestComposeKafkaListeners(t *testing.T) {
	t.Parallel()
	ports := readPortsEnv(t)
	svc := composeService(t, "kafka")

	if port, ok := ports["KAFKA_PORT"]; ok {
		want := "localhost:" + strconv.Itoa(port)
		if got := env(svc, "KAFKA_ADVERTISED_LISTENERS"); !strings.Contains(got, want) {
			t.Errorf("kafka: KAFKA_ADVERTISED_LISTENERS=%q does not advertise %s", got, want)
		}
	}
	if port, ok := ports["KAFKA_CONTROLLER_PORT"]; ok {
		want := "CONTROLLER://:" + strconv.Itoa(port)
		if got := env(svc, "KAFKA_LISTENERS"); !strings.Contains(got, want) {
			t.Errorf("kafka: KAFKA_LISTENERS=%q has no %s", got, want)
		}
		want = ":" + strconv.Itoa(port)
		if got := env(svc, "KAFKA_CONTROLLER_QUORUM_VOTERS"); !strings.HasSuffix(got, want) {
			t.Errorf("kafka: KAFKA_CONTROLLER_QUORUM_VOTERS=%q does not end in %s", got, want)
		}
		if publishes(svc, port) {
			t.Errorf("kafka publishes the controller port %d; it should stay internal", port)
		}
	}
	for _, key := range []string{
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
		"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
	} {
		if got := env(svc, key); got != "1" {
			t.Errorf("kafka: %s=%q, want 1 on a single node", key, got)
		}
	}
}

func TestComposePostgresLogicalDecoding(t *testing.T) {
	t.Parallel()
	svc := composeService(t, "postgres")

	command := strings.Join(svc.Command, " ")
	for _, setting := range []string{
		"wal_level=logical",
		"max_replication_slots=20",
		"max_wal_senders=20",
		"max_connections=300",
		"random_page_cost=1.1",
	} {
		if !strings.Contains(command, setting) {
			t.Errorf("postgres: command %q does not set %s", command, setting)
		}
	}

	if svc.Build == nil {
		t.Fatalf("postgres: not built (image %q), so nothing installs wal2json", svc.Image)
	}
	dockerfile := dockerfileText(t, svc.Build)
	if !regexp.MustCompile(`(?m)^FROM\s+postgres:15\b`).MatchString(dockerfile) {
		t.Errorf("postgres: Dockerfile does not start FROM postgres:15:\n%s", dockerfile)
	}
	wal2json := regexp.MustCompile(`apt-get install[^\n]*\spostgresql-(15|\$PG_MAJOR|\$\{PG_MAJOR\})-wal2json\b`)
	if !wal2json.MatchString(dockerfile) {
		t.Errorf("postgres: Dockerfile does not apt-get install postgresql-15-wal2json:\n%s", dockerfile)
	}

	for key, want := range map[string]string{
		"POSTGRES_USER":     "postgres",
		"POSTGRES_PASSWORD": "postgres",
		"POSTGRES_DB":       "wpe",
	} {
		if got := env(svc, key); got != want {
			t.Errorf("postgres: %s=%q, want %q", key, got, want)
		}
	}
}

func TestComposePgbouncerTransactionMode(t *testing.T) {
	t.Parallel()
	svc := composeService(t, "pgbouncer")

	// POOL_MODE is read by edoburu/pgbouncer, PGBOUNCER_POOL_MODE by
	// bitnami/pgbouncer; either image may be used.
	mode := env(svc, "POOL_MODE")
	if mode == "" {
		mode = env(svc, "PGBOUNCER_POOL_MODE")
	}
	if !strings.EqualFold(mode, "transaction") {
		t.Errorf("pgbouncer: pool mode %q, want transaction", mode)
	}

	dep, ok := svc.DependsOn["postgres"]
	if !ok {
		t.Errorf("pgbouncer does not depend on postgres")
	} else if dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("pgbouncer waits for postgres to be %q, want %q", dep.Condition, types.ServiceConditionHealthy)
	}
}

func TestStackScriptUsesEveryPort(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile(stackScript)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s does not exist yet", stackScript)
	}
	if err != nil {
		t.Fatal(err)
	}
	ports := readPortsEnv(t)

	if !bytes.Contains(script, []byte("ports.env")) {
		t.Errorf("%s never mentions ports.env, so its ports may not be the ones compose uses", stackScript)
	}
	for _, key := range sortedKeys(ports) {
		// $KEY or ${KEY...} (${KEY}, ${KEY:-default}, ...), not $KEY_OTHER.
		use := regexp.MustCompile(`\$(` + key + `\b|\{` + key + `[}:?=+#%/-])`)
		if !use.Match(script) {
			t.Errorf("%s does not use $%s (port %d) from %s", stackScript, key, ports[key], portsEnvFile)
		}
	}
}

func TestPortsEnvWellFormed(t *testing.T) {
	t.Parallel()
	ports := readPortsEnv(t)

	byPort := map[int]string{}
	for _, key := range sortedKeys(ports) {
		port := ports[key]
		if port < 1 || port > 65535 {
			t.Errorf("%s: %s=%d is not a TCP port", portsEnvFile, key, port)
		}
		if other, dup := byPort[port]; dup {
			t.Errorf("%s: %s and %s are both %d", portsEnvFile, other, key, port)
		}
		byPort[port] = key
	}
}

// loadCompose loads docker-compose.yml the way Docker Compose does:
// schema validation, interpolation, normalization and consistency checks are
// all on. The environment is empty, so the result does not depend on the
// caller's shell.
func loadCompose(tb testing.TB) *types.Project {
	tb.Helper()
	project, _ := loadComposeVars(tb)
	return project
}

// composeService is the service name of docker-compose.yml (loadCompose);
// it fails tb if there is none.
func composeService(tb testing.TB, name string) types.ServiceConfig {
	tb.Helper()
	svc, ok := loadCompose(tb).Services[name]
	if !ok {
		tb.Fatalf("no service %q", name)
	}
	return svc
}

// loadComposeVars is loadCompose that also returns the names of the
// variables interpolation looked up, in the order it looked them up.
func loadComposeVars(tb testing.TB) (*types.Project, []string) {
	tb.Helper()
	path, err := filepath.Abs(composeFile)
	if err != nil {
		tb.Fatal(err)
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(path),
		ConfigFiles: []types.ConfigFile{{Filename: path}},
		Environment: types.Mapping{},
	}
	var (
		mu     sync.Mutex
		lookup []string
	)
	project, err := loader.LoadWithContext(tb.Context(), details, func(o *loader.Options) {
		o.SetProjectName(projectName, true)
		o.Interpolate.LookupValue = func(name string) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			lookup = append(lookup, name)
			return details.LookupEnv(name)
		}
	})
	if err != nil {
		tb.Fatalf("loading %s: %v", composeFile, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return project, slices.Clone(lookup)
}

// readPortsEnv parses scripts/ports.env: KEY=VALUE lines, blank lines and
// # comments. Every value must be a port number.
func readPortsEnv(tb testing.TB) map[string]int {
	tb.Helper()
	data, err := os.ReadFile(portsEnvFile)
	if err != nil {
		tb.Fatal(err)
	}
	keyRE := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	ports := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(strings.TrimPrefix(key, "export "))
		if !ok || !keyRE.MatchString(key) {
			tb.Fatalf("%s:%d: not KEY=VALUE: %q", portsEnvFile, n, line)
		}
		port, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			tb.Fatalf("%s:%d: %s is not a number: %q", portsEnvFile, n, key, value)
		}
		if _, dup := ports[key]; dup {
			tb.Fatalf("%s:%d: %s set twice", portsEnvFile, n, key)
		}
		ports[key] = port
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(ports) == 0 {
		tb.Fatalf("%s sets no ports", portsEnvFile)
	}
	return ports
}

// dockerfileText returns the Dockerfile a build uses, inline or from a file.
func dockerfileText(tb testing.TB, build *types.BuildConfig) string {
	tb.Helper()
	if build.DockerfileInline != "" {
		return build.DockerfileInline
	}
	path := build.Dockerfile
	if path == "" {
		path = "Dockerfile"
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(build.Context, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("reading the Dockerfile of a build: %v", err)
	}
	return string(data)
}

// publishes reports whether svc publishes host port port, alone or in a range.
func publishes(svc types.ServiceConfig, port int) bool {
	for _, p := range svc.Ports {
		lo, hi, ranged := strings.Cut(p.Published, "-")
		start, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		end := start
		if ranged {
			if end, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		if start <= port && port <= end {
			return true
		}
	}
	return false
}

func publishedList(svc types.ServiceConfig) []string {
	var out []string
	for _, p := range svc.Ports {
		out = append(out, p.Published+"->"+strconv.FormatUint(uint64(p.Target), 10))
	}
	return out
}

// env returns the value of an environment variable of svc, "" if unset.
func env(svc types.ServiceConfig, key string) string {
	if v := svc.Environment[key]; v != nil {
		return *v
	}
	return ""
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
