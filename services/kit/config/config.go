package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LookupFunc looks up one variable, as os.LookupEnv does.
type LookupFunc func(name string) (string, bool)

// Reader reads typed values from environment variables. Each method returns
// the default when the variable is unset or empty, and records an error that
// names the variable when its value cannot be parsed. Call Err once after
// reading every field. A Reader is not safe for concurrent use.
type Reader struct {
	lookup  LookupFunc
	errs    []error
	vars    []Var
	renames map[string]string // new name -> old name
	used    map[string]string // new name -> the old name its value came from
	notes   []Deprecation
}

// Var is one variable a Reader was asked for: the config's description of
// itself, which tests compare with the documentation.
type Var struct {
	// Name is the variable's (current) name.
	Name string
	// Kind is how the value is parsed: string, int, bytes, duration, bool,
	// enum, url, urls (a comma-separated list) or loglevel.
	Kind string
	// Default is the default, formatted as the docs write it ("10s",
	// "1MiB", "8").
	Default string
}

// Deprecation reports a variable set under an old name.
type Deprecation struct {
	// Old is the name that was set; New is the name to use instead.
	Old, New string
	// Ignored is true when New was set too, so Old's value was not used.
	Ignored bool
}

// String is the warning a service logs at start.
func (d Deprecation) String() string {
	if d.Ignored {
		return fmt.Sprintf("%s is deprecated and ignored because %s is set; unset %s", d.Old, d.New, d.Old)
	}
	return fmt.Sprintf("%s is deprecated; rename it to %s", d.Old, d.New)
}

// FromEnv returns a Reader over the process environment.
func FromEnv() *Reader { return New(os.LookupEnv) }

// FromMap returns a Reader over a fixed map, for tests.
func FromMap(m map[string]string) *Reader {
	return New(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// New returns a Reader over lookup.
func New(lookup LookupFunc) *Reader { return &Reader{lookup: lookup} }

// Rename declares that the variable now called newName used to be called
// oldName. Call it before reading newName: while newName is unset, a value
// set under oldName is used; either way, setting oldName records a
// Deprecation (see Deprecations), which the service logs once at start.
func (r *Reader) Rename(oldName, newName string) {
	if r.renames == nil {
		r.renames = map[string]string{}
	}
	r.renames[newName] = oldName
}

// Deprecations returns the old names that were set, in the order read.
func (r *Reader) Deprecations() []Deprecation { return slices.Clone(r.notes) }

// Vars returns every variable read so far, with its kind and default, in
// the order read; a variable read twice is listed once.
func (r *Reader) Vars() []Var { return slices.Clone(r.vars) }

func (r *Reader) get(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// raw returns the value of name, falling back to its old name, and records
// the read under kind with the formatted default def.
func (r *Reader) raw(name, kind, def string) (string, bool) {
	if !slices.ContainsFunc(r.vars, func(v Var) bool { return v.Name == name }) {
		r.vars = append(r.vars, Var{Name: name, Kind: kind, Default: def})
	}
	v, ok := r.get(name)
	old, renamed := r.renames[name]
	if !renamed {
		return v, ok
	}
	ov, oldSet := r.get(old)
	if !oldSet || slices.ContainsFunc(r.notes, func(d Deprecation) bool { return d.Old == old }) {
		if !ok && oldSet {
			return ov, true
		}
		return v, ok
	}
	r.notes = append(r.notes, Deprecation{Old: old, New: name, Ignored: ok})
	if ok {
		return v, true
	}
	if r.used == nil {
		r.used = map[string]string{}
	}
	r.used[name] = old
	return ov, true
}

// Fail records an error about the variable name; validate functions use it
// for values that parse but are out of range. When the value came from
// the variable's old name, the message names both.
func (r *Reader) Fail(name, format string, args ...any) {
	label := name
	if old, ok := r.used[name]; ok {
		label = fmt.Sprintf("%s (set as %s)", name, old)
	}
	r.errs = append(r.errs, fmt.Errorf("%s: %s", label, fmt.Sprintf(format, args...)))
}

// String returns the variable's value or def.
func (r *Reader) String(name, def string) string {
	if v, ok := r.raw(name, "string", def); ok {
		return v
	}
	return def
}

// Int returns the variable parsed as a base-10 integer, or def.
func (r *Reader) Int(name string, def int) int {
	return parseVar(r, name, def, codec[int]{kind: "int", format: strconv.Itoa, parse: strconv.Atoi, bad: "%q is not an integer"})
}

// Bytes returns a size such as 1048576, 512KiB, 2MiB or 2MB, or def.
func (r *Reader) Bytes(name string, def int64) int64 {
	return parseVar(r, name, def, codec[int64]{kind: "bytes", format: FormatBytes, parse: ParseBytes})
}

// Duration returns the variable parsed by time.ParseDuration ("200ms",
// "5s"), or def.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	return parseVar(r, name, def, codec[time.Duration]{kind: "duration", format: time.Duration.String, parse: time.ParseDuration,
		bad: "%q is not a duration (examples: 200ms, 5s, 1m)"})
}

// Bool returns the variable parsed by strconv.ParseBool, or def.
func (r *Reader) Bool(name string, def bool) bool {
	return parseVar(r, name, def, codec[bool]{kind: "bool", format: strconv.FormatBool, parse: strconv.ParseBool,
		bad: "%q is not a boolean (true or false)"})
}

// Enum returns the variable's value if it is one of allowed, or def.
func (r *Reader) Enum(name, def string, allowed ...string) string {
	return parseVar(r, name, def, codec[string]{kind: "enum", format: identity, parse: func(v string) (string, error) {
		if !slices.Contains(allowed, v) {
			return "", fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
		}
		return v, nil
	}})
}

// URL returns the variable if it parses as an absolute URL with one of the
// given schemes, or def. The error never echoes the value, which may hold a
// password.
func (r *Reader) URL(name, def string, schemes ...string) string {
	return parseVar(r, name, def, codec[string]{kind: "url", format: identity, parse: func(v string) (string, error) {
		return v, checkURL(v, schemes)
	}})
}

// URLs returns the variable as a comma-separated list of URLs, each with
// one of schemes (any when none is given), or def's list: the nodes of a
// cluster, for example, tried in turn. Spaces around an entry are
// dropped. An empty entry or one that is not such a URL fails, naming
// its place in the list and never echoing the value (a URL may hold a
// password). A comma inside one URL must be percent-encoded (%2C).
func (r *Reader) URLs(name, def string, schemes ...string) []string {
	join := func(v []string) string { return strings.Join(v, ",") }
	return parseVar(r, name, splitList(def), codec[[]string]{kind: "urls", format: join, parse: func(v string) ([]string, error) {
		list := splitList(v)
		for i, u := range list {
			if err := checkURL(u, schemes); err != nil {
				return nil, fmt.Errorf("entry %d of %d: %w", i+1, len(list), err)
			}
		}
		return list, nil
	}})
}

// splitList splits a comma-separated list, trimming each entry.
func splitList(v string) []string {
	list := strings.Split(v, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	return list
}

// checkURL fails when v is not a URL with one of schemes (any when none
// is given); its message does not echo v.
func checkURL(v string, schemes []string) error {
	if v == "" {
		return errors.New("empty")
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" {
		return errors.New("not a URL")
	}
	if len(schemes) > 0 && !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("scheme %q is not one of %s", u.Scheme, strings.Join(schemes, ", "))
	}
	return nil
}

// LogLevel returns the variable parsed as a slog level (debug, info, warn,
// error), or def.
func (r *Reader) LogLevel(name string, def slog.Level) slog.Level {
	format := func(l slog.Level) string { return strings.ToLower(l.String()) }
	return parseVar(r, name, def, codec[slog.Level]{kind: "loglevel", format: format, parse: func(v string) (l slog.Level, err error) {
		return l, l.UnmarshalText([]byte(v))
	}, bad: "%q is not a log level (debug, info, warn, error)"})
}

// codec is how a typed read names, formats and parses its type.
type codec[T any] struct {
	// kind names the type in the reads' record ("int", "url").
	kind string
	// format writes a default; parse reads a value.
	format func(T) string
	parse  func(string) (T, error)
	// bad is the message of a value that does not parse, its one verb
	// the value; empty: parse's error, which must then not echo a
	// secret.
	bad string
}

// parseVar is every typed read: it records the read under c.kind with
// def formatted by c.format, and returns def when the variable is unset
// or does not parse. A value that does not parse fails with c.bad or
// c.parse's error.
func parseVar[T any](r *Reader, name string, def T, c codec[T]) T {
	v, ok := r.raw(name, c.kind, c.format(def))
	if !ok {
		return def
	}
	x, err := c.parse(v)
	switch {
	case err == nil:
		return x
	case c.bad == "":
		r.Fail(name, "%v", err)
	default:
		r.Fail(name, c.bad, v)
	}
	return def
}

func identity(s string) string { return s }

// Err returns every recorded problem joined, or nil.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(r.errs...))
}

// ParseBytes parses a byte size: a plain integer, or an integer followed by
// one of B, KB, KiB, MB, MiB, GB, GiB (decimal and binary units alike).
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("%q is not a size (examples: 1048576, 512KiB, 2MiB)", s)
	}
	mult := map[string]int64{
		"": 1, "B": 1, "KB": 1000, "KiB": 1 << 10, "MB": 1000 * 1000, "MiB": 1 << 20,
		"GB": 1000 * 1000 * 1000, "GiB": 1 << 30,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q has an unknown unit %q (use B, KB, KiB, MB, MiB, GB, GiB)", s, unit)
	}
	return n * mult, nil
}

// FormatBytes formats n as ParseBytes reads it, in the largest binary unit
// that divides it exactly: 1048576 is "1MiB", 65536 "64KiB", 1000 "1000".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
