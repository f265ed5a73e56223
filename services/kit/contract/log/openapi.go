package log

import _ "embed"

// OpenAPI is the pair's contract, served by both services at
// GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
