package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// The broker-side faults of the outage tests (a connection closed by the
// broker, a virtual host deleted) go through the management API of the
// stack's broker (RABBITMQ_MANAGEMENT_URL), or, when the test's
// environment sets RABBITMQ_CTL, through that rabbitmqctl command line
// (split on spaces): the cluster profile's nodes run no management
// plugin, so make test-cluster-brokers sets it to `bash
// scripts/cluster.sh rabbitmqctl rmq1` (root). Virtual hosts and
// connections are the whole cluster's, whichever node is asked.

// ctlCommand is RABBITMQ_CTL's words, or nil when it is unset.
func ctlCommand() []string {
	if f := strings.Fields(kittest.Env("RABBITMQ_CTL", "")); len(f) > 0 {
		return f
	}
	return nil
}

// runCtl runs RABBITMQ_CTL with args (within 30 s) and returns its
// output; a failure fails t unless quiet.
func runCtl(t testing.TB, quiet bool, args ...string) string {
	t.Helper()
	ctl := ctlCommand()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ctl[0], append(ctl[1:], args...)...).CombinedOutput()
	if err != nil && !quiet {
		t.Fatalf("RABBITMQ_CTL %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// vhost is a RabbitMQ virtual host of the test's own: deleting it closes
// every connection to it and refuses new ones, a broker outage for this
// test's service alone (the broker stays up for the other tests).
type vhost struct {
	mgmt, name string
	client     *http.Client
	ctl        bool // through RABBITMQ_CTL, not the management API
}

func newVhost(t testing.TB) vhost {
	t.Helper()
	v := vhost{name: kittest.UniqueName(t, "vh"), ctl: ctlCommand() != nil}
	if !v.ctl {
		v.mgmt = kittest.Server(t, "RABBITMQ_MANAGEMENT_URL", "http://guest:guest@localhost:15672")
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	v.create(t)
	t.Cleanup(func() { v.delete(t, true) })
	return v
}

// create makes the virtual host and gives guest every permission on it.
func (v vhost) create(t testing.TB) {
	t.Helper()
	if v.ctl {
		runCtl(t, false, "add_vhost", v.name)
		runCtl(t, false, "set_permissions", "-p", v.name, "guest", ".*", ".*", ".*")
		return
	}
	v.call(t, http.MethodPut, "/api/vhosts/"+url.PathEscape(v.name), "{}", false)
	v.call(t, http.MethodPut, "/api/permissions/"+url.PathEscape(v.name)+"/guest", `{"configure":".*","write":".*","read":".*"}`, false)
}

// delete deletes the virtual host; quiet ignores a failure (the cleanup's
// delete of a host already gone).
func (v vhost) delete(t testing.TB, quiet bool) {
	t.Helper()
	if v.ctl {
		runCtl(t, quiet, "delete_vhost", v.name)
		return
	}
	v.call(t, http.MethodDelete, "/api/vhosts/"+url.PathEscape(v.name), "", quiet)
}

func (v vhost) call(t testing.TB, method, path, body string, quiet bool) {
	t.Helper()
	req, _ := http.NewRequest(method, v.mgmt+path, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := v.client.Do(req)
	switch {
	case err != nil && !quiet:
		t.Fatalf("management API %s %s: %v", method, path, err)
	case err != nil:
	case resp.StatusCode/100 != 2 && !(quiet && resp.StatusCode == http.StatusNotFound):
		resp.Body.Close()
		t.Fatalf("management API %s %s: %d", method, path, resp.StatusCode)
	default:
		resp.Body.Close()
	}
}

// amqpURL is base (RABBITMQ_URL's form: each node's URL, comma-separated)
// on the vhost.
func (v vhost) amqpURL(base string) string {
	var out []string
	for u := range strings.SplitSeq(base, ",") {
		out = append(out, strings.TrimSuffix(strings.TrimSpace(u), "/")+"/"+url.PathEscape(v.name))
	}
	return strings.Join(out, ",")
}

// brokerConnection waits until the broker lists the AMQP connection
// called name and returns a function that force-closes it, as a broker
// restart or a network cut would (the client sees CONNECTION_FORCED, not
// its own Close).
func brokerConnection(t testing.TB, name string) (closeIt func()) {
	t.Helper()
	if ctlCommand() != nil {
		return ctlConnection(t, name)
	}
	mgmt := kittest.Server(t, "RABBITMQ_MANAGEMENT_URL", "http://guest:guest@localhost:15672")
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(45 * time.Second) // the management API lists new connections after its stats interval
	for {
		resp, err := client.Get(mgmt + "/api/connections?columns=name,client_properties.connection_name")
		if err != nil {
			t.Fatal(err)
		}
		var conns []struct {
			Name  string `json:"name"`
			Props struct {
				ConnectionName string `json:"connection_name"`
			} `json:"client_properties"`
		}
		err = json.NewDecoder(resp.Body).Decode(&conns)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("management API: %v", err)
		}
		for _, c := range conns {
			if c.Props.ConnectionName == name {
				return func() { deleteConnection(t, client, mgmt, c.Name) }
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection %q not listed by the management API", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func deleteConnection(t testing.TB, client *http.Client, mgmt, name string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, mgmt+"/api/connections/"+url.PathEscape(name), nil)
	req.Header.Set("X-Reason", "test: connection loss")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return
	}
	// The broker refuses (500, not_a_connection) to close a connection
	// whose process is gone while its statistics still list it: the
	// client closed it first (a service drops a connection whose channel
	// a killed queue broke). Gone is what the caller wanted; a connection
	// still open after 10 s is a failure.
	status := resp.StatusCode
	kittest.Eventually(t, 10*time.Second, fmt.Sprintf("connection %s closed (the broker answered %d to its close)", name, status), func() bool {
		resp, err := client.Get(mgmt + "/api/connections/" + url.PathEscape(name))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	})
}

// ctlConnection is brokerConnection through RABBITMQ_CTL: list_connections
// prints each connection's pid and client properties, among them
// {"connection_name","<name>"}; close_connection takes the pid.
func ctlConnection(t testing.TB, name string) (closeIt func()) {
	t.Helper()
	want := `{"connection_name","` + name + `"}`
	deadline := time.Now().Add(45 * time.Second)
	for {
		out := runCtl(t, false, "list_connections", "-q", "--no-table-headers", "pid", "client_properties")
		for line := range strings.SplitSeq(out, "\n") {
			pid, props, ok := strings.Cut(line, "\t")
			if ok && strings.Contains(props, want) {
				return func() { runCtl(t, false, "close_connection", pid, "test: connection loss") }
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection %q not listed by RABBITMQ_CTL list_connections", name)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
