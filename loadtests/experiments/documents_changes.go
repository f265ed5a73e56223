package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// changeFeedText is documents-change-feed's prose.
var changeFeedText = Text{
	Title: "Change feed of the documents",
	Happens: "The Postgres side's trigger writes a change row in the writing transaction and its streams read the change table below the xid8 watermark (woken by the service's own writes, polling for others'), so a change appears once its transaction and every older one has ended and a token resumes it exactly; " +
		"MongoDB serves GET /users/changes from change streams on the oplog, which need a replica set (FerretDB has none and answers 501).",
	UserMust: "Resume every stream from the last id it received (Last-Event-ID or ?after=) and treat the feed as at-least-once (make the consumer idempotent by user id); on Postgres keep transactions short, since one long transaction anywhere on the server holds every change behind it.",
	Figure: func(f *Figures) string {
		return feedFigure(f, "pg", "Postgres") + ". " + feedFigure(f, "mongo", "MongoDB side ("+f.StrOr("mongo_server", "server unknown")+")")
	},
	Notes: func(f *Figures) []string {
		return documentsNotes(f, feedNotes(f)...)
	},
}

// feedFigure is one side's figure: its latency at each rate, its lost
// changes and its resume after a kill, or its status when it was not
// measured.
func feedFigure(f *Figures, key, name string) string {
	if st := f.StrOr(key+"_status", ""); st != "" {
		return name + ": " + st
	}
	rates := feedRates(f, key)
	if len(rates) == 0 {
		f.Num(feedRateKey(key, 100).Of(MetricP99MS)) // recorded as missing
		return name + ": no figures"
	}
	var parts []string
	var lost int64
	for _, r := range rates {
		p := feedRateKey(key, r)
		parts = append(parts, fmt.Sprintf("p50 %s ms / p99 %s ms at %s/s", num(f.Num(p.Of(MetricP50MS))), num(f.Num(p.Of(MetricP99MS))), feedThousands(r)))
		lost += f.Int(p.Of(MetricChangesLost))
	}
	return fmt.Sprintf("%s: %s; %d lost; resumed after a kill: %d lost, %d duplicates",
		name, strings.Join(parts, ", "), lost, f.Int(SidePrefix(key+"_").Of(MetricResumeLost)), f.Int(SidePrefix(key+"_").Of(MetricResumeDuplicates)))
}

// feedNotes are the experiment's own notes: the rates offered and
// achieved, the streams and how latency is measured.
func feedNotes(f *Figures) []string {
	var notes []string
	for _, side := range []struct{ key, name string }{{"pg", "Postgres"}, {"mongo", "MongoDB"}} {
		rates := feedRates(f, side.key)
		if len(rates) == 0 {
			continue
		}
		var parts []string
		for _, r := range rates {
			p := feedRateKey(side.key, r)
			parts = append(parts, fmt.Sprintf("%s/s offered, %s/s achieved (%d acknowledged creates)", feedThousands(r), num(f.Num(p.Of(MetricAchievedRate))), f.Int(p.Of(MetricWrites))))
		}
		notes = append(notes, fmt.Sprintf("%s side: %s; resume: %d creates acknowledged at %s/s, %d refused or failed while the service was down (killed with SIGKILL and restarted on its port, ready %.1f s after the kill)",
			side.name, strings.Join(parts, "; "), f.Int(SidePrefix(side.key+"_").Of(MetricResumeAcked)), num(f.Num(SidePrefix(side.key+"_").Of(MetricResumeRate))), f.Int(SidePrefix(side.key+"_").Of(MetricResumeFailedWrites)), f.Num(SidePrefix(side.key+"_").Of(MetricResumeOutageSeconds))))
	}
	return append(notes,
		"latency is from just before each POST /users is sent to the arrival of its insert on one open SSE stream (no token), the writer, the stream and both services on the same machine; each rate is an open-loop writer of 32 concurrent requests, a warm-up at the same rate discarded at full size",
		"lost = an acknowledged create (201) whose insert did not arrive within 10 s after the load; the resume opens a new stream with ?after=<the last token the first stream received before the kill> and reads until 3 s pass without a change; a duplicate is a user whose insert arrived on both streams (or twice on one): the feed is at-least-once",
		fmt.Sprintf("the Postgres side's streams poll every %s ms for changes of other writers besides being woken by their own service's commits; the watermark (pg_snapshot_xmin) is the whole server's, shared with whatever else runs on it", num(f.Num(MetricPGPollIntervalMS))))
}

// feedRates are the rates the result holds latency for on side key,
// ascending.
func feedRates(f *Figures, key string) []int {
	var rates []int
	for _, k := range f.Names(driver.MetricPrefix(key+"_r"), "_"+string(MetricP99MS)) {
		if r, err := strconv.Atoi(k); err == nil {
			rates = append(rates, r)
		}
	}
	slices.Sort(rates)
	return rates
}

// feedRateKey is the prefix of side key's metrics at rate writes/s.
func feedRateKey(key string, rate int) SidePrefix {
	return SidePrefix(key + "_r" + strconv.Itoa(rate) + "_")
}

// feedThousands writes n with a comma between thousands (1,000).
func feedThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// feedPlan is how long and how fast documents-change-feed writes.
type feedPlan struct {
	rates       []int
	dur, warmup time.Duration
	resumeRate  int
	resumeDur   time.Duration
}

// Bounds of documents-change-feed's writers and streams.
const (
	feedWorkers      = 32
	feedWriteTimeout = 5 * time.Second
	feedDrain        = 10 * time.Second
	feedQuiet        = 3 * time.Second
	feedOpenTimeout  = 10 * time.Second
	feedPoll         = 500 * time.Millisecond
)

// changeFeedPlan is size's plan.
func changeFeedPlan(size Size) feedPlan {
	if size == Full {
		return feedPlan{rates: []int{100, 1000}, dur: 20 * time.Second, warmup: 3 * time.Second, resumeRate: 200, resumeDur: 4 * time.Second}
	}
	return feedPlan{rates: []int{100, 300}, dur: 3 * time.Second, resumeRate: 100, resumeDur: 4 * time.Second}
}

// feedKey is side's prefix in the metric names.
func feedKey(side string) string {
	if side == sidePG {
		return "pg"
	}
	return "mongo"
}

// feedEnv is the settings side starts with (the same at every start):
// the Postgres side's poll interval, explicit.
func feedEnv(side string) map[string]string {
	if side == sidePG {
		return map[string]string{"CHANGES_POLL_INTERVAL": feedPoll.String()}
	}
	return nil
}

// documentsChangeFeed measures GET /users/changes on both sides: the
// delay from a create to its insert on an open stream at each rate, the
// acknowledged creates whose insert never arrives, and a stream resumed
// after its service is killed. A side that answers 501 (FerretDB) is
// recorded as not measured; the Postgres side must measure.
func documentsChangeFeed(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	plan := changeFeedPlan(size)
	rig, err := newDocRig(ctx, env, "feed", 2)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	res := Result{Name: DocumentsChangeFeed, Metrics: map[driver.Metric]float64{}}
	res.metric(MetricPGPollIntervalMS, float64(feedPoll.Milliseconds()))
	run := feedRun{env: env, rig: rig, plan: plan, res: &res}
	var lost int64
	for _, side := range []string{sidePG, sideMongo} {
		n, err := run.measureSide(ctx, side)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", side, err)
		}
		lost += n
	}
	res.AckedLost = lost
	documentsSettings(ctx, &res, rig)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// feedRun is one run of documents-change-feed: its environment (the
// log), the services' rig, the plan, and the result it records in.
type feedRun struct {
	// env logs the run's progress.
	env Env
	// rig starts, kills and stops each side's service.
	rig *docRig
	// plan is how long and how fast the run writes.
	plan feedPlan
	// res is the result the figures are recorded in.
	res *Result
}

// measureSide starts side, probes its change feed and, unless it
// answers 501, measures each rate and the resume; it returns the
// acknowledged creates whose change was lost.
func (fr feedRun) measureSide(ctx context.Context, side string) (int64, error) {
	env, rig, plan, res := fr.env, fr.rig, fr.plan, fr.res
	key := feedKey(side)
	base, err := rig.start(ctx, side, feedEnv(side))
	if err != nil {
		return 0, err
	}
	defer func() { _ = rig.stop(side) }()
	probe, err := openFeed(ctx, base, "")
	var refused *feedRefusal
	switch {
	case errors.As(err, &refused) && refused.status == http.StatusNotImplemented && side != sidePG:
		res.setting(key+"_status", "not measured: "+refused.msg)
		env.logf("%s: %s: GET /users/changes answers 501: %s", DocumentsChangeFeed, side, refused.msg)
		return 0, nil
	case err != nil:
		return 0, err
	}
	probe.close()
	var lost int64
	for _, rate := range plan.rates {
		n, err := fr.latency(ctx, base, rate, key)
		if err != nil {
			return 0, fmt.Errorf("%d writes/s: %w", rate, err)
		}
		lost += n
	}
	n, err := fr.resume(ctx, side, base)
	if err != nil {
		return 0, fmt.Errorf("resume after a kill: %w", err)
	}
	return lost + n, nil
}

// latency opens a stream on base, writes at rate for the plan's warm-up
// and duration, waits for every acknowledged insert (feedDrain at most)
// and records the latency of those sent after the warm-up under the
// side's key; it returns the acknowledged creates whose insert never
// arrived.
func (fr feedRun) latency(ctx context.Context, base string, rate int, key string) (int64, error) {
	env, plan, res := fr.env, fr.plan, fr.res
	s, err := openFeed(ctx, base, "")
	if err != nil {
		return 0, err
	}
	defer s.close()
	w := writeFeedUsers(ctx, base, rate, plan.warmup+plan.dur, "r"+strconv.Itoa(rate))
	acked := w.ackedSends()
	lost := s.awaitInserts(ctx, acked, feedDrain)
	from := w.began.Add(plan.warmup)
	var lat []float64
	writes, warm := 0, 0
	for id, sent := range acked {
		if sent.Before(from) {
			warm++
			continue
		}
		writes++
		if at, ok := s.arrival(id); ok {
			lat = append(lat, float64(at.Sub(sent).Microseconds())/1000)
		}
	}
	if len(lat) == 0 {
		return 0, fmt.Errorf("no insert arrived on the stream (%d creates acknowledged, %d failed: %s; stream: %v)", writes, w.failed, w.firstErr, s.endErr())
	}
	slices.Sort(lat)
	p := feedRateKey(key, rate)
	res.metric(p.Of(MetricP50MS), feedQuantile(lat, 0.50))
	res.metric(p.Of(MetricP99MS), feedQuantile(lat, 0.99))
	res.metric(p.Of(MetricMaxMS), lat[len(lat)-1])
	res.metric(p.Of(MetricWrites), float64(writes))
	res.metric(p.Of(MetricWarmupWrites), float64(warm))
	res.metric(p.Of(MetricFailedWrites), float64(w.failed))
	res.metric(p.Of(MetricNotSent), float64(w.notSent))
	res.metric(p.Of(MetricChangesLost), float64(lost))
	res.metric(p.Of(MetricDuplicates), float64(s.repeatCount()))
	res.metric(p.Of(MetricOfferedRate), float64(rate))
	res.metric(p.Of(MetricAchievedRate), float64(writes)/plan.dur.Seconds())
	env.logf("%s: %s at %d/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d creates (%d failed), %d lost",
		DocumentsChangeFeed, key, rate, feedQuantile(lat, 0.50), feedQuantile(lat, 0.99), lat[len(lat)-1], writes, w.failed, lost)
	return lost, nil
}

// feedQuantile is the q quantile of sorted (nearest rank).
func feedQuantile(sorted []float64, q float64) float64 {
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// resume opens a stream on side's base, writes at the plan's resume
// rate and, in the middle, kills side and starts it again; then it
// opens a second stream after the last token the first received, reads
// it until quiet and records what neither stream delivered and what
// both did.
func (fr feedRun) resume(ctx context.Context, side, base string) (int64, error) {
	env, plan, res := fr.env, fr.plan, fr.res
	s1, err := openFeed(ctx, base, "")
	if err != nil {
		return 0, err
	}
	defer s1.close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	writer := make(chan *feedWrites, 1)
	go func() { writer <- writeFeedUsers(wctx, base, plan.resumeRate, plan.resumeDur, "resume") }()
	s2, outage, err := fr.killRestart(ctx, side, base, plan.resumeDur/2, s1)
	if err != nil {
		cancel()
		<-writer
		return 0, err
	}
	defer s2.close()
	w := <-writer
	s2.awaitQuiet(ctx, feedQuiet, 3*feedDrain)
	var lost, both int64
	for id := range w.ackedSends() {
		_, in1 := s1.arrival(id)
		_, in2 := s2.arrival(id)
		switch {
		case in1 && in2:
			both++
		case !in1 && !in2:
			lost++
		}
	}
	key := feedKey(side)
	acked := len(w.ackedSends())
	res.metric(SidePrefix(key+"_").Of(MetricResumeAcked), float64(acked))
	res.metric(SidePrefix(key+"_").Of(MetricResumeLost), float64(lost))
	res.metric(SidePrefix(key+"_").Of(MetricResumeDuplicates), float64(both+s1.repeatCount()+s2.repeatCount()))
	res.metric(SidePrefix(key+"_").Of(MetricResumeFailedWrites), float64(w.failed))
	res.metric(SidePrefix(key+"_").Of(MetricResumeRate), float64(plan.resumeRate))
	res.metric(SidePrefix(key+"_").Of(MetricResumeOutageSeconds), outage.Seconds())
	res.metric(SidePrefix(key+"_").Of(MetricResumeBeforeKill), float64(s1.insertCount()))
	res.metric(SidePrefix(key+"_").Of(MetricResumeAfterRestart), float64(s2.insertCount()))
	env.logf("%s: %s resume: %d creates acknowledged (%d failed), %d before the kill, %d after; %d lost, %d on both streams",
		DocumentsChangeFeed, key, acked, w.failed, s1.insertCount(), s2.insertCount(), lost, both)
	return lost, nil
}

// killRestart waits after, kills side (SIGKILL), waits for s1 to end,
// starts side again and opens a stream on base after s1's last token;
// it returns that stream and how long the side was down.
func (fr feedRun) killRestart(ctx context.Context, side, base string, after time.Duration, s1 *feedStream) (*feedStream, time.Duration, error) {
	rig := fr.rig
	select {
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-time.After(after):
	}
	killed := time.Now()
	if err := rig.kill(side); err != nil {
		return nil, 0, err
	}
	select {
	case <-s1.done:
	case <-time.After(feedOpenTimeout):
		return nil, 0, errors.New("the stream did not end when its service was killed")
	}
	token := s1.lastToken()
	if _, err := rig.start(ctx, side, feedEnv(side)); err != nil {
		return nil, 0, err
	}
	outage := time.Since(killed)
	s2, err := openFeed(ctx, base, token)
	if err != nil {
		return nil, 0, fmt.Errorf("resuming after %s: %w", token, err)
	}
	return s2, outage, nil
}

// feedWrites is what one open-loop writer did: when each acknowledged
// create was sent, by the user id it answered, and how many failed or
// were never sent (every worker busy).
type feedWrites struct {
	began    time.Time
	mu       sync.Mutex
	sent     map[string]time.Time
	failed   int64
	notSent  int64
	firstErr string
}

// writeFeedUsers creates users on base at rate per second for d, open
// loop: a request is due every 1/rate s from the start, whatever the
// answers, and feedWorkers workers send them (a due request finding
// every worker busy and the queue full is counted as not sent).
func writeFeedUsers(ctx context.Context, base string, rate int, d time.Duration, tag string) *feedWrites {
	w := &feedWrites{began: time.Now(), sent: map[string]time.Time{}}
	jobs := make(chan int, 4*feedWorkers)
	var wg sync.WaitGroup
	prefix := uniqueName("feed-" + tag)
	for range feedWorkers {
		wg.Go(func() {
			for i := range jobs {
				w.create(ctx, base, prefix+"-"+strconv.Itoa(i)+"@example.com")
			}
		})
	}
	interval := time.Second / time.Duration(rate)
	n := int(d / interval)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if wait := time.Until(w.began.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case jobs <- i:
		default:
			w.mu.Lock()
			w.notSent++
			w.mu.Unlock()
		}
	}
	close(jobs)
	wg.Wait()
	return w
}

// create sends one POST /users and records its send time under the id it
// answered, or counts it failed.
func (w *feedWrites) create(ctx context.Context, base, email string) {
	ctx, cancel := context.WithTimeout(ctx, feedWriteTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"email": email, "name": "feed", "plan": "free", "profile": map[string]any{"n": 1, "tag": "change-feed"}})
	at := time.Now()
	code, b, err := driver.Do(ctx, http.MethodPost, base+"/users", body)
	var u struct {
		ID string `json:"id"`
	}
	if err == nil && code == http.StatusCreated {
		err = json.Unmarshal(b, &u)
	} else if err == nil {
		err = fmt.Errorf("%d %s", code, strings.TrimSpace(string(b)))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || u.ID == "" {
		w.failed++
		if w.firstErr == "" {
			w.firstErr = fmt.Sprintf("POST /users: %v", err)
		}
		return
	}
	w.sent[u.ID] = at
}

// ackedSends is a copy of the acknowledged creates' send times.
func (w *feedWrites) ackedSends() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.sent))
	for id, at := range w.sent {
		out[id] = at
	}
	return out
}

// feedRefusal is a GET /users/changes answered with an error status
// instead of a stream.
type feedRefusal struct {
	status int
	msg    string
}

// Error names the status and the answer's message.
func (e *feedRefusal) Error() string {
	return fmt.Sprintf("GET /users/changes: %d %s", e.status, e.msg)
}

// feedStream is one open GET /users/changes: a goroutine reads it and
// records when each user's insert first arrived.
type feedStream struct {
	open   string // the token of its "open" event
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream has ended

	mu       sync.Mutex
	inserts  map[string]time.Time
	repeats  int64 // inserts of a user this stream had already sent
	last     string
	lastAt   time.Time
	errEvent string
	err      error
}

// feedClient opens the streams: no overall timeout, which would cut them.
var feedClient = &http.Client{}

// openFeed opens GET base/users/changes after token ("" = from now) and
// waits for its "open" event; an error status is a *feedRefusal.
func openFeed(ctx context.Context, base, after string) (*feedStream, error) {
	u := base + "/users/changes"
	if after != "" {
		u += "?after=" + url.QueryEscape(after)
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	timer := time.AfterFunc(feedOpenTimeout, cancel)
	resp, err := feedClient.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET /users/changes: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return nil, feedRefused(resp)
	}
	r := sse.NewReader(resp.Body)
	m, err := r.Next()
	timer.Stop()
	var o struct{ Token string }
	if err == nil && (m.Event != "open" || json.Unmarshal([]byte(m.Data), &o) != nil || o.Token == "") {
		err = fmt.Errorf("first event %q %s, want open with a token", m.Event, m.Data)
	}
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET /users/changes: %w", err)
	}
	s := &feedStream{open: o.Token, cancel: cancel, done: make(chan struct{}), inserts: map[string]time.Time{}}
	go s.run(r, resp.Body)
	return s, nil
}

// feedRefused reads an error answer's {"error": ...} message.
func feedRefused(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return &feedRefusal{status: resp.StatusCode, msg: msg}
}

// run reads the stream until it ends.
func (s *feedStream) run(r *sse.Reader, body io.Closer) {
	defer close(s.done)
	defer body.Close()
	for {
		m, err := r.Next()
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		s.take(m, time.Now())
	}
}

// take records message m, arrived at at.
func (s *feedStream) take(m sse.Message, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Event {
	case "error":
		s.errEvent = m.Data
	case "change":
		var c documents.Change
		if err := json.Unmarshal([]byte(m.Data), &c); err != nil {
			s.errEvent = "unreadable change " + m.Data
			return
		}
		s.last, s.lastAt = c.Token, at
		if c.Op != documents.OpInsert {
			return
		}
		if _, seen := s.inserts[c.ID]; seen {
			s.repeats++
		} else {
			s.inserts[c.ID] = at
		}
	}
}

// close ends the stream and waits for its reader.
func (s *feedStream) close() {
	s.cancel()
	<-s.done
}

// arrival is when user id's insert first arrived, if it did.
func (s *feedStream) arrival(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.inserts[id]
	return at, ok
}

// lastToken is the token of the last change received, or the open
// token when none was.
func (s *feedStream) lastToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == "" {
		return s.open
	}
	return s.last
}

// insertCount is how many users' inserts arrived; repeatCount how many
// arrived again.
func (s *feedStream) insertCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inserts)
}

// repeatCount is how many inserts arrived for a user already seen.
func (s *feedStream) repeatCount() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repeats
}

// endErr says why the stream ended or failed, nil while it runs.
func (s *feedStream) endErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errEvent != "" {
		return fmt.Errorf("error event %s (then %v)", s.errEvent, s.err)
	}
	return s.err
}

// awaitInserts waits up to wait for the inserts of every id in acked
// (less if the stream ends) and returns how many never arrived.
func (s *feedStream) awaitInserts(ctx context.Context, acked map[string]time.Time, wait time.Duration) int64 {
	deadline := time.Now().Add(wait)
	for {
		var missing int64
		for id := range acked {
			if _, ok := s.arrival(id); !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return missing
		}
		select {
		case <-s.done:
			return missing
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitQuiet reads on until quiet has passed since the last change (or
// since now, when the last was earlier), at most limit in all.
func (s *feedStream) awaitQuiet(ctx context.Context, quiet, limit time.Duration) {
	from, deadline := time.Now(), time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s.mu.Lock()
		last := s.lastAt
		s.mu.Unlock()
		if last.Before(from) {
			last = from
		}
		if time.Since(last) >= quiet {
			return
		}
		select {
		case <-s.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
