package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// RateScenario declares a scenario of fixed rates, a ceiling search and
// an environment variant (the queue and log pairs): what it sends, to
// which pair, how a ceiling step is judged, which environment the
// variant restarts the services with, and the options it runs with by
// default.
type RateScenario struct {
	// Pair is the pair driven, Load what each request is.
	Pair Pair
	Load Load
	// CeilingLatency names the server-side latency whose p99 bounds a
	// ceiling step ("processing" is send→processed, "delivery").
	CeilingLatency string
	// CeilingAck names the server-side latency of the request's own
	// answer ("send", "write"), bounded by the same p99 as
	// CeilingLatency (empty: not judged).
	CeilingAck string
	// Variant names the variant in scenarios and settings ("durable",
	// "sync_off"; its flag spells _ as -), VariantEnv its environment per
	// service.
	Variant    string
	VariantEnv map[string]map[string]string
	// Extras are further variants measured with the variant, at its rate,
	// after it (the queue pair's outbox): each restarts the services with
	// its own environment.
	Extras []Extra
	// CeilingEnv is the environment the main ceiling search restarts each
	// side with, beside MAX_IN_FLIGHT: the settings under which the two
	// sides give the same guarantee (the queue pair: transient messages
	// that the reconciler republishes against an UNLOGGED queue table,
	// both rebuilt from the durable task records after a crash).
	CeilingEnv map[string]map[string]string
	// CeilingDesigns are further ceiling searches, each of the sides its
	// Env names, restarted with it (scenario <pair>.<Name>.ceiling): the
	// same guarantee at a higher price, the specialist alone, and the
	// tuning table's before and after.
	CeilingDesigns []Extra
	// Defaults are the options the pair's command starts from.
	Defaults RateOptions
}

// Extra is a further environment variant of a rate scenario: its point is
// named <pair>.<Name> and measures both sides, each with Env[side] (a side
// missing from Env runs with its defaults).
type Extra struct {
	Name string
	Env  map[string]map[string]string
}

// VariantFlag is the command-line flag that switches the variant on or
// off ("durable", "sync-off").
func (s RateScenario) VariantFlag() string { return strings.ReplaceAll(s.Variant, "_", "-") }

// Validate says what is missing or inconsistent in a declared scenario.
func (s RateScenario) Validate() error {
	var errs []error
	if s.Pair.Name == "" || s.Pair.A.Name == "" || s.Pair.B.Name == "" || s.Pair.Progress == "" || len(s.Pair.In) == 0 || len(s.Pair.Out) == 0 {
		errs = append(errs, fmt.Errorf("pair %q: sides, progress endpoint and backlog counters are required", s.Pair.Name))
	}
	if s.Load.Phase == "" || !strings.HasPrefix(s.Load.Path, "/") || s.Load.Body == nil {
		errs = append(errs, fmt.Errorf("%s: load needs a phase, a path and a body", s.Pair.Name))
	} else if !json.Valid(s.Load.Body(0)) {
		errs = append(errs, fmt.Errorf("%s: load body is not JSON: %s", s.Pair.Name, s.Load.Body(0)))
	}
	if s.CeilingLatency == "" || s.Variant == "" {
		errs = append(errs, fmt.Errorf("%s: ceiling latency and variant name are required", s.Pair.Name))
	}
	envs := []map[string]map[string]string{s.VariantEnv, s.CeilingEnv}
	names := map[string]bool{"rate": true, "default": true, "ceiling": true, s.Variant: true}
	designs := map[string]bool{}
	for _, x := range s.CeilingDesigns {
		envs = append(envs, x.Env)
		if x.Name == "" || designs[x.Name] || len(x.Env) == 0 || strings.Contains(x.Name, ".") {
			errs = append(errs, fmt.Errorf("%s: ceiling design %q needs a name of its own without a dot and an environment", s.Pair.Name, x.Name))
		}
		designs[x.Name] = true
	}
	for _, x := range s.Extras {
		envs = append(envs, x.Env)
		if x.Name == "" || names[x.Name] || len(x.Env) == 0 {
			errs = append(errs, fmt.Errorf("%s: extra variant %q needs a name of its own and an environment", s.Pair.Name, x.Name))
		}
		names[x.Name] = true
	}
	for _, env := range envs {
		for svc := range env {
			if svc != s.Pair.A.Name && svc != s.Pair.B.Name {
				errs = append(errs, fmt.Errorf("%s: variant environment for %q, not a side of the pair", s.Pair.Name, svc))
			}
		}
	}
	d := s.Defaults
	if len(d.Rates) == 0 || d.VariantRate <= 0 {
		errs = append(errs, fmt.Errorf("%s: default rates and variant rate are required", s.Pair.Name))
	}
	errs = append(errs, d.CeilingOpts.validate(s.Pair.Name+": default ceiling"))
	return errors.Join(errs...)
}

// validate says why c cannot run a search (nil: it can), each reason
// after what ("queue: default ceiling").
func (c CeilingOptions) validate(what string) error {
	var errs []error
	if c.Start <= 0 || c.Factor <= 1 || c.Max < c.Start || c.Step <= 0 || c.Rounds < 1 || c.P99 <= 0 {
		errs = append(errs, fmt.Errorf("%s %+v cannot climb", what, c))
	}
	if c.Warmup < 0 || c.MaxInFlight < LeaveInFlight || c.MaxInFlight > maxInFlight {
		errs = append(errs, fmt.Errorf("%s warm-up %s (0 or more) or MAX_IN_FLIGHT %d (%d to %d) out of range",
			what, c.Warmup, c.MaxInFlight, LeaveInFlight, maxInFlight))
	}
	return errors.Join(errs...)
}
