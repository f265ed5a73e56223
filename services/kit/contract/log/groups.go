package log

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// Consumer groups: each group receives every event once, on its own
// position. The default group is the one every service has from its
// start: GET /events/{id}/wait without ?group= waits for it.
const (
	// DefaultGroup is the name of the group that exists from the start;
	// it cannot be deleted.
	DefaultGroup = "default"
	// DefaultMaxGroups is MAX_GROUPS' default: how many groups (the
	// default one included) a service accepts; MaxMaxGroups is its largest
	// accepted value.
	DefaultMaxGroups, MaxMaxGroups = 16, 1000
	// FromEarliest starts a new group at the oldest event the log still
	// holds; FromLatest at the first event written after PUT answered.
	FromEarliest, FromLatest = "earliest", "latest"
)

// GroupNameRule is the rule a group name follows, as the 400 says it.
const GroupNameRule = "a group name is 1-32 characters of a-z, 0-9 and _, starting with a letter"

// GroupPattern is GroupNameRule as a pattern, as the OpenAPI document
// states it.
const GroupPattern = `^[a-z][a-z0-9_]{0,31}$`

var groupRE = regexp.MustCompile(GroupPattern)

// ValidGroup returns a 400 naming GroupNameRule unless name follows it.
func ValidGroup(name string) error {
	if !groupRE.MatchString(name) {
		return httpapi.BadRequest("group %q: %s", httpapi.Truncate(name, 64), GroupNameRule)
	}
	return nil
}

// GroupSpec is the body of PUT /groups/{name}.
type GroupSpec struct {
	// From is "earliest" or "latest".
	From string `json:"from"`
}

// GroupSpecOf is the answer to PUT /groups/{name}: the group's name and
// where it started.
type GroupSpecOf struct {
	// Name is the group's name.
	Name string `json:"name"`
	// From is "earliest" or "latest".
	From string `json:"from"`
}

// Group is one group as GET /groups shows it.
type Group struct {
	// Name is the group's name.
	Name string `json:"name"`
	// From is where the group started: "earliest" or "latest".
	From string `json:"from"`
	// Ready is false while a group created from earliest replays the
	// events written before it (no-kafka: from the messages table).
	Ready bool `json:"ready"`
	// Running is true while this instance's consumer of the group streams.
	Running bool `json:"running"`
	// Position is where the group has confirmed it is: the committed
	// offsets summed on Kafka, its slot's confirmed_flush_lsn on Postgres
	// (its cursor's txid/seq in deliveries with GROUPS_DESIGN=cursors),
	// an index in memory. Empty before the group's first position exists.
	Position string `json:"position"`
	// LagEvents is how many events the group has still to receive, or
	// null when the side cannot know it (Unknown says why).
	LagEvents *int64 `json:"lag_events"`
	// LagBytes is how far behind the group is in bytes (WAL on Postgres),
	// or null when the side cannot know it (Unknown says why).
	LagBytes *int64 `json:"lag_bytes"`
	// Unknown names each lag field that is null, with the reason.
	Unknown map[string]string `json:"unknown,omitempty"`
	// Slot is the group's replication slot (no-kafka only; none for a
	// cursor group).
	Slot *SlotStatus `json:"slot,omitempty"`
	// KafkaGroup is the Kafka consumer group id (kafka only).
	KafkaGroup string `json:"kafka_group,omitempty"`
}

// GroupList is the answer to GET /groups.
type GroupList struct {
	// Groups are the groups, by name.
	Groups []Group `json:"groups"`
	// MaxGroups is how many groups the service accepts (MAX_GROUPS).
	MaxGroups int `json:"max_groups"`
}

// GroupRow is a group as the groups table records it.
type GroupRow struct {
	Name, From string
	// Ready is set once a group from earliest has replayed the events
	// written before it (a latest or default group is ready at once).
	Ready bool
	// CreatedAt is when the group was created.
	CreatedAt time.Time
}

// GroupBackend is what a Backend implements for consumer groups. Names are
// validated by the handler before these are called.
type GroupBackend interface {
	// PutGroup creates the group (created true) or finds it with the same
	// from (created false); a group of the name with another from is an
	// error wrapping httpapi.ErrConflict, as is one past MaxGroups.
	PutGroup(ctx context.Context, name, from string) (created bool, err error)
	// Groups lists every group with its position and lag.
	Groups(ctx context.Context) (GroupList, error)
	// DeleteGroup removes the group and releases what it held; an unknown
	// group wraps httpapi.ErrNotFound, the default group is a conflict.
	DeleteGroup(ctx context.Context, name string) error
}

// GroupEventReader is what an EventReader adds for groups: the event as
// one group received it.
type GroupEventReader interface {
	// GetIn returns the event with its delivery to the group (a
	// non-default one); an unknown group or event wraps
	// httpapi.ErrNotFound.
	GetIn(ctx context.Context, group, id string) (Event, error)
}

// WaitKey is the waiter.Hub key of an event's delivery to group: the id
// alone for the default group (as before groups), group/id for another.
func WaitKey(group, id string) string {
	if group == "" || group == DefaultGroup {
		return id
	}
	return group + "/" + id
}

// ErrGroupConflict wraps the 409 of a PUT that names an existing group
// with another from.
var ErrGroupConflict = fmt.Errorf("group exists with another from: %w", httpapi.ErrConflict)

// TooManyGroups is the 409 of a PUT past MAX_GROUPS.
func TooManyGroups(name string, max int) error {
	return &httpapi.Error{Status: http.StatusConflict,
		Message: fmt.Sprintf("group %s not created: the service already has %d groups, its limit (MAX_GROUPS); delete one first", name, max),
		Fields:  map[string]any{"max_groups": max}}
}

// UnknownGroup is the 404 of a group that does not exist.
func UnknownGroup(name string) error {
	return fmt.Errorf("group %s: %w", name, httpapi.ErrNotFound)
}

// DefaultGroupKept is the 409 of DELETE /groups/default.
var DefaultGroupKept = &httpapi.Error{Status: http.StatusConflict,
	Message: "the default group cannot be deleted: it is the one GET /events/{id}/wait without ?group= waits for"}

// mountGroups adds the group routes.
func (h *handler) mountGroups(r chi.Router) {
	r.Method(http.MethodGet, "/groups", httpapi.HandlerFunc(h.listGroups))
	r.Method(http.MethodPut, "/groups/{name}", httpapi.HandlerFunc(h.putGroup))
	r.Method(http.MethodDelete, "/groups/{name}", httpapi.HandlerFunc(h.deleteGroup))
}

func (h *handler) groups() (GroupBackend, error) {
	g, ok := h.backend.(GroupBackend)
	if !ok {
		return nil, fmt.Errorf("consumer groups: %w", httpapi.ErrUnsupported)
	}
	return g, nil
}

func (h *handler) putGroup(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if err := ValidGroup(name); err != nil {
		return err
	}
	var spec GroupSpec
	if err := httpapi.DecodeJSON(r, &spec); err != nil {
		return err
	}
	if spec.From != FromEarliest && spec.From != FromLatest {
		return httpapi.BadRequest("from must be %q or %q, got %q", FromEarliest, FromLatest, httpapi.Truncate(spec.From, 64))
	}
	g, err := h.groups()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	created, err := g.PutGroup(ctx, name, spec.From)
	if errors.Is(err, ErrGroupConflict) {
		return &httpapi.Error{Status: http.StatusConflict,
			Message: fmt.Sprintf("group %s exists with another from than %q; delete it first to start it again", name, spec.From),
			Fields:  map[string]any{"name": name}}
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpapi.WriteJSON(w, status, GroupSpecOf{Name: name, From: spec.From})
	return nil
}

func (h *handler) listGroups(w http.ResponseWriter, r *http.Request) error {
	g, err := h.groups()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	list, err := g.Groups(ctx)
	if err != nil {
		return err
	}
	if list.Groups == nil {
		list.Groups = []Group{}
	}
	httpapi.WriteJSON(w, http.StatusOK, list)
	return nil
}

func (h *handler) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if err := ValidGroup(name); err != nil {
		return err
	}
	if name == DefaultGroup {
		return DefaultGroupKept
	}
	g, err := h.groups()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	if err := g.DeleteGroup(ctx, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// groupParam reads ?group=: "" (the default group) when absent, else a
// valid name or a 400.
func groupParam(r *http.Request) (string, error) {
	vs, ok := r.URL.Query()["group"]
	if !ok {
		return "", nil
	}
	if len(vs) != 1 {
		return "", httpapi.BadRequest("query parameter group must be given once")
	}
	if err := ValidGroup(vs[0]); err != nil {
		return "", err
	}
	if vs[0] == DefaultGroup {
		return "", nil
	}
	return vs[0], nil
}
