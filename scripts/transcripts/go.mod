module github.com/where-postgres-ends/where-postgres-ends/scripts/transcripts

go 1.26.0

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/segmentio/kafka-go v0.4.51
	github.com/where-postgres-ends/where-postgres-ends/services/kit v0.0.0
	go.mongodb.org/mongo-driver/v2 v2.10.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/xdg-go/scram v1.4.0 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

// The kit is not published: resolve it from the checkout (go mod tidy
// ignores go.work, golang/go#50750).
replace github.com/where-postgres-ends/where-postgres-ends/services/kit => ../../services/kit
