// Command duraflow runs the Duraflow engine (dev, serve, worker, migrate)
// and manages workflow instances over its HTTP API (workflows, instances,
// events). This build runs the demo workflows of examples/demo:
//
//	go run ./cmd/duraflow dev
//	go run ./cmd/duraflow instances create hello --params '{"name":"Ada"}'
//
// To run workflows of your own, build the same command with them, as this
// file does with the demos (see package cli).
package main

import (
	"os"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/examples/demo"
)

func main() {
	os.Exit(cli.Main(cli.WithWorkflows(demo.Register)))
}
