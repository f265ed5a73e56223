package experiments

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The documents pair's experiments beyond CRUD (BeyondCRUD).
const (
	// DocumentsChangeFeed measures GET /users/changes: how long a write
	// takes to reach an open stream at 100 and 1,000 writes/s, and a
	// stream resumed after its service is killed (nothing lost, nothing
	// twice).
	DocumentsChangeFeed = "documents-change-feed"
	// DocumentsSessionExpiry measures expiring sessions: how late an
	// expired session is removed, and what the removal costs the
	// foreground reads' p99.
	DocumentsSessionExpiry = "documents-session-expiry"
	// DocumentsReport measures POST /users/report (group, count,
	// average, top 10) over 100,000 and 1,000,000 users.
	DocumentsReport = "documents-report"
)

// documentsExperiments are BeyondCRUD's experiments, in the order the
// section shows them.
func documentsExperiments() []Experiment {
	return []Experiment{
		{Name: DocumentsChangeFeed, Run: documentsChangeFeed, Full: time.Minute, Text: changeFeedText},              // 56 s on 7 December
		{Name: DocumentsSessionExpiry, Run: documentsSessionExpiry, Full: 2 * time.Minute, Text: sessionExpiryText}, // 103 s
		{Name: DocumentsReport, Run: documentsReport, Full: 7 * time.Minute, Text: reportText},                      // 387 s, FerretDB at 100,000 users only
	}
}

// The documents pair's two sides, as the rig starts them.
const (
	sideMongo = "mongodb"
	sidePG    = pairs.NoMongoDB
)

// docRig runs the documents pair's two services against the shared
// stack: no-mongodb on a scratch schema of its own, mongodb on a MongoDB
// database of its own, both dropped by Close.
type docRig struct {
	env    Env
	pg     *scratch
	mongo  *mongo.Client
	mdb    string
	l      *launch.Launcher
	logDir string
	ports  map[string]int
}

// newDocRig opens the scratch schema (conns connections on it) and the
// MongoDB client, and a launcher for the services.
func newDocRig(ctx context.Context, env Env, prefix string, conns int) (*docRig, error) {
	root, err := env.root()
	if err != nil {
		return nil, err
	}
	pg, err := openScratch(ctx, env.PostgresURL, prefix, conns, nil)
	if err != nil {
		return nil, err
	}
	mc, err := mongo.Connect(options.Client().ApplyURI(env.MongoURL).SetTimeout(2 * time.Minute))
	if err != nil {
		pg.Close()
		return nil, fmt.Errorf("mongodb: %w", err)
	}
	l, logDir, err := newLauncher(root, "wpe-docs-logs-")
	if err != nil {
		pg.Close()
		_ = mc.Disconnect(context.Background())
		return nil, err
	}
	return &docRig{env: env, pg: pg, mongo: mc, mdb: uniqueName("wpe_x_" + prefix), l: l, logDir: logDir, ports: map[string]int{}}, nil
}

// start starts side (sidePG or sideMongo) on its data with extra
// settings, on a port of its own kept across restarts, and returns its
// base URL.
func (r *docRig) start(ctx context.Context, side string, extra map[string]string) (string, error) {
	port, err := keptPort(r.ports, side)
	if err != nil {
		return "", err
	}
	env := map[string]string{"LOG_FORMAT": "text"}
	if side == sidePG {
		env["DATABASE_URL"], env["DATABASE_SCHEMA"] = r.env.PostgresURL, r.pg.Schema
	} else {
		env["MONGO_URL"], env["MONGO_DATABASE"] = r.env.MongoURL, r.mdb
	}
	for k, v := range extra {
		env[k] = v
	}
	if _, err := r.l.Start(ctx, side, port, env, 90*time.Second); err != nil {
		return "", err
	}
	return "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// kill kills side's process (SIGKILL); stop stops it gracefully.
func (r *docRig) kill(side string) error { return r.l.Kill(side) }
func (r *docRig) stop(side string) error { return r.l.Stop(side, 15*time.Second) }

// db is the side's MongoDB database.
func (r *docRig) db() *mongo.Database { return r.mongo.Database(r.mdb) }

// Close stops the services, drops the schema and the database and
// removes the logs (kept when EXPERIMENTS_KEEP_LOGS is set).
func (r *docRig) Close() {
	_ = r.l.StopAll(10 * time.Second)
	r.pg.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = r.db().Drop(ctx)
	_ = r.mongo.Disconnect(ctx)
	if os.Getenv("EXPERIMENTS_KEEP_LOGS") != "" {
		r.env.logf("  services' logs kept in %s (EXPERIMENTS_KEEP_LOGS)", r.logDir)
		return
	}
	_ = os.RemoveAll(r.logDir)
}

// documentsSettings records the servers and the machine every documents
// experiment's notes name.
func documentsSettings(ctx context.Context, res *Result, r *docRig) {
	var v string
	if err := r.pg.Pool.QueryRow(ctx, "SHOW server_version").Scan(&v); err == nil {
		res.setting("postgres_version", v)
	}
	res.setting("mongo_server", mongoServer(ctx, r.db()))
	m := driver.ThisMachine()
	res.setting("machine_cpu_model", m.CPUModel)
	res.metric(MetricMachineCpus, float64(m.CPUs))
}

// mongoServer names the MongoDB side's server (versions.MongoServer's
// String), or why it is unknown.
func mongoServer(ctx context.Context, db *mongo.Database) string {
	b, err := versions.MongoBuild(ctx, db)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return b.String()
}

// documentsNotes are the notes every documents experiment carries.
func documentsNotes(f *Figures, more ...string) []string {
	return append([]string{
		fmt.Sprintf("Postgres side: PostgreSQL %s (the shared stack); MongoDB side: %s — where it is FerretDB, its figures say nothing about MongoDB", f.StrOr("postgres_version", "?"), f.StrOr("mongo_server", "?")),
		fmt.Sprintf("machine: %s, %d CPUs, both services and both servers on it", f.StrOr("machine_cpu_model", "?"), f.Int(MetricMachineCpus)),
	}, more...)
}
