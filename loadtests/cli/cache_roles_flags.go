package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// rolesFlags are the cache command's (and results') flags of the roles
// beyond the cache (scenario.CacheRoles).
type rolesFlags struct {
	o           scenario.CacheRolesOptions
	rates, subs string
}

// register adds the flags to fs, with CacheRoles' defaults.
func (f *rolesFlags) register(fs *flag.FlagSet) {
	f.o = scenario.CacheRoles.Defaults
	fs.BoolFunc("cache-roles", "cache: measure the roles beyond the cache (locks, pub/sub, rate limits) after the cache points (default true; false leaves them out)",
		func(s string) error {
			on, err := strconv.ParseBool(s)
			f.o.Off = !on
			return err
		})
	fs.DurationVar(&f.o.Duration, "roles-duration", f.o.Duration, "cache roles: duration of each lock and rate-limit loop")
	fs.IntVar(&f.o.Rounds, "roles-rounds", f.o.Rounds, "cache roles: rounds of every role's points (a pub/sub ladder per round)")
	fs.DurationVar(&f.o.Step, "roles-step", f.o.Step, "cache roles: duration of each pub/sub ladder step")
	fs.IntVar(&f.o.Bisect, "roles-bisect", f.o.Bisect, "cache roles: halvings after each pub/sub ladder, between its last passing and first failing rate")
	fs.DurationVar(&f.o.Lease, "roles-lease", f.o.Lease, "cache roles: lease of the lock handover point")
	fs.StringVar(&f.rates, "roles-rates", joinFloats(f.o.Rates), "cache roles: the pub/sub ladder's publish rates per second, rising, comma-separated")
	fs.StringVar(&f.subs, "roles-subscribers", joinInts(f.o.Subscribers), "cache roles: the pub/sub ladders' subscriber counts, comma-separated")
}

// parse reads the list flags into the options and validates them; a
// command without the flags (demo) keeps its options.
func (f *rolesFlags) parse() error {
	if f.rates == "" && f.subs == "" {
		return nil
	}
	f.o.Rates, f.o.Subscribers = nil, nil
	for _, s := range strings.Split(f.rates, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("-roles-rates %q: %w", f.rates, err)
		}
		f.o.Rates = append(f.o.Rates, v)
	}
	for _, s := range strings.Split(f.subs, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-roles-subscribers %q: %w", f.subs, err)
		}
		f.o.Subscribers = append(f.o.Subscribers, v)
	}
	return f.o.Validate()
}

func joinFloats(vs []float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(out, ",")
}

func joinInts(vs []int) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Itoa(v)
	}
	return strings.Join(out, ",")
}
