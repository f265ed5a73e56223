package kit_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestServiceBinariesLinkNoTestCode runs go list -deps over every service's
// main package (services/* except kit) and fails if one of them links the
// testing package, kittest, a conformance suite, a contract's in-memory
// reference Backend (contract/<pair>/memory) or kin-openapi (the suites'
// response validator): test code belongs in _test.go files and those
// packages, never in what a service binary is built from.
func TestServiceBinariesLinkNoTestCode(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the services' imports: %v", err)
	}
	mains, err := filepath.Glob("../*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, m := range mains {
		if dir := filepath.Dir(m); filepath.Base(dir) != "kit" {
			pkgs = append(pkgs, "./"+filepath.Base(dir))
		}
	}
	// The main packages are the pair table's built services, no fewer
	// (a service this test would not check) and no more (a service the
	// table does not know).
	var want []string
	for _, s := range pairs.Built() {
		want = append(want, "./"+s.Name)
	}
	if !slices.Equal(sorted(pkgs), sorted(want)) {
		t.Fatalf("service main packages %v, want the %d services of the pair table %v", pkgs, len(want), want)
	}
	out := map[string][]string{}
	for _, p := range pkgs {
		// Listed from services/, where the workspace's go.work is found
		// above, so every service resolves the kit to this checkout.
		cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", p)
		cmd.Dir = ".."
		raw, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("go list -deps %s: %v\n%s", p, err, stderr)
		}
		for _, dep := range strings.Fields(string(raw)) {
			if testOnly(dep) {
				out[p] = append(out[p], dep)
			}
		}
	}
	for _, p := range pkgs {
		if bad := out[p]; len(bad) > 0 {
			t.Errorf("%s links test code: %s", p, strings.Join(bad, ", "))
		}
	}
}

// testOnly reports whether the import path dep is a package only tests
// may link.
func testOnly(dep string) bool {
	return dep == "testing" ||
		strings.HasSuffix(dep, "/kit/kittest") ||
		strings.HasSuffix(dep, "/conformance") ||
		strings.Contains(dep, "/kit/contract/") && strings.HasSuffix(dep, "/memory") ||
		strings.HasPrefix(dep, "github.com/getkin/kin-openapi")
}

func TestTestOnly(t *testing.T) {
	t.Parallel()
	const kit = "github.com/where-postgres-ends/where-postgres-ends/services/kit"
	for dep, want := range map[string]bool{
		"testing":                                      true,
		kit + "/kittest":                               true,
		kit + "/contract/queue/conformance":            true,
		kit + "/contract/log/memory":                   true,
		"github.com/getkin/kin-openapi/openapi3filter": true,
		kit + "/contract/queue":                        false,
		kit + "/contract/queue/records":                false,
		"github.com/hashicorp/golang-lru/v2/simplelru": false,
		"net/http": false,
	} {
		if got := testOnly(dep); got != want {
			t.Errorf("testOnly(%q) = %v, want %v", dep, got, want)
		}
	}
}
