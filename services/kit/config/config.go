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
	lookup LookupFunc
	errs   []error
}

// FromEnv returns a Reader over the process environment.
func FromEnv() *Reader { return New(os.LookupEnv) }

// FromMap returns a Reader over a fixed map, for tests.
func FromMap(m map[string]string) *Reader {
	return New(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// New returns a Reader over lookup.
func New(lookup LookupFunc) *Reader { return &Reader{lookup: lookup} }

func (r *Reader) raw(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// Fail records an error about the variable name; validate functions use it
// for values that parse but are out of range.
func (r *Reader) Fail(name, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// String returns the variable's value or def.
func (r *Reader) String(name, def string) string {
	if v, ok := r.raw(name); ok {
		return v
	}
	return def
}

// Int returns the variable parsed as a base-10 integer, or def.
func (r *Reader) Int(name string, def int) int {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.Fail(name, "%q is not an integer", v)
		return def
	}
	return n
}

// Bytes returns a size such as 1048576, 512KiB, 2MiB or 2MB, or def.
func (r *Reader) Bytes(name string, def int64) int64 {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	n, err := ParseBytes(v)
	if err != nil {
		r.Fail(name, "%v", err)
		return def
	}
	return n
}

// Duration returns the variable parsed by time.ParseDuration ("200ms",
// "5s"), or def.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.Fail(name, "%q is not a duration (examples: 200ms, 5s, 1m)", v)
		return def
	}
	return d
}

// Bool returns the variable parsed by strconv.ParseBool, or def.
func (r *Reader) Bool(name string, def bool) bool {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.Fail(name, "%q is not a boolean (true or false)", v)
		return def
	}
	return b
}

// Enum returns the variable's value if it is one of allowed, or def.
func (r *Reader) Enum(name, def string, allowed ...string) string {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	if !slices.Contains(allowed, v) {
		r.Fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

// URL returns the variable if it parses as an absolute URL with one of the
// given schemes, or def. The error never echoes the value, which may hold a
// password.
func (r *Reader) URL(name, def string, schemes ...string) string {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" {
		r.Fail(name, "not a URL")
		return def
	}
	if len(schemes) > 0 && !slices.Contains(schemes, u.Scheme) {
		r.Fail(name, "scheme %q is not one of %s", u.Scheme, strings.Join(schemes, ", "))
		return def
	}
	return v
}

// LogLevel returns the variable parsed as a slog level (debug, info, warn,
// error), or def.
func (r *Reader) LogLevel(name string, def slog.Level) slog.Level {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		r.Fail(name, "%q is not a log level (debug, info, warn, error)", v)
		return def
	}
	return l
}

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
