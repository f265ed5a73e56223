package documents

import "context"

// Backend is what each service implements: its adapter to the database.
// Every method is safe for concurrent use and
// honours ctx (the handler bounds each call with the operation timeout).
// Missing users fail with an error wrapping httpapi.ErrNotFound, a
// duplicate email with httpapi.ErrConflict, an unreachable backend with
// httpapi.ErrUnavailable. Users returned by the mutation methods (except
// Create) carry no Profile. The service closes its database itself; Backend
// has no Close.
type Backend interface {
	// Create inserts the user and returns it as stored.
	Create(ctx context.Context, u NewUser) (User, error)
	// Get returns the user with its profile.
	Get(ctx context.Context, id string) (User, error)
	// PatchFields sets the non-nil fixed fields.
	PatchFields(ctx context.Context, id string, p FieldsPatch) (User, error)
	// PatchProfile merges p into the profile (top level only), as Merge
	// does. A merge whose profile would pass MaxProfileBytes is refused
	// with CheckProfileSize's 422 and changes nothing; the check and the
	// write are atomic with respect to the user's other writes, so that
	// concurrent PATCHes cannot together pass the bound. (Create and
	// ReplaceProfile get profiles the handler has already checked.)
	PatchProfile(ctx context.Context, id string, p ProfilePatch) (User, error)
	// ReplaceProfile replaces the whole profile.
	ReplaceProfile(ctx context.Context, id string, profile Object) (User, error)
	// Search returns users, with profiles, whose profile contains query
	// (see Contains) and whose id sorts after the id after ("" for the
	// start), in ascending id order. It reads them one by one and stops
	// as soon as PageFull(len(users), their total UserBytes, n,
	// maxBytes), so that neither count nor size is unbounded.
	Search(ctx context.Context, query Object, after string, n int, maxBytes int64) ([]User, error)
	// Delete removes the user.
	Delete(ctx context.Context, id string) error
}
