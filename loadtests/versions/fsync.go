package versions

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// FsyncSeconds is pg_test_fsync's -s: seconds per test. It runs about
// eighteen tests, so a measurement takes about 20 s.
const FsyncSeconds = 1

// pgTestFsyncPaths are where Debian's and the PGDG packages install
// pg_test_fsync, tried after PATH.
var pgTestFsyncPaths = []string{"/usr/lib/postgresql/15/bin/pg_test_fsync", "/usr/lib/postgresql/16/bin/pg_test_fsync", "/usr/lib/postgresql/17/bin/pg_test_fsync", "/usr/pgsql-15/bin/pg_test_fsync"}

var (
	fsyncOnce sync.Once
	fsyncRes  *driver.Fsync
)

// Fsync measures this machine's fsync cost once per process (later calls
// return the first measurement): pg_test_fsync -s FsyncSeconds with its
// test file beside Postgres' data directory (SHOW data_directory, read
// through url), on the same filesystem. A data directory that is not on
// this machine (a container's) or a missing pg_test_fsync is recorded as
// the Error.
func Fsync(ctx context.Context, url string) *driver.Fsync {
	fsyncOnce.Do(func() { fsyncRes = measureFsync(ctx, url) })
	return fsyncRes
}

func measureFsync(ctx context.Context, url string) *driver.Fsync {
	f := &driver.Fsync{}
	fail := func(err error) *driver.Fsync { f.Error = err.Error(); return f }
	data, err := dataDirectory(ctx, url)
	if err != nil {
		return fail(fmt.Errorf("data directory: %w", err))
	}
	if st, err := os.Stat(data); err != nil || !st.IsDir() {
		return fail(fmt.Errorf("Postgres' data directory %s is not on this machine (a container's?): %v", data, err))
	}
	tool, err := exec.LookPath("pg_test_fsync")
	if err != nil {
		for _, p := range pgTestFsyncPaths {
			if _, err2 := os.Stat(p); err2 == nil {
				tool, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return fail(errors.New("pg_test_fsync not found (PATH, /usr/lib/postgresql/*/bin)"))
	}
	// Beside the data directory, not in it: the same filesystem, and
	// nothing of the cluster's touched.
	f.Dir = filepath.Dir(data)
	file := filepath.Join(f.Dir, fmt.Sprintf("pg_test_fsync.%d.out", os.Getpid()))
	defer os.Remove(file)
	f.Tool = fmt.Sprintf("pg_test_fsync -s %d -f %s", FsyncSeconds, file)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, tool, "-s", strconv.Itoa(FsyncSeconds), "-f", file).CombinedOutput()
	if err != nil {
		return fail(fmt.Errorf("%s: %w: %s", f.Tool, err, strings.TrimSpace(string(out))))
	}
	r, err := ParseFsync(string(out))
	if err != nil {
		return fail(err)
	}
	f.FdatasyncOpsPerSec, f.FsyncOpsPerSec = r.FdatasyncOpsPerSec, r.FsyncOpsPerSec
	return f
}

// dataDirectory returns SHOW data_directory (superuser or
// pg_read_all_settings).
func dataDirectory(ctx context.Context, url string) (string, error) {
	return show(ctx, url, "data_directory")
}

// ParseFsync reads pg_test_fsync's output: the fdatasync and fsync
// ops/sec of its first section, "Compare file sync methods using one 8kB
// write". fsync_writethrough's "n/a" is skipped; a missing fdatasync line
// is an error.
func ParseFsync(out string) (driver.Fsync, error) {
	var f driver.Fsync
	sc := bufio.NewScanner(strings.NewReader(out))
	in := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Compare file sync methods using one 8kB write"):
			in = true
			continue
		case in && strings.HasPrefix(line, "Compare "):
			in = false
		}
		if !in {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[2] != "ops/sec" {
			continue
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return f, fmt.Errorf("pg_test_fsync: %q: %w", line, err)
		}
		switch fields[0] {
		case "fdatasync":
			f.FdatasyncOpsPerSec = &v
		case "fsync":
			f.FsyncOpsPerSec = &v
		}
	}
	if f.FdatasyncOpsPerSec == nil {
		return f, errors.New("pg_test_fsync: no fdatasync ops/sec for one 8kB write in its output")
	}
	return f, nil
}
