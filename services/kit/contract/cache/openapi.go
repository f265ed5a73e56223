package cache

import _ "embed"

// OpenAPI is the pair's REST contract, served by both services at
// GET /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
