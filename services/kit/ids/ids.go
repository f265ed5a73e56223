package ids

import "github.com/google/uuid"

// New returns a new version 7 UUID in canonical lower-case form. It panics
// only if the system's random source fails, as crypto/rand does.
func New() string {
	return uuid.Must(uuid.NewV7()).String()
}

// Parse reports whether s is a UUID in canonical form, in any case, and
// returns it in lower case.
func Parse(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// Valid reports whether s is a UUID in canonical form, in any case (see
// Parse).
func Valid(s string) bool {
	_, ok := Parse(s)
	return ok
}
