package queue

import _ "embed"

// OpenAPI is the pair's REST contract (OpenAPI 3.1), served by both
// services at GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
