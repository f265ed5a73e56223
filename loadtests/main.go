package main

import (
	"os"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
