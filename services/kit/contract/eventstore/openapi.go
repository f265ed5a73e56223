package eventstore

import _ "embed"

// OpenAPI is the trio's REST contract (OpenAPI 3.1), served by every
// service at GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
