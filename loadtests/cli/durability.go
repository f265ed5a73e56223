package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// durabilitySizes are the -size values of the durability command.
var durabilitySizes = map[string]scenario.DurabilityOptions{"full": scenario.DurabilityDefaults, "small": scenario.DurabilitySmall}

// durabilitySetup is the durability command: the scenario alone, as one
// results file "<id>-durability.json", on the clusters its flags name
// (by default the CLUSTER_* variables, else what `scripts/cluster.sh env
// running` prints).
func durabilitySetup(fs *flag.FlagSet, _ *common, _ *extras) action {
	size := fs.String("size", "full", "durability: full (the measurement: 3 windows of 30 s per configuration, ~35 min on 2 cores) or small (a check that it runs: its figures are no measurement)")
	pg := fs.String("durability-database-url", os.Getenv("CLUSTER_DATABASE_URL"), "durability: the Postgres (multi-host URL) of every configuration; default CLUSTER_DATABASE_URL, else the cluster profile's")
	rmq := fs.String("durability-rabbitmq-urls", os.Getenv("CLUSTER_RABBITMQ_URLS"), "durability: the RabbitMQ nodes' AMQP URLs, comma-separated; default CLUSTER_RABBITMQ_URLS, else the cluster profile's")
	kafka := fs.String("durability-kafka-brokers", os.Getenv("CLUSTER_KAFKA_BROKERS"), "durability: the Kafka brokers, comma-separated; default CLUSTER_KAFKA_BROKERS, else the cluster profile's")
	only := fs.String("durability-only", "", "durability: only the configurations whose \"<service> <setting>=<value>\" contains one of these comma-separated strings")
	var o scenario.DurabilityOptions
	return action{
		withRoot: func(c common, root string) error {
			d, ok := durabilitySizes[*size]
			if !ok {
				return fmt.Errorf("-size %q: want full or small", *size)
			}
			o = d
			o.StackDir = scenario.StackDir(root)
			if *only != "" {
				o.Only = strings.Split(*only, ",")
			}
			cl := scenario.DurabilityCluster{DatabaseURL: *pg, RabbitMQURLs: *rmq, KafkaBrokers: *kafka}
			var err error
			o.Cluster, err = fillCluster(context.Background(), root, cl, o.Needs())
			return err
		},
		plan: func(c common) []step { return []step{{scenario.DurabilityCommand, o.Estimate(o.Count())}} },
		run: func(ctx context.Context, inv invocation) error {
			inv.c.pgURL = o.Cluster.DatabaseURL
			return runPair(ctx, inv, scenario.DurabilityCommand, durabilityRun(ctx, inv.env, o))
		},
	}
}

// fillCluster completes cl's empty fields from the cluster profile
// (clusterProfile: its Postgres, and the clusters named in needs, as
// DurabilityOptions.Needs names them) and asks the Postgres for its
// version; it fails, saying why, when one of those is not running.
func fillCluster(ctx context.Context, root string, cl scenario.DurabilityCluster, needs []string) (scenario.DurabilityCluster, error) {
	lacks := cl.DatabaseURL == "" ||
		(slices.Contains(needs, scenario.NeedsRabbitMQ) && cl.RabbitMQURLs == "") ||
		(slices.Contains(needs, scenario.NeedsKafka) && cl.KafkaBrokers == "")
	if lacks {
		p, err := clusterProfile(ctx, root, needs)
		if err != nil {
			return cl, err
		}
		cl.DatabaseURL = cmp(cl.DatabaseURL, p.DatabaseURL)
		cl.RabbitMQURLs = cmp(cl.RabbitMQURLs, p.RabbitMQURLs)
		cl.KafkaBrokers = cmp(cl.KafkaBrokers, p.KafkaBrokers)
	}
	major, _, err := scenario.PostgresMajor(ctx, cl.DatabaseURL)
	if err != nil {
		return cl, fmt.Errorf("the durability scenario's Postgres: %w", err)
	}
	cl.PostgresMajor = major
	return cl, nil
}

// cmp is a, or b when a is empty.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// clusterProfile asks scripts/cluster.sh which of the cluster profile's
// clusters run (`running`) and, when its Postgres and every cluster in
// needs do, the running ones' addresses (`env running`); the error says
// which do not.
func clusterProfile(ctx context.Context, root string, needs []string) (scenario.DurabilityCluster, error) {
	script := filepath.Join(root, "scripts", "cluster.sh")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(cctx, "bash", script, "running").Output()
	running := strings.Fields(string(out))
	var missing []string
	for _, want := range append([]string{"postgres"}, needs...) {
		if !strings.Contains(" "+strings.Join(running, " ")+" ", " "+want+" ") {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return scenario.DurabilityCluster{}, fmt.Errorf("the cluster profile's %s not running (bash scripts/cluster.sh running: %q; make up-cluster)", strings.Join(missing, ", "), strings.Join(running, " "))
	}
	out, err := exec.CommandContext(cctx, "bash", script, "env", "running").Output()
	if err != nil {
		return scenario.DurabilityCluster{}, fmt.Errorf("bash scripts/cluster.sh env running: %w", err)
	}
	vars := parseExports(string(out))
	return scenario.DurabilityCluster{DatabaseURL: vars["CLUSTER_DATABASE_URL"], RabbitMQURLs: vars["CLUSTER_RABBITMQ_URLS"], KafkaBrokers: vars["CLUSTER_KAFKA_BROKERS"]}, nil
}

// parseExports reads the `export NAME='value'` lines of a shell
// script's output (comments and other lines skipped).
func parseExports(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out[k] = strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'")
	}
	return out
}

// durabilityRun is the scenario's part of a run (the durability and
// results commands): on a copy of env whose Postgres is the cluster's,
// then the pairs' services it started stopped.
func durabilityRun(ctx context.Context, env *scenario.Env, o scenario.DurabilityOptions) func(*driver.Run) error {
	return func(run *driver.Run) error {
		de := *env
		de.PostgresURL = o.Cluster.DatabaseURL
		de.ServiceEnv = maps.Clone(env.ServiceEnv)
		if _, v, err := scenario.PostgresMajor(ctx, o.Cluster.DatabaseURL); err == nil {
			run.Settings[scenario.DurabilityServerSetting] = v
		}
		start := time.Now()
		err := scenario.RunDurability(ctx, &de, run, o, scenario.DurabilityTag(start))
		run.Settings["elapsed_s"] = time.Since(start).Round(time.Second).Seconds()
		stopPair(env, scenario.QueuePair)
		stopPair(env, scenario.LogPair)
		return err
	}
}

// runResultsDurability is the results command's durability step: the
// scenario at its full size when the cluster profile's three clusters
// run; otherwise a results file that says why it was not measured (no
// figures), so that the report says so. It never fails make results: a
// configuration that fails is a failed row of the report's table.
func runResultsDurability(ctx context.Context, inv invocation) {
	inv.env.Progress.Begin(scenario.DurabilityCommand)
	o := scenario.DurabilityDefaults
	o.StackDir = scenario.StackDir(inv.root)
	cl, err := fillCluster(ctx, inv.root, scenario.DurabilityCluster{}, o.Needs())
	if err != nil {
		writeNotMeasured(inv.c, inv.args, err)
		return
	}
	o.Cluster = cl
	inv.c.pgURL = cl.DatabaseURL
	before := resultfile.Newest(inv.c.resultsDir, resultfile.Kind(scenario.DurabilityCommand))
	err = runPair(ctx, inv, scenario.DurabilityCommand, durabilityRun(ctx, inv.env, o))
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "%s: %v (the report will say what is missing)\n", scenario.DurabilityCommand, err)
	if resultfile.Newest(inv.c.resultsDir, resultfile.Kind(scenario.DurabilityCommand)) == before {
		writeNotMeasured(inv.c, inv.args, err)
	}
}

// writeNotMeasured writes a durability results file without figures
// whose aborted field says why (err), for the report.
func writeNotMeasured(c common, args []string, err error) {
	run := driver.NewRun(scenario.DurabilityCommand, args, time.Now())
	run.Aborted = "not measured: " + err.Error()
	run.FinishedAt = run.StartedAt
	path, werr := driver.WriteRun(c.resultsDir, run)
	if werr != nil {
		fmt.Fprintf(os.Stderr, "%s: %s; and its results file was not written: %v\n", scenario.DurabilityCommand, run.Aborted, werr)
		return
	}
	fmt.Fprintf(os.Stderr, "%s: %s (%s)\n", scenario.DurabilityCommand, run.Aborted, path)
}
