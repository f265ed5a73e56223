// Package documents is the contract of the documents pair (services/mongodb
// against services/no-mongodb): the OpenAPI document both serve, the JSON
// types they encode, the profile rules both enforce (Parse, Validate), the
// reference implementation of jsonb containment (Contains), the Backend
// interface each side implements and the HTTP handlers both mount over it
// (Mount). The pair's conformance suite is in the sub-package conformance.
//
// Because the handlers live here, the two services differ only in their
// Backend: status codes, validation and encoding are identical by
// construction.
package documents
