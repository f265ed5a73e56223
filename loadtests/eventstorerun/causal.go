package eventstorerun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// causal runs the causal experiment in `make results`, after
// the bench's scenarios, at its default sizes, with the bench's
// Postgres, brokers and results folder; its instances are started
// through env's launcher.
func causal(ctx context.Context, env *scenario.Env, bench eventstore.Options) error {
	o := eventstore.DefaultCausalOptions()
	o.Out, o.DatabaseURL, o.KafkaBrokers, o.KeyedPartitions = bench.Out, bench.DatabaseURL, bench.KafkaBrokers, max(bench.KeyedPartitions, 2)
	_, err := eventstore.RunCausal(ctx, o, CausalLauncher(env), os.Stderr)
	return err
}

// CausalLauncher starts the experiment's instances through env's
// launcher, each with the service's environment from env and the
// side's own on top, on its port plus env's offset.
func CausalLauncher(env *scenario.Env) eventstore.CausalLauncher {
	return func(ctx context.Context, s eventstore.CausalSide) (string, func(), error) {
		if env.Launcher == nil {
			return "", nil, errors.New("the causal experiment starts instances of its own on fresh stores, which -start=never forbids")
		}
		port := s.Port + env.PortOffset
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		client := &http.Client{Timeout: time.Second}
		if resp, err := client.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			return "", nil, fmt.Errorf("port %d is already served by another process: the experiment's %s needs it", port, s.Instance)
		}
		e := maps.Clone(env.ServiceEnv[s.Service])
		if e == nil {
			e = map[string]string{}
		}
		maps.Copy(e, s.Env)
		timeout := env.ReadyTimeout
		if timeout == 0 {
			timeout = 90 * time.Second
		}
		if _, err := env.Launcher.Start(ctx, s.Instance, port, e, timeout); err != nil {
			return "", nil, err
		}
		stop := func() {
			if err := env.Launcher.Stop(s.Instance, 30*time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "eventstore causal: %v\n", err)
			}
		}
		return url, stop, nil
	}
}
