package experiments

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Text is an experiment's prose, kept in code beside the experiment and
// joined with its figures when the report renders (Describe): a results
// file holds figures, statuses and settings only, so rewording a
// sentence needs no new run.
type Text struct {
	// Title names the experiment in the table.
	Title string
	// Happens says what happens, in one sentence.
	Happens string
	// UserMust says what the user must do about it.
	UserMust string
	// Figure is the measured figure in words, made from a result's
	// metrics and settings.
	Figure func(f *Figures) string
	// Notes say what the figure depends on, made from the same.
	Notes func(f *Figures) []string
	// Card is the experiment's clause on its pair's card (the documents
	// pair's experiments beyond CRUD have one: CardClauses), made from
	// the same; nil for none. It must be true read alone.
	Card func(f *Figures) string
}

// Prose is what the report prints for one result: its experiment's Text
// joined with the result's figures.
type Prose struct {
	Title, Happens, Figure, UserMust string
	Notes                            []string
	// Missing names the figures the text needed and the result lacks;
	// Figure then says so instead of printing them as 0.
	Missing []string
}

// Figures reads one result's metrics and settings for a Text and records
// each one it asks for and the result lacks.
type Figures struct {
	r       Result
	missing []string
}

// Num is metric k (0, recorded as missing, when the result lacks it).
func (f *Figures) Num(k driver.Metric) float64 {
	v, ok := f.r.Metrics[k]
	if !ok {
		f.miss(string(k))
	}
	return v
}

// Int is metric k as an integer.
func (f *Figures) Int(k driver.Metric) int64 { return int64(f.Num(k)) }

// Has reports whether the result holds metric k, without recording it
// as missing.
func (f *Figures) Has(k driver.Metric) bool {
	_, ok := f.r.Metrics[k]
	return ok
}

// Str is setting k ("" and recorded as missing when the result lacks it).
func (f *Figures) Str(k string) string {
	v, ok := f.r.Settings[k]
	if !ok {
		f.miss(k)
	}
	return v
}

// StrOr is setting k, or d when the result lacks it (not an error).
func (f *Figures) StrOr(k, d string) string {
	if v, ok := f.r.Settings[k]; ok {
		return v
	}
	return d
}

// Names are the parts between prefix and suffix of the metric keys that
// start with prefix and end with suffix, in the keys' sorted order.
func (f *Figures) Names(prefix driver.MetricPrefix, suffix string) []string {
	var ks []string
	for k := range f.r.Metrics {
		if strings.HasPrefix(string(k), string(prefix)) && strings.HasSuffix(string(k), suffix) && len(k) >= len(prefix)+len(suffix) {
			ks = append(ks, string(k))
		}
	}
	sort.Strings(ks)
	for i, k := range ks {
		ks[i] = strings.TrimSuffix(strings.TrimPrefix(k, string(prefix)), suffix)
	}
	return ks
}

// Result is the result being rendered.
func (f *Figures) Result() Result { return f.r }

func (f *Figures) miss(k string) {
	if !slices.Contains(f.missing, k) {
		f.missing = append(f.missing, k)
	}
}

// textOf is the Text of the experiment named name, if Known has it.
func textOf(name string) (Text, bool) {
	for _, x := range Known() {
		if x.Name == name {
			return x.Text, true
		}
	}
	return Text{}, false
}

// Describe joins r with its experiment's Text. Title, Happens and
// UserMust always come from the code (a result of an experiment no
// longer known keeps its own, from a file that holds them). The figure
// and notes are rendered from r's metrics and settings; a result read
// from a file written before schema 2, which holds its figure as a
// sentence, keeps that sentence and its notes verbatim. A result that
// could not measure (Error) has no figure; one that lacks a figure its
// text needs has a Figure saying which.
func Describe(r Result) Prose {
	t, known := textOf(r.Name)
	return describe(r, t, known)
}

// describe is Describe with the experiment's Text t (known: r's
// experiment has one).
func describe(r Result, t Text, known bool) Prose {
	p := Prose{Title: r.Title, Happens: r.Happens, UserMust: r.UserMust}
	if known {
		p.Title, p.Happens, p.UserMust = t.Title, t.Happens, t.UserMust
	}
	switch {
	case r.Figure != "" || len(r.Notes) > 0:
		// Schema 1: the prose was written with the figures.
		p.Figure, p.Notes = r.Figure, r.Notes
	case r.Error != "" || !known:
		// No figure: the report says why.
	default:
		f := &Figures{r: r}
		if t.Figure != nil {
			p.Figure = t.Figure(f)
		}
		if t.Notes != nil {
			p.Notes = t.Notes(f)
		}
		if len(f.missing) > 0 {
			p.Missing = f.missing
			p.Figure = "failed: the results file lacks " + missingText(f.missing)
			p.Notes = nil
		}
	}
	return p
}

// CardClauses are the card clauses (Text.Card) of f's results, in the
// file's order: a result that could not measure, or lacks a figure its
// clause reads, gives "<title>: failed: <why>" instead of a figure.
func CardClauses(f *File) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, r := range f.Results {
		t, known := textOf(r.Name)
		if !known || t.Card == nil {
			continue
		}
		if r.Error != "" {
			out = append(out, t.Title+": failed: "+r.Error)
			continue
		}
		fig := &Figures{r: r}
		c := t.Card(fig)
		if len(fig.missing) > 0 {
			c = t.Title + ": failed: the results file lacks " + missingText(fig.missing)
		}
		out = append(out, c)
	}
	return out
}

// secondsDur is a figure in seconds as a duration, rounded to the
// nanosecond (0.3 s prints as 300ms, not 299.999999ms).
func secondsDur(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Second))) }

// msDur is a figure in milliseconds as a duration.
func msDur(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }

// missingText names the first three of missing, and how many there are
// when there are more.
func missingText(missing []string) string {
	if len(missing) <= 3 {
		return strings.Join(missing, ", ")
	}
	return fmt.Sprintf("%s, … (%d figures in all)", strings.Join(missing[:3], ", "), len(missing))
}

// caseFigures is each of cases' figure in words (figure), joined by
// "; ": the figure of an experiment of several cases.
func caseFigures[C any](f *Figures, cases []C, figure func(*Figures, C) string) string {
	var figs []string
	for _, c := range cases {
		figs = append(figs, figure(f, c))
	}
	return strings.Join(figs, "; ")
}
