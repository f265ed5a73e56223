package driver

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The states of a measured value (Status.State).
const (
	// StateOK is a value measured by a valid point.
	StateOK = "ok"
	// StateFailed is a point that ran but whose figures mean nothing:
	// too many errors, no metrics, nothing answered, the run aborted.
	StateFailed = "failed"
	// StateNotRun is a point or side that was never measured.
	StateNotRun = "not run"
	// StateStandIn is a valid measurement of a stand-in for the system
	// named (FerretDB answering as MongoDB): its figures say nothing about
	// the system it stands in for.
	StateStandIn = "stand-in"
	// StateSkipped is a side the scenario leaves out by design, with the
	// reason (the MongoDB side of the lz4 points, which only change a
	// Postgres setting): it has no figures, and it is not a failure.
	StateSkipped = "skipped"
	// StateInvalid is a point (or a ceiling) whose starting state was not
	// the one its scenario declares: a precondition proven before it
	// failed (a replication slot gigabytes behind, a queue not empty, a
	// table not at its size). Its figures are not the system's at that
	// load, so none is printed, compared or used by a claim.
	StateInvalid = "invalid"
)

// FailShare is the share of a phase's requests that may fail (non-2xx
// answers and transport errors, sheds apart) before the side's point is
// failed.
const FailShare = 0.01

// abortedNote is the prefix of the note runs written before Run.Aborted
// existed carry when their command ended early.
const abortedNote = "run ended early: "

// Status is the validity of a measured value: State is one of the
// State* constants, Reason says why it is not ok (the error share, the
// missing metrics, the stand-in).
type Status struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// OK reports whether the value is a valid measurement (ok or stand-in):
// its figures may be printed.
func (s Status) OK() bool { return s.State == StateOK || s.State == StateStandIn || s.State == "" }

// String is the status in words: "ok", "failed: 96% of requests 503".
func (s Status) String() string {
	if s.State == "" {
		return StateOK
	}
	if s.Reason == "" {
		return s.State
	}
	return s.State + ": " + s.Reason
}

// Failed returns a failed status with reason.
func Failed(format string, args ...any) Status {
	return Status{State: StateFailed, Reason: fmt.Sprintf(format, args...)}
}

// RoundStatus decides one side's round: failed when the side could not
// be measured, recorded no metric, or a phase sent nothing, had nothing
// accepted, or failed FailShare or more of its requests.
func RoundStatus(s *SideResult) Status {
	switch {
	case s == nil:
		return Status{State: StateNotRun, Reason: "no result recorded"}
	case s.Precondition != "":
		return Status{State: StateInvalid, Reason: "precondition: " + firstLine(s.Precondition)}
	case s.Error != "":
		return Failed("%s", firstLine(s.Error))
	case len(s.Metrics) == 0 && len(s.Phases) == 0:
		return Failed("no metrics recorded")
	}
	for _, ph := range s.Phases {
		c := ph.Client
		switch {
		case c.Requests == 0:
			return Failed("%s sent no request", ph.Name)
		case float64(c.Errors) >= FailShare*float64(c.Requests):
			return Failed("%s of %s requests failed (%s)", pct(float64(c.Errors)/float64(c.Requests)), ph.Name, codesText(c))
		case c.OK == 0:
			return Failed("no %s request was accepted (%s)", ph.Name, codesText(c))
		}
	}
	return Status{State: StateOK}
}

// pct formats a share as a whole percentage, never "0%" for a share
// above zero.
func pct(share float64) string {
	p := 100 * share
	if p > 0 && p < 1 {
		return "<1%"
	}
	return strconv.FormatFloat(float64(int(p+0.5)), 'f', 0, 64) + "%"
}

// codesText describes a phase's non-2xx answers, most frequent first:
// "24 transport errors (timeout), 1 answered 503".
func codesText(c ClientResult) string {
	type kv struct {
		code string
		n    int64
	}
	var cs []kv
	for k, n := range c.Codes {
		if !strings.HasPrefix(k, "2") && n > 0 {
			cs = append(cs, kv{k, n})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].n != cs[j].n {
			return cs[i].n > cs[j].n
		}
		return cs[i].code < cs[j].code
	})
	var parts []string
	for _, x := range cs {
		if x.code == "0" {
			what := "transport errors"
			if slices.ContainsFunc(c.ErrorSamples, func(s string) bool {
				s = strings.ToLower(s)
				return strings.Contains(s, "timeout") || strings.Contains(s, "deadline")
			}) {
				what += " (timeouts)"
			}
			parts = append(parts, fmt.Sprintf("%d %s", x.n, what))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d answered %s", x.n, x.code))
	}
	if len(parts) == 0 {
		return "no answer code recorded"
	}
	return strings.Join(parts, ", ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// sideStatus decides one side of a point from its rounds: failed when any
// round failed (every round is part of the figures), naming the rounds.
func sideStatus(p *Point, side string) Status {
	if len(p.Rounds) == 0 {
		return Status{State: StateNotRun, Reason: "no round was measured"}
	}
	var bad []string
	var first Status
	n := 0
	for _, r := range p.Rounds {
		sr, ok := r.Sides[side]
		if !ok {
			continue
		}
		n++
		if st := RoundStatus(sr); !st.OK() {
			if len(bad) == 0 {
				first = st
			}
			bad = append(bad, strconv.Itoa(r.Index))
			if sr.Status == nil {
				sr.Status = &st
			}
		}
	}
	switch {
	case n == 0:
		return Status{State: StateNotRun, Reason: "this side was not measured"}
	case len(bad) == 0:
		return Status{State: StateOK}
	case len(bad) == n && n > 1:
		return Status{State: first.State, Reason: first.Reason + " (every round)"}
	case n == 1:
		return first
	}
	return Status{State: first.State, Reason: fmt.Sprintf("%s (round %s of %d)", first.Reason, strings.Join(bad, ", "), n)}
}

// AbortReason is the reason the run ended early, from Aborted or, in files
// written before it existed, from the note the command left; "" when it
// ran to the end.
func (r *Run) AbortReason() string {
	if r.Aborted != "" {
		return firstLine(r.Aborted)
	}
	for _, n := range r.Notes {
		if rest, ok := strings.CutPrefix(n, abortedNote); ok {
			return firstLine(rest)
		}
	}
	return ""
}

// standIn returns the stand-in reason of a side of r ("" when it runs
// the system it is named after): the mongodb side on FerretDB.
func standIn(r *Run, side string) string {
	if side == pairs.MongoDB && r.Versions.MongoFlavor == "FerretDB" {
		return "FerretDB standing in for MongoDB"
	}
	return ""
}

// Validate fills the Status of every point's sides and every ceiling
// that has none, from what was recorded: response codes, missing metrics,
// empty rounds, the run's abort and stand-ins. Files written before
// statuses existed are judged by the same rules when they are read
// (ReadRun), so that an old file renders as honestly as a new one.
func (r *Run) Validate() {
	aborted := r.AbortReason()
	for i := range r.Points {
		p := &r.Points[i]
		if p.Status == nil {
			p.Status = map[string]Status{}
		}
		for _, side := range p.Sides {
			if _, ok := p.Status[side]; ok {
				continue
			}
			st := sideStatus(p, side)
			if st.State == StateNotRun && aborted != "" {
				st = Failed("the run aborted before this point was measured (%s)", aborted)
			}
			if st.State == StateOK {
				if why := standIn(r, side); why != "" {
					st = Status{State: StateStandIn, Reason: why}
				}
			}
			p.Status[side] = st
		}
	}
	for i := range r.Ceilings {
		c := &r.Ceilings[i]
		if c.Status != nil {
			continue
		}
		c.Status = ceilingStatus(c, aborted)
	}
}

// ceilingStatus decides a ceiling search from its rounds: not run, or
// failed by an abort, without rounds; invalid when fewer than a majority
// of its rounds ran from a proven start (CeilingRound.Invalid); failed
// when no step of any valid round passed and one of them ended on an
// error rather than on a judged step. A search whose judged steps all
// failed is valid: the side passed no rate it was offered, which the
// report says with the lowest rate tried.
func ceilingStatus(c *Ceiling, aborted string) *Status {
	st := Status{State: StateOK}
	valid, invalid := 0, ""
	for _, r := range c.Rounds {
		if r.Invalid != "" {
			if invalid == "" {
				invalid = r.Invalid
			}
			continue
		}
		valid++
	}
	switch {
	case len(c.Rounds) == 0 && aborted != "":
		st = Failed("the run aborted before this search (%s)", aborted)
	case len(c.Rounds) == 0:
		st = Status{State: StateNotRun, Reason: "no search ran"}
	case valid < len(c.Rounds)/2+1:
		st = Status{State: StateInvalid, Reason: fmt.Sprintf("precondition: %s (%d of %d ceiling searches started from a proven state)", firstLine(invalid), valid, len(c.Rounds))}
	case !slices.ContainsFunc(c.Rounds, func(cr CeilingRound) bool { return cr.Rate > 0 }) && slices.ContainsFunc(c.Rounds, endedOnError):
		st = Failed("no step passed in any round")
	}
	return &st
}

// endedOnError reports whether a search's last step could not be judged:
// it recorded why without failing any criterion.
func endedOnError(r CeilingRound) bool {
	if len(r.Steps) == 0 {
		return true
	}
	last := r.Steps[len(r.Steps)-1]
	return !last.Pass && len(last.Failed) == 0
}

// FailSide marks side of p failed before it is measured, with reason
// (its setup failed: the users it needs could not be created, its
// service would not start). RunPoint and RunPoints then skip that side,
// the other sides are still measured, and Validate keeps the reason.
func (p *Point) FailSide(side string, reason string) {
	if p.Status == nil {
		p.Status = map[string]Status{}
	}
	p.Status[side] = Failed("%s", firstLine(reason))
}

// SkipSide marks side of p as left out by design (StateSkipped), before
// its rounds run: RunPoints does not measure it.
func (p *Point) SkipSide(side string, reason string) {
	if p.Status == nil {
		p.Status = map[string]Status{}
	}
	p.Status[side] = Status{State: StateSkipped, Reason: reason}
}

// SetupFailed reports whether side of p was failed by FailSide (or any
// status other than ok recorded before its rounds ran, SkipSide's too).
func (p *Point) SetupFailed(side string) bool {
	st, ok := p.Status[side]
	return ok && !st.OK()
}

// SideStatus returns the status of side in p (ok when p has none
// recorded and was never validated).
func (p *Point) SideStatus(side string) Status {
	if p == nil {
		return Status{State: StateNotRun, Reason: "no such point"}
	}
	if st, ok := p.Status[side]; ok {
		return st
	}
	return Status{State: StateOK}
}

// CeilingStatus returns c's status (ok when never validated).
func (c *Ceiling) CeilingStatus() Status {
	if c == nil {
		return Status{State: StateNotRun, Reason: "no ceiling search"}
	}
	if c.Status != nil {
		return *c.Status
	}
	return Status{State: StateOK}
}

// FailedPoint is one side of one point (or one ceiling) whose status is
// not ok, with the run it belongs to.
type FailedPoint struct {
	Run         string
	Scenario    ScenarioName
	Point, Side string
	Status      Status
}

// String names the point and says why: "documents documents.search
// 2000 users, mongodb: failed: ...".
func (f FailedPoint) String() string {
	return fmt.Sprintf("%s %s %s, %s: %s", f.Run, f.Scenario, f.Point, f.Side, f.Status)
}

// FailedPoints lists every failed or not-run side of every point and
// ceiling of runs (validated first); stand-ins are valid and not listed,
// nor are sides skipped by design.
func FailedPoints(runs []*Run) []FailedPoint {
	var out []FailedPoint
	for _, r := range runs {
		if r == nil {
			continue
		}
		r.Validate()
		for i := range r.Points {
			p := &r.Points[i]
			for _, side := range p.Sides {
				if st := p.SideStatus(side); !st.OK() && st.State != StateSkipped {
					out = append(out, FailedPoint{Run: r.ID, Scenario: p.Scenario, Point: p.Name, Side: side, Status: st})
				}
			}
		}
		for i := range r.Ceilings {
			c := &r.Ceilings[i]
			if st := c.CeilingStatus(); !st.OK() {
				out = append(out, FailedPoint{Run: r.ID, Scenario: c.Scenario, Point: "ceiling", Side: c.Service, Status: st})
			}
		}
	}
	return out
}
