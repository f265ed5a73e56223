package transcripts

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// root is the repository root, where commands run.
const root = "../.."

// docFiles are the documents whose transcripts run.
func docFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// parseAll parses every doc; a doc that breaks the convention is an error
// of TestDocsFollowTheConvention, and its well-formed blocks still run.
func parseAll(t testing.TB, strict bool) (map[string][]Block, []Skipped) {
	t.Helper()
	out := map[string][]Block{}
	var skipped []Skipped
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		blocks, sk, err := Parse(rel, string(text))
		if err != nil && strict {
			t.Error(err)
		}
		if len(blocks) > 0 {
			out[rel] = blocks
		}
		skipped = append(skipped, sk...)
	}
	return out, skipped
}

// TestDocsFollowTheConvention parses every doc (no server needed): every
// block of commands is a marked transcript or skipped with a reason, and
// every service a marker names exists.
func TestDocsFollowTheConvention(t *testing.T) {
	t.Parallel()
	docs, skipped := parseAll(t, true)
	n := 0
	for _, blocks := range docs {
		for _, b := range blocks {
			n++
			for _, s := range b.Services {
				if _, err := os.Stat(filepath.Join(root, "services", s.Name, "main.go")); err != nil {
					t.Errorf("%s:%d: marker names service %q, which has no services/%s/main.go", b.File, b.Line, s.Name, s.Name)
				}
				if portOf(s.Name) == 0 {
					t.Errorf("%s:%d: service %q is not in the pair table", b.File, b.Line, s.Name)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d transcripts in README.md and docs/*.md; expected the per-pair ones at least", n)
	}
	for _, s := range skipped {
		t.Logf("%s:%d: not run: %s", s.File, s.Line, s.Reason)
	}
}

func portOf(name string) int {
	for _, s := range pairs.All {
		if s.Name == name {
			return s.Port
		}
	}
	return 0
}

// namespaces are, per service, the settings naming what it creates on a
// server and their defaults: each instance gets unique values of these.
var namespaces = map[string]map[string]string{
	"no-rabbitmq":      {"DATABASE_SCHEMA": "queue"},
	"rabbitmq":         {"DATABASE_SCHEMA": "queue_rabbitmq", "RABBITMQ_QUEUE": "tasks"},
	"no-kafka":         {"DATABASE_SCHEMA": "log", "SLOT_NAME": "no_kafka"},
	"kafka":            {"DATABASE_SCHEMA": "log_kafka", "KAFKA_TOPIC": "log-events", "KAFKA_GROUP": "kafka-log"},
	"no-mongodb":       {"DATABASE_SCHEMA": "documents"},
	"mongodb":          {"MONGO_DATABASE": "wpe"},
	"no-redis":         {"DATABASE_SCHEMA": "cache"},
	"redis":            {"DATABASE_SCHEMA": "cache", "REDIS_KEY_PREFIX": "cache:"},
	"no-kurrentdb":     {"DATABASE_SCHEMA": "eventstore"},
	"kafka-eventstore": {"KAFKA_TOPIC": "eventstore"},
}

// stackEnv is the process environment plus the stack's URLs where unset
// (what `eval "$(make -s env)"` sets).
func stackEnv() []string {
	env := os.Environ()
	for _, b := range pairs.Backends {
		if b.Env == "KURRENTDB_URL" {
			continue
		}
		if v, ok := os.LookupEnv(b.Env); !ok || v == "" {
			env = append(env, b.Env+"="+b.DefaultURL)
		}
	}
	return env
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// build compiles every service the transcripts name, once.
func build(t *testing.T, docs map[string][]Block) string {
	t.Helper()
	buildOnce.Do(func() {
		var names []string
		for _, blocks := range docs {
			for _, b := range blocks {
				for _, s := range b.Services {
					if !slices.Contains(names, s.Name) {
						names = append(names, s.Name)
					}
				}
			}
		}
		sort.Strings(names)
		binDir, buildErr = os.MkdirTemp("", "wpe-transcripts-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", binDir + "/"}
		for _, n := range names {
			args = append(args, "./services/"+n)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// TestTranscripts runs every transcript of README.md and docs/*.md
// against the stack, one doc per subtest, its blocks in order.
func TestTranscripts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the transcripts need the stack (make up)")
	}
	for _, tool := range []string{"bash", "curl", "jq", "psql", "redis-cli", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the transcripts use %s, which is not on PATH (make deps installs it): %v", tool, err)
		}
	}
	docs, _ := parseAll(t, false)
	dir := build(t, docs)
	t.Cleanup(func() { os.RemoveAll(dir) })
	files := make([]string, 0, len(docs))
	for f := range docs {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			r := newDocRun(t, dir)
			for _, b := range docs[f] {
				r.runBlock(t, b)
			}
		})
	}
}

// docRun is one doc's run: its unique suffix and its service instances.
type docRun struct {
	bin       string
	id        string
	instances map[string]*instance // by ServiceSpec.Key
	forward   map[string]string    // marker-set namespace value -> unique value
	reverse   map[string]string    // unique value -> doc value
	schemas   map[string]bool      // unique schemas to drop
	slots     map[string]bool      // unique slots to drop
	others    map[string][]string  // unique topics, databases, key prefixes by setting
}

type instance struct {
	spec ServiceSpec
	port int
	cmd  *exec.Cmd
	logs *kittest.LogBuffer
	done chan error
}

func newDocRun(t *testing.T, bin string) *docRun {
	var b [3]byte
	_, _ = rand.Read(b[:])
	r := &docRun{
		bin: bin, id: "tr" + hex.EncodeToString(b[:]),
		instances: map[string]*instance{}, forward: map[string]string{}, reverse: map[string]string{},
		schemas: map[string]bool{}, slots: map[string]bool{}, others: map[string][]string{},
	}
	t.Cleanup(func() { r.cleanup(t) })
	return r
}

func (r *docRun) unique(setting, v string) string {
	if setting == "REDIS_KEY_PREFIX" {
		return r.id + ":" + v
	}
	return v + "_" + r.id
}

// start returns the running instance of spec, starting it (and stopping
// another instance of the same service) when needed.
func (r *docRun) start(t *testing.T, b Block, spec ServiceSpec) *instance {
	t.Helper()
	if in, ok := r.instances[spec.Key()]; ok {
		return in
	}
	for k, in := range r.instances {
		if in.spec.Name == spec.Name {
			in.stop()
			delete(r.instances, k)
		}
	}
	set := map[string]string{}
	for k, v := range namespaces[spec.Name] {
		set[k] = v
	}
	explicit := map[string]bool{}
	for _, kv := range spec.Env {
		set[kv[0]] = kv[1]
		explicit[kv[0]] = true
	}
	env := append(stackEnv(), "LOG_LEVEL=warn")
	for k, v := range set {
		if _, ns := namespaces[spec.Name][k]; ns || k == "DATABASE_SCHEMA" {
			u := r.unique(k, v)
			r.reverse[u] = v
			if explicit[k] {
				r.forward[v] = u
			}
			switch k {
			case "DATABASE_SCHEMA":
				r.schemas[u] = true
			case "SLOT_NAME":
				r.slots[u] = true
			case "KAFKA_TOPIC", "MONGO_DATABASE", "REDIS_KEY_PREFIX":
				if !slices.Contains(r.others[k], u) {
					r.others[k] = append(r.others[k], u)
				}
			}
			v = u
		}
		env = append(env, k+"="+v)
	}
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "ADDR=127.0.0.1:"+strconv.Itoa(port))
	in := &instance{spec: spec, port: port, logs: new(kittest.LogBuffer), done: make(chan error, 1)}
	in.cmd = exec.Command(filepath.Join(r.bin, spec.Name))
	in.cmd.Env = env
	in.cmd.Stdout, in.cmd.Stderr = in.logs, in.logs
	if err := in.cmd.Start(); err != nil {
		t.Fatalf("%s:%d: start %s: %v", b.File, b.Line, spec.Name, err)
	}
	go func() { in.done <- in.cmd.Wait() }()
	r.instances[spec.Key()] = in
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return in
			}
		}
		select {
		case err := <-in.done:
			t.Fatalf("%s:%d: %s (%s) exited before it was ready: %v\n%s", b.File, b.Line, spec.Name, spec.Key(), err, in.logs)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:%d: %s (%s) not ready within 90s (is the stack up? make status)\n%s", b.File, b.Line, spec.Name, spec.Key(), in.logs)
		}
	}
}

func (in *instance) stop() {
	if in.cmd.ProcessState != nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.done
	}
}

func (r *docRun) cleanup(t *testing.T) {
	for _, in := range r.instances {
		in.stop()
	}
	dropNamespaces(t, r.id, r.others["KAFKA_TOPIC"], r.others["MONGO_DATABASE"], r.others["REDIS_KEY_PREFIX"])
	var sql []string
	for s := range r.slots {
		sql = append(sql, fmt.Sprintf("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '%s'", s))
	}
	for s := range r.schemas {
		sql = append(sql, fmt.Sprintf(`DROP SCHEMA IF EXISTS "%s" CASCADE`, s))
	}
	for _, q := range sql {
		cmd := exec.Command("psql", "-qX", "-v", "ON_ERROR_STOP=1", envOr("DATABASE_URL", pairs.DefaultPostgresURL), "-c", q)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cleanup: %s: %v\n%s", q, err, out)
		}
	}
}

// rewriteCommand points a doc's command at the block's instances and
// namespaces.
func (r *docRun) rewriteCommand(cmd string, ports map[int]int, b Bindings) string {
	var pairs []string
	for doc, real := range ports {
		for _, host := range []string{"localhost:", "127.0.0.1:"} {
			pairs = append(pairs, host+strconv.Itoa(doc), host+strconv.Itoa(real))
		}
	}
	for v, u := range r.forward {
		pairs = append(pairs, v, u)
	}
	return strings.NewReplacer(pairs...).Replace(b.Apply(cmd))
}

// rewriteAnswer writes the unique names and ports back as the doc has
// them.
func (r *docRun) rewriteAnswer(out string, ports map[int]int) string {
	var keys []string
	for u := range r.reverse {
		keys = append(keys, u)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	var pairs []string
	for _, u := range keys {
		pairs = append(pairs, u, r.reverse[u])
	}
	for doc, real := range ports {
		for _, host := range []string{"localhost:", "127.0.0.1:"} {
			pairs = append(pairs, host+strconv.Itoa(real), host+strconv.Itoa(doc))
		}
	}
	return strings.NewReplacer(pairs...).Replace(out)
}

const doneMark = "__transcript_step_done__"

func (r *docRun) runBlock(t *testing.T, b Block) {
	ports := map[int]int{}
	for _, s := range b.Services {
		in := r.start(t, b, s)
		ports[portOf(s.Name)] = in.port
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "--noprofile", "--norc")
	sh.Dir = root
	sh.Env = stackEnv()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sh.Stdout, sh.Stderr = pw, pw
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	defer func() {
		stdin.Close()
		_ = sh.Wait()
		pr.Close()
	}()
	bind := Bindings{}
	for _, st := range b.Steps {
		cmd := r.rewriteCommand(st.Command, ports, bind)
		fmt.Fprintf(stdin, "%s\nprintf '\\n%s\\n'\n", cmd, doneMark)
		var out []string
		timeout := time.After(60 * time.Second)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok || l == doneMark {
					break read
				}
				out = append(out, l)
			case <-timeout:
				t.Errorf("%s:%d: no answer within 60s\n$ %s\n%s", b.File, st.Line, cmd, strings.Join(out, "\n"))
				return
			}
		}
		got := r.rewriteAnswer(strings.Join(out, "\n"), ports)
		if err := Match(st.Want, got, bind); err != nil {
			var logs strings.Builder
			for _, s := range b.Services {
				if in := r.instances[s.Key()]; in != nil {
					fmt.Fprintf(&logs, "\n--- %s's log:\n%s", s.Name, in.logs)
				}
			}
			t.Errorf("%s:%d: the answer differs from the doc's (the rest of this block is not run)\n$ %s\n(ran: %s)\n%v\n--- the doc shows:\n%s\n--- the service answered:\n%s%s",
				b.File, st.Line, st.Command, cmd, err, strings.Join(st.Want, "\n"), got, logs.String())
			return
		}
	}
}
