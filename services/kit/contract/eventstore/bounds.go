package eventstore

// MaxReadBytes bounds the events of one answer of GET /streams/{stream}
// (and of each page GET /streams/{stream}/state folds): a backend's Read
// stops before the event that would take the page past it (Page), so a
// page ends early, and its "next" says where the rest begins. The first
// event of a page always fits, so that a stream moves on even past an
// event larger than the bound: a page holds at most MaxReadBytes of
// events, or one event. One event is at most what its append sent
// (BODY_LIMIT) plus the growth the value rule allows
// (jsonbtext.MaxExpansion), plus EventFieldBytes.
const MaxReadBytes = 4 << 20

// MaxSubscribePageBytes bounds the events a subscription's catch-up read
// holds at once, in the backends that read pages (SUBSCRIBE_PAGE_SIZE
// events, cut by bytes too): a page of 500 events of 1 MiB each would
// otherwise be held per subscriber. As for MaxReadBytes, the first event
// always fits.
const MaxSubscribePageBytes = 1 << 20

// EventFieldBytes is what EventSize counts for an event's fixed fields
// (names, quotes, version, global position, created_at), above their
// variable parts.
const EventFieldBytes = 256

// EventSize is what e counts against a byte bound: an upper bound on its
// JSON encoding in an answer (httpapi.WriteJSON writes data and metadata
// compact and without HTML escapes, never longer than stored; a type's
// characters may take up to 6 bytes each as escapes).
func EventSize(e RecordedEvent) int {
	return len(e.Data) + len(e.Metadata) + 6*len(e.Type) + len(e.Stream) + len(e.Position) + EventFieldBytes
}

// Page fills a read's events up to a byte bound, counted with EventSize.
// The first event always fits, so that a reader never stalls before an
// event larger than the bound. The zero Page has no bound.
type Page struct {
	// Max is the bound in bytes; zero or less means none.
	Max  int
	used int
	n    int
}

// Fits reports whether e may join the page, and counts it if so. Once an
// event does not fit, the page is full: the caller stops there (events
// are returned in order, with no gaps).
func (p *Page) Fits(e RecordedEvent) bool {
	size := EventSize(e)
	if p.n > 0 && p.Max > 0 && p.used+size > p.Max {
		return false
	}
	p.used += size
	p.n++
	return true
}

// Bytes is what the page's events count, by EventSize.
func (p *Page) Bytes() int { return p.used }

// nextFrom is the from of the page after res: the version after its last
// event when the stream has events past it, else nil.
func nextFrom(res ReadResult) *int64 {
	if len(res.Events) == 0 || res.LastVersion == nil {
		return nil
	}
	v := res.Events[len(res.Events)-1].Version
	if v == nil || *v >= *res.LastVersion {
		return nil
	}
	n := *v + 1
	return &n
}

// cut keeps the longest prefix of events that fits in MaxReadBytes: the
// handler's own check of the bound, whatever the backend returned.
func cut(events []RecordedEvent) []RecordedEvent {
	p := Page{Max: MaxReadBytes}
	for i, e := range events {
		if !p.Fits(e) {
			return events[:i]
		}
	}
	return events
}
