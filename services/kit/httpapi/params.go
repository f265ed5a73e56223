package httpapi

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// DurationPattern is the pattern of a duration query parameter, as the
// OpenAPI documents write it: one or more decimal numbers (at most nine
// digits before and after the point), each with a unit among ns, us, ms,
// s, m and h ("5s", "1m30s", "250ms"). It is a subset of Go's
// time.ParseDuration syntax without signs or "µs", so that a generated
// client and the service agree on every value.
const DurationPattern = `^([0-9]{1,9}(\.[0-9]{1,9})?(ns|us|ms|s|m|h))+$`

// SecondsPattern is the pattern of a duration parameter that may also be
// a bare number of seconds ("5", "0.25").
const SecondsPattern = `^[0-9]{1,9}(\.[0-9]{1,9})?$`

var (
	durationRE = regexp.MustCompile(DurationPattern)
	secondsRE  = regexp.MustCompile(SecondsPattern)
)

// DurationSpec is what DurationParam admits of one query parameter.
type DurationSpec struct {
	// Default is the value when the parameter is absent; a value is
	// clamped to [Min, Max].
	Default, Min, Max time.Duration
	// Seconds also admits a bare number of seconds (SecondsPattern).
	Seconds bool
}

// DurationParam reads the query parameter name of r as a duration:
// spec.Default when it is absent, a 400 when it matches neither
// DurationPattern nor (with spec.Seconds) SecondsPattern, else the value
// clamped to [spec.Min, spec.Max]. A value too large for a time.Duration
// is spec.Max. Clamping rather than refusing keeps every value the
// pattern admits valid, as the OpenAPI document promises.
func DurationParam(r *http.Request, name string, spec DurationSpec) (time.Duration, error) {
	lo, hi, seconds := spec.Min, spec.Max, spec.Seconds
	vs, ok := r.URL.Query()[name]
	if !ok {
		return spec.Default, nil
	}
	// ?timeout= (empty) or a repeated parameter does not match the
	// pattern: it is refused, not read as absent.
	v := strings.Join(vs, ",")
	var d time.Duration
	switch {
	case durationRE.MatchString(v):
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			d = hi // the syntax matched: the value overflows
		}
	case seconds && secondsRE.MatchString(v):
		n, _ := strconv.ParseFloat(v, 64)
		if n*float64(time.Second) >= float64(hi) {
			d = hi
		} else {
			d = time.Duration(n * float64(time.Second))
		}
	default:
		example := "5s, 500ms"
		if seconds {
			example += " or 5 (seconds)"
		}
		return 0, BadRequest("query parameter %s must be a duration such as %s, got %q", name, example, Truncate(v, 64))
	}
	return min(max(d, lo), hi), nil
}

// Truncate shortens s to at most n bytes (on a rune boundary) with "..."
// appended, so that an error text never echoes a client's megabytes.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// TextPattern is the OpenAPI pattern of a required text field: no U+0000
// (Postgres text cannot store it) and at least one character that is not
// white space (unicode.IsSpace, which strings.TrimSpace strips). The
// documents spell it in YAML with escapes that give the same characters.
const TextPattern = "^[^\x00]*[^\x00\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\x00]*$"

// Text checks the required text field name of a request: at most maxLen
// characters (code points, as JSON Schema's maxLength counts them, before
// trimming), no U+0000 and not blank. It returns s without leading and
// trailing white space; prefix names the element of a batch ("tasks[3].").
func Text(prefix, name, s string, maxLen int) (string, error) {
	switch {
	case utf8.RuneCountInString(s) > maxLen:
		return "", BadRequest("%s%s is longer than %d characters", prefix, name, maxLen)
	case strings.ContainsRune(s, 0):
		return "", BadRequest("%s%s must not contain U+0000 (Postgres text cannot store it)", prefix, name)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return "", BadRequest("%s%s is required and must not be blank", prefix, name)
	}
	return t, nil
}

// PathParam returns the route parameter name of r, percent-decoded: chi
// matches on the escaped path when the request has one, so "H%3AA" would
// otherwise reach a handler as is, and a valid id sent with an escaped
// character would be refused. A segment that does not decode is returned
// as sent (and fails the handler's own check).
func PathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}

// UUIDParam returns the route parameter name of r (PathParam) as a UUID in
// lower case (ids.Parse). When it is not a UUID, it returns the error
// invalid makes of the value as sent, shortened to 64 bytes (Truncate):
// each contract says whether that is a 400 or a 404.
func UUIDParam(r *http.Request, name string, invalid func(sent string) error) (string, error) {
	v := PathParam(r, name)
	if id, ok := ids.Parse(v); ok {
		return id, nil
	}
	return "", invalid(Truncate(v, 64))
}
