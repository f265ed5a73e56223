// Package documents is the contract of the documents pair (services/mongodb
// against services/no-mongodb): the OpenAPI document both serve, the JSON
// types they encode, the profile rules both enforce (Parse, Validate), the
// reference implementation of jsonb containment (Contains), the HTTP
// handlers both mount over their own Store, and the one conformance suite
// (Run) both services' tests call.
//
// Because the handlers live here, the two services differ only in their
// Store: status codes, validation and encoding are identical by
// construction.
package documents
