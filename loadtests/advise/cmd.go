package advise

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// DefaultResults is where Main reads the committed results.
const DefaultResults = "results"

// Main runs `advise [flags]` and returns the exit status: 0 on an
// answer or -h, 2 on bad input, 1 when the results cannot be read.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("advise", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	w := Workload{}
	fs.StringVar(&w.Pair, "pair", pairs.Queue, "the pair: "+strings.Join(Pairs(), ", "))
	fs.Float64Var(&w.Rate, "rate", 1000, "load now, in items per second")
	fs.Float64Var(&w.Growth, "growth", 1, "load in two years as a multiple of now (factor)")
	payload := fs.String("payload", "1KB", "one item's size, in bytes (300, 2KB, 1.5MB)")
	fs.IntVar(&w.ConsumerGroups, "consumer-groups", 1, "independent readers that each need every item (count)")
	fs.BoolVar(&w.Replay, "replay", false, "readers must re-read history (true/false)")
	fs.BoolVar(&w.Fanout, "fanout", false, "one message must reach several consumers (true/false)")
	fs.IntVar(&w.TeamSize, "team-size", 3, "people running the infrastructure (count)")
	fs.BoolVar(&w.Integrity, "integrity", false, "an item must commit with business state in one transaction (true/false)")
	fs.Float64Var(&w.LatencyMS, "latency-ms", 0, "latency the workload needs, in milliseconds (0: no target)")
	fs.BoolVar(&w.PostgresInStack, "postgres-in-stack", true, "Postgres already runs in your stack (true/false)")
	fs.Float64Var(&w.PubSubRate, "pubsub-rate", 0, "cache: messages per second one channel must carry (0: no pub/sub)")
	fs.IntVar(&w.Subscribers, "subscribers", 1, "cache: subscribers of that channel (count)")
	fs.Float64Var(&w.LockRate, "lock-rate", 0, "cache: lock acquire + release cycles per second (0: no locks)")
	fs.Float64Var(&w.TakeRate, "take-rate", 0, "cache: rate-limit takes per second (0: no rate limits)")
	dir := fs.String("results", DefaultResults, "folder of the committed results/*.json (path)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return 0
		}
		fmt.Fprintln(stderr, "advise:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "advise: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	w.Pair = strings.ReplaceAll(strings.ToLower(w.Pair), "-", "")
	b, err := report.ParseSize(*payload)
	if err != nil {
		fmt.Fprintln(stderr, "advise: payload:", err)
		return 2
	}
	w.PayloadBytes = b
	if err := w.Validate(); err != nil {
		fmt.Fprintln(stderr, "advise:", err)
		return 2
	}
	vs, err := Load(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "advise: reading results:", err)
		return 1
	}
	a, err := Advise(w, vs)
	if err != nil {
		fmt.Fprintln(stderr, "advise:", err)
		return 1
	}
	Print(stdout, w, a)
	return 0
}

// Print writes the answers and the final line.
func Print(out io.Writer, w Workload, a Advice) {
	fmt.Fprintf(out, "Workload: %s, %g items/s (growth %g×), %g-byte items, %d consumer group(s), replay %t, fan-out %t, team of %d.\n",
		w.Pair, w.Rate, w.Growth, w.PayloadBytes, w.ConsumerGroups, w.Replay, w.Fanout, w.TeamSize)
	if w.roles() {
		fmt.Fprintf(out, "Roles beyond the cache: pub/sub %g messages/s to %d subscriber(s), locks %g cycles/s, rate limits %g takes/s (0: not needed).\n",
			w.PubSubRate, w.Subscribers, w.LockRate, w.TakeRate)
	}
	fmt.Fprintln(out, "Thresholds: this machine's committed results/*.json (see README.md's cards).")
	for i, ans := range a.Answers {
		fmt.Fprintf(out, "\n%d. %s\n   %s\n", i+1, ans.Question, ans.Text)
	}
	fmt.Fprintf(out, "\nAnswer: %s\n", a.Final)
}

func usage(out io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(out, "usage: go run ./loadtests advise [flags]")
	fmt.Fprintln(out, "\nAnswers the reference's five questions and the project's sixth for your workload with this machine's")
	fmt.Fprintln(out, "measured thresholds (for the cache pair, a seventh when you name a role beyond the cache: --pubsub-rate,")
	fmt.Fprintln(out, "--lock-rate, --take-rate), and ends with Postgres, the specialist, or \"measure it\". Flags (unit, default):")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(out, "  --%-18s %s (default %s)\n", f.Name, f.Usage, f.DefValue)
	})
}
