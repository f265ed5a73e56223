package log

import (
	"fmt"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

// ConsumeGroupsVar is the variable both log services read ConsumeGroups
// from; AllGroups is its default, every group.
const ConsumeGroupsVar, AllGroups = "CONSUME_GROUPS", "*"

// ConsumeGroups is the non-default groups one instance consumes
// (CONSUME_GROUPS): every group (AllGroups, the zero value) or the groups
// listed. A group not listed is created, listed and deleted by the
// instance like any other, and its set-up (its slot, cursor or committed
// start) done there, but no consumer of it is started there: another
// instance consumes it, or none, and it lags meanwhile. The default group
// is always consumed: listing it changes nothing, so "default" alone
// consumes no other group.
type ConsumeGroups struct {
	// names are the groups listed, in order; nil means every group.
	names []string
}

// ParseConsumeGroups parses CONSUME_GROUPS: "*" (every group) or group
// names separated by commas, each following GroupNameRule, none twice.
// Spaces around an element are ignored; an empty value is "*".
func ParseConsumeGroups(s string) (ConsumeGroups, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == AllGroups {
		return ConsumeGroups{}, nil
	}
	var names []string
	for i, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return ConsumeGroups{}, fmt.Errorf("element %d is empty (want %q or group names separated by commas)", i+1, AllGroups)
		case name == AllGroups:
			return ConsumeGroups{}, fmt.Errorf("%q stands alone: it means every group", AllGroups)
		case !groupRE.MatchString(name):
			return ConsumeGroups{}, fmt.Errorf("element %d %q: %s", i+1, name, GroupNameRule)
		case slices.Contains(names, name):
			return ConsumeGroups{}, fmt.Errorf("group %q is listed twice", name)
		}
		names = append(names, name)
	}
	return ConsumeGroups{names: names}, nil
}

// ReadConsumeGroups reads CONSUME_GROUPS (default AllGroups) and records
// an error naming it when the value does not parse.
func ReadConsumeGroups(r *config.Reader) ConsumeGroups {
	c, err := ParseConsumeGroups(r.String(ConsumeGroupsVar, AllGroups))
	if err != nil {
		r.Fail(ConsumeGroupsVar, "%v", err)
	}
	return c
}

// Has reports whether the instance consumes group name: always for the
// default group and with AllGroups, else when it is listed.
func (c ConsumeGroups) Has(name string) bool {
	return c.names == nil || name == DefaultGroup || slices.Contains(c.names, name)
}

// String is the value as ParseConsumeGroups reads it back.
func (c ConsumeGroups) String() string {
	if c.names == nil {
		return AllGroups
	}
	return strings.Join(c.names, ",")
}
