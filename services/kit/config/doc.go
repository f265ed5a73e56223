// Package config reads a service's settings from environment variables.
//
// Settings are read only in a service's main, into one Config struct; a
// Reader collects every malformed value so that a service fails at start
// with one message naming each bad variable, instead of running with a
// silently substituted default.
package config
