// Package config reads a service's settings from environment variables.
//
// Settings are read only in a service's main, into one Config struct; a
// Reader collects every malformed value so that a service fails at start
// with one message naming each bad variable, instead of running with a
// silently substituted default.
//
// When a variable is renamed, the service declares the old name with
// Reader.Rename before reading the new one: the old name keeps working for
// now, and the service logs one warning at start naming old and new
// (Reader.Deprecations). The Reader also remembers every variable it was
// asked for, with its default (Reader.Vars): that is the config's
// description of itself, which a test compares with the docs' env tables
// (configtest.CheckDocs), so a default is written once, as a Default*
// constant, and the docs cannot drift from it.
package config
