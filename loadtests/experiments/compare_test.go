package experiments

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestPgLibDir: the npm package's layout (native/bin beside native/lib
// holding libpq.so.5) needs LD_LIBRARY_PATH; a system install does not.
func TestPgLibDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, lib := filepath.Join(dir, "native", "bin"), filepath.Join(dir, "native", "lib")
	for _, d := range []string{bin, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := pgLibDir(bin); got != "" {
		t.Errorf("without libpq.so.5: %q, want none", got)
	}
	if err := os.WriteFile(filepath.Join(lib, "libpq.so.5"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pgLibDir(bin); got != lib {
		t.Errorf("pgLibDir = %q, want %q", got, lib)
	}
}

// TestDefaultCompareBindirs: PG_COMPARE_BINDIRS wins ("none" for none);
// else PostgreSQL 18 under STACK_DIR when it is there, and a reason when
// it is not.
func TestDefaultCompareBindirs(t *testing.T) {
	stack := t.TempDir()
	t.Setenv("STACK_DIR", stack)
	t.Setenv(CompareBindirsEnv, "")
	if dirs, why := DefaultCompareBindirs("/nowhere"); len(dirs) != 0 || !strings.Contains(why, "make deps-cluster") {
		t.Errorf("no binaries: %v, %q", dirs, why)
	}
	bin := filepath.Join(stack, pg18Bindir)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "postgres"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if dirs, why := DefaultCompareBindirs("/nowhere"); len(dirs) != 1 || dirs[0] != bin || why != "" {
		t.Errorf("with binaries: %v, %q", dirs, why)
	}
	t.Setenv(CompareBindirsEnv, "none")
	if dirs, why := DefaultCompareBindirs("/nowhere"); len(dirs) != 0 || why == "" {
		t.Errorf("none: %v, %q", dirs, why)
	}
	t.Setenv(CompareBindirsEnv, "/a/bin,/b/bin")
	if dirs, _ := DefaultCompareBindirs("/nowhere"); strings.Join(dirs, ",") != "/a/bin,/b/bin" {
		t.Errorf("listed: %v", dirs)
	}
}

// notifyResult is a notify-serializes-commits result with every point of
// the series under prefix, each mode's tps its rank (plain commits 3,
// debounced 2, in the transaction 1).
func notifyResult(r *Result, prefix, version string) {
	tps := map[string]float64{raw.NotifyNone: 3000, raw.NotifyDebounced: 2000, raw.NotifyInTx: 1000}
	for _, m := range raw.NotifyModes {
		for _, n := range raw.NotifyCommitters {
			k := m + "_" + strconv.Itoa(n)
			r.metric(driver.Metric(prefix+"tps_"+k), tps[m])
			r.metric(driver.Metric(prefix+"p99_ms_"+k), 1)
		}
	}
	r.setting(prefix+"server_version", version)
}

// TestNotifyFigurePerVersion: a result that compared versions has one
// figure per version, and says why a version was not measured; one that
// did not keeps the figure it always had.
func TestNotifyFigurePerVersion(t *testing.T) {
	t.Parallel()
	base := func() Result {
		r := Result{Name: NotifySerializes}
		notifyResult(&r, "", "15.18 (Debian 15.18-0+deb12u1)")
		r.metric("point_s", 1)
		r.metric("debounce_interval_ms", 5)
		return r
	}
	alone := Describe(base())
	if len(alone.Missing) > 0 || strings.Contains(alone.Figure, "PostgreSQL") || !strings.Contains(alone.Figure, "gives 0.33×") {
		t.Errorf("alone: %+v", alone)
	}
	r := base()
	notifyResult(&r, "pg18.", "18.4")
	r.setting("compared", "pg18")
	p := Describe(r)
	if len(p.Missing) > 0 {
		t.Fatalf("missing %v", p.Missing)
	}
	if want := "At 16 committers pg_notify in the transaction gives 0.33× the commits/s on PostgreSQL 15.18 (the shared stack), 0.33× on 18.4 (a private server). "; !strings.HasPrefix(p.Figure, want) {
		t.Errorf("figure does not start with %q:\n%s", want, p.Figure)
	}
	for _, want := range []string{"PostgreSQL 15.18 (Debian 15.18-0+deb12u1) (the shared stack): Commits/s", "PostgreSQL 18.4 (a private server, the stack's settings): Commits/s"} {
		if !strings.Contains(p.Figure, want) {
			t.Errorf("figure lacks %q:\n%s", want, p.Figure)
		}
	}
	if notes := strings.Join(p.Notes, " "); !strings.Contains(notes, "on PostgreSQL 15 and 18 only") || !strings.Contains(notes, "282b1cde9dedf456ecf02eb27caf086023a7bb71") {
		t.Errorf("notes: %q", p.Notes)
	}
	r = base()
	r.setting("not_compared", "no PostgreSQL 18 binaries in /x (make deps-cluster fetches them)")
	if p := Describe(r); !strings.Contains(p.Figure, "other PostgreSQL versions not measured: no PostgreSQL 18 binaries") {
		t.Errorf("not compared: %s", p.Figure)
	}
	r = base()
	r.setting("compared", "pg18") // its figures are not in the file
	if p := Describe(r); len(p.Missing) == 0 || !strings.HasPrefix(p.Figure, "failed: the results file lacks pg18.") {
		t.Errorf("lacking 18's figures: %s", p.Figure)
	}
}

// pg18ForTest is PostgreSQL 18's bin directory (make deps-cluster), or
// the test skips saying why it has none.
func pg18ForTest(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs the stack's Postgres and PostgreSQL 18's binaries")
	}
	root, err := launch.Root()
	if err != nil {
		t.Fatal(err)
	}
	dirs, why := DefaultCompareBindirs(root)
	if len(dirs) == 0 {
		t.Skip("no PostgreSQL to compare with: " + why)
	}
	kittest.Server(t, "DATABASE_URL", kittest.DefaultPostgresURL)
	return dirs[0]
}

// TestNotifySerializesCommitsOn18 runs the experiment small with
// PostgreSQL 18 beside the stack's server: both series complete, every
// committed NOTIFY is heard on both, and the figure names both versions.
func TestNotifySerializesCommitsOn18(t *testing.T) {
	t.Parallel()
	bin := pg18ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	xs, _ := Select([]string{NotifySerializes})
	f, err := Run(ctx, Env{Out: logWriter{t}, CompareBindirs: []string{bin}}, Small, xs)
	if err != nil {
		t.Fatal(err)
	}
	r := f.Results[0]
	if r.Error != "" || r.Settings["not_compared"] != "" {
		t.Fatalf("could not measure: %s %s", r.Error, r.Settings["not_compared"])
	}
	p := r.Settings["compared"]
	if !strings.HasPrefix(r.Settings[p+".server_version"], "18") {
		t.Fatalf("compared %q, version %q", p, r.Settings[p+".server_version"])
	}
	for _, m := range raw.NotifyModes {
		for _, n := range raw.NotifyCommitters {
			if k := driver.Metric(p + ".tps_" + m + "_" + strconv.Itoa(n)); r.Metrics[k] <= 0 {
				t.Errorf("%s: %v", k, r.Metrics[k])
			}
		}
	}
	if r.AckedLost != 0 {
		t.Errorf("%d committed NOTIFYs not received", r.AckedLost)
	}
	t.Logf("figure: %s", Describe(r).Figure)
}

// TestPrivateServiceOn18: no-kurrentdb starts (migrates, answers
// /readyz) against a private PostgreSQL 18 with the stack's settings, as
// the event store bench's -compare-bindirs runs it.
func TestPrivateServiceOn18(t *testing.T) {
	t.Parallel()
	bin := pg18ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p, err := StartPrivateService(ctx, Env{Out: logWriter{t}}, bin, "no-kurrentdb")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Major() != "18" || !strings.HasPrefix(p.URL, "http://127.0.0.1:") {
		t.Errorf("PostgreSQL %q (major %q), service at %q", p.Version, p.Major(), p.URL)
	}
}
