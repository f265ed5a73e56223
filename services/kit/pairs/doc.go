// Package pairs is the pair table: every service of every comparison, with
// its pair, its side, its backend and its default HTTP port, and the
// stack's backends with the variable that points at each and its default
// URL.
//
// It is the one place these are written. The services take their default
// ADDR and their /stats names from it, the load driver its targets and
// ports, and kittest its default backend URLs; scripts/stackcheck tests
// that the backends' ports agree with scripts/ports.env and
// docker-compose.yml.
package pairs
