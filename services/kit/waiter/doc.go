// Package waiter wakes long polls in this process when the thing they wait
// for happens: GET /tasks/{id}/wait when a worker finishes the task, GET
// /events/{id}/wait when the consumer observes the event.
//
// A Hub is only a shortcut for waiters in the same process; long polls
// still re-read their backend now and then, so an outcome reached by
// another instance is seen too, a little later. Hub.Poll is that long
// poll, the one both pairs use: it re-reads on every wake-up and
// periodically, until the outcome is in, the timeout passes, the service
// stops or the request ends. The periodic re-read is shared when a
// Rereader is given (PollOptions.Shared): one batched Check per interval
// for every waiter of the service, which wakes only those whose outcome
// is in, instead of one read per waiter per interval.
package waiter
