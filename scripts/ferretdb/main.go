// Command ferretdb runs an embedded FerretDB v1 (MongoDB wire protocol) with
// the SQLite backend for the native stack (scripts/stack.sh).
//
// It is its own Go module, kept out of go.work, so FerretDB's dependencies do
// not leak into the services' workspace. The embedded package starts no debug
// or metrics HTTP listener and has telemetry disabled.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on")
	dataDir := flag.String("data-dir", ".stack/ferretdb/data", "directory of the SQLite databases")
	logLevel := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb: bad -log-level %q: %v\n", *logLevel, err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if err := run(*listen, *dataDir, logger); err != nil {
		logger.Error("ferretdb stopped", "error", err)
		os.Exit(1)
	}
}

func run(listen, dataDir string, logger *slog.Logger) error {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	logger.Info("ferretdb listening", "uri", f.MongoDBURI(), "sqlite", dir)
	return f.Run(ctx)
}
