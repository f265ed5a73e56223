package driver

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Step is one part of a command's plan (a pair's scenarios, the
// event-store bench) as Progress counts it.
type Step struct {
	// Name labels the step's lines ("queue").
	Name string
	// Attacks is how many attacks the step is expected to report (its
	// ceiling searches make this an estimate).
	Attacks int
	// Planned is the step's expected duration.
	Planned time.Duration
}

// Progress reports a command's attacks as they run. On a terminal (Bars)
// each attack redraws a progress bar that is cleared when it ends;
// elsewhere (a CI log, a file) each attack writes one line with its
// outcome once it ends, so that a log holds no carriage-return redraws.
// Either way every attack is labelled with its step, its number in the
// step and the time left, estimated from the plan and corrected by how
// long the steps done so far took against their plan.
type Progress struct {
	w     io.Writer
	bars  bool
	steps []Step
	now   func() time.Time

	mu      sync.Mutex
	start   time.Time
	cur     int           // index in steps; -1 before the first Begin
	n       int           // attacks ended in the current step
	done    time.Duration // planned time of the steps and attacks ended
	perStep time.Duration // planned time of one attack of the current step
}

// NewProgress returns a Progress writing to w, bars on a terminal (bars
// true) or one line per attack, for a command made of steps.
func NewProgress(w io.Writer, bars bool, steps []Step) *Progress {
	return &Progress{w: w, bars: bars, steps: steps, now: time.Now, start: time.Now(), cur: -1}
}

// Bars reports whether p draws progress bars.
func (p *Progress) Bars() bool { return p != nil && p.bars }

// Planned returns the sum of the steps' planned durations.
func (p *Progress) Planned() time.Duration {
	var d time.Duration
	for _, s := range p.steps {
		d += s.Planned
	}
	return d
}

// Begin moves to the step named name (the steps before it count as done,
// whatever they reported) and writes a line saying where the command is.
func (p *Progress) Begin(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = 0
	p.cur = len(p.steps) // an unplanned step: nothing left
	for i, s := range p.steps {
		if s.Name == name {
			p.cur = i
			break
		}
		p.done += s.Planned
	}
	p.n, p.perStep = 0, 0
	if p.cur < len(p.steps) {
		if s := p.steps[p.cur]; s.Attacks > 0 {
			p.perStep = s.Planned / time.Duration(s.Attacks)
		}
	}
	fmt.Fprintf(p.w, "== step %d/%d: %s (%s elapsed, ~%s left)\n", min(p.cur+1, len(p.steps)), len(p.steps), name,
		Human(p.now().Sub(p.start)), Human(p.left()))
}

// left estimates the time left: the planned time not done yet, scaled by
// how long the done part took against its plan (within 0.5× to 3×, so
// one slow service start does not triple the estimate at once).
func (p *Progress) left() time.Duration {
	total := p.Planned()
	rest := total - p.done
	if p.cur < len(p.steps) {
		rest -= time.Duration(min(p.n, p.steps[p.cur].Attacks)) * p.perStep
	}
	if rest < 0 {
		rest = 0
	}
	if done := total - rest; done > 10*time.Second {
		f := float64(p.now().Sub(p.start)) / float64(done)
		rest = time.Duration(float64(rest) * min(max(f, 0.5), 3))
	}
	return rest
}

// label is the prefix of the current attack: "[queue 3/12 · ~4m left]".
func (p *Progress) label() string {
	if p.cur < 0 || p.cur >= len(p.steps) {
		return fmt.Sprintf("[%d]", p.n+1)
	}
	s := p.steps[p.cur]
	return fmt.Sprintf("[%s %d/%d · ~%s left]", s.Name, p.n+1, max(s.Attacks, p.n+1), Human(p.left()))
}

// attackStarted returns the label of the attack about to run.
func (p *Progress) attackStarted() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.label()
}

// attackEnded counts the attack and, without bars, writes its line.
func (p *Progress) attackEnded(label string, spec AttackSpec, r ClientResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.bars {
		return
	}
	fmt.Fprintf(p.w, "%s %s\n", label, Outcome(spec, r))
}

// loopEnded counts a closed loop and writes its line, bars or not: a
// loop has no bar.
func (p *Progress) loopEnded(label string, spec AttackSpec, r ClientResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	fmt.Fprintf(p.w, "%s %s\n", label, Outcome(spec, r))
}

// Outcome is one attack in a line: "no-rabbitmq 500/s 5s: 2500 sent,
// 100% ok, p99 3.1 ms".
func Outcome(spec AttackSpec, r ClientResult) string {
	name := strings.Join(strings.Fields(spec.Name), " ")
	s := fmt.Sprintf("%s %s: %d sent", name, Human(spec.Duration), r.Requests)
	if r.Requests > 0 {
		s += fmt.Sprintf(", %s ok, p99 %s ms", percent(r.OK, r.Requests), fmtMS(r.Latency.P99MS))
	}
	if r.Shed > 0 {
		s += fmt.Sprintf(", %s shed (503 + Retry-After)", percent(r.Shed, r.Requests))
	}
	if r.Late > 0 {
		s += fmt.Sprintf(", %d late (completed after the window)", r.Late)
	}
	if r.InFlight > 0 {
		s += fmt.Sprintf(", %d still in flight after %s (abandoned)", r.InFlight, Human(time.Duration(r.GraceS*float64(time.Second))))
	}
	if r.Errors > 0 && len(r.ErrorSamples) > 0 {
		s += ", e.g. " + clip(r.ErrorSamples[0], 100)
	}
	return s
}

// clip shortens s to at most n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func percent(a, b int64) string {
	v := 100 * float64(a) / float64(b)
	if a != b && v > 99.9 {
		return "99.9%"
	}
	return fmt.Sprintf("%.0f%%", v)
}

func fmtMS(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// Human rounds d for a reader: to a tenth of a second under ten seconds,
// to the second under ten minutes, to the minute above ("500ms", "4m10s",
// "25m").
func Human(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	if d < 10*time.Minute {
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
