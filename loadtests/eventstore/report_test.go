package eventstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoad reads the files present, leaves a missing scenario nil, and
// refuses a file that does not parse rather than drop it silently.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	r, err := Load(dir)
	if err != nil || r.Append != nil || r.PointRead != nil || r.CatchUp != nil {
		t.Fatalf("empty folder: %+v, %v", r, err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "eventstore-"+name+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("point-read", `{"source":"s","rows":[{"engine":"no-kurrentdb","matched":3,"measured":true}]}`)
	r, err = Load(dir)
	if err != nil || r.PointRead == nil || r.PointRead.Rows[0].Matched != 3 || r.Append != nil || r.CatchUp != nil {
		t.Fatalf("one file: %+v, %v", r, err)
	}
	write("catch-up", `{"rows": [`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "eventstore-catch-up.json") {
		t.Errorf("a broken file: err = %v", err)
	}
}
