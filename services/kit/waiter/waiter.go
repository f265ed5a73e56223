package waiter

import "sync"

// Hub maps keys to the channels of the requests waiting on them. All
// methods are safe for concurrent use; the zero Hub is ready to use.
type Hub struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

// Wait returns a channel closed at the next Wake of key, and a function
// that unregisters it; call it when done waiting, woken or not.
func (h *Hub) Wait(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	if h.waiters == nil {
		h.waiters = map[string][]chan struct{}{}
	}
	h.waiters[key] = append(h.waiters[key], ch)
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.waiters[key]
		for i, c := range list {
			if c == ch {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(h.waiters, key)
		} else {
			h.waiters[key] = list
		}
	}
}

// Wake wakes every current waiter of each key. Waking a key nobody waits
// on costs a map lookup.
func (h *Hub) Wake(keys ...string) {
	var woken []chan struct{}
	h.mu.Lock()
	for _, k := range keys {
		woken = append(woken, h.waiters[k]...)
		delete(h.waiters, k)
	}
	h.mu.Unlock()
	for _, c := range woken {
		close(c)
	}
}

// Len returns how many requests are waiting, for tests and metrics.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.waiters {
		n += len(l)
	}
	return n
}
