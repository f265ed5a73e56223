// Package waiter wakes long polls in this process when the thing they wait
// for happens: GET /tasks/{id}/wait when a worker finishes the task, GET
// /events/{id}/wait when the consumer observes the event.
//
// A Hub is only a shortcut for waiters in the same process; long polls
// still re-read their backend now and then, so an outcome reached by
// another instance is seen too, a little later.
package waiter
