package cli_test

import (
	"context"
	"fmt"
	"os"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/examples/demo"
	"github.com/duraflow/duraflow/workflow"
)

// The whole main function of a binary that runs its own workflows: build it,
// then run `myapp dev`, `myapp serve`, `myapp worker` or the client commands.
func ExampleMain() {
	register := func(reg *workflow.Registry) error {
		// Register your workflows here, e.g. with workflow.Register.
		return demo.Register(reg)
	}
	os.Exit(cli.Main(cli.WithName("myapp"), cli.WithWorkflows(register)))
}

// Run runs the command without touching the process: its arguments, output
// and environment are the caller's.
func ExampleRun() {
	code := cli.Run(context.Background(), []string{"--version"},
		cli.WithName("myapp"), cli.WithVersion("1.2.3"), cli.WithOutput(os.Stdout, os.Stderr))
	fmt.Println("exit code", code)
	// Output:
	// myapp version 1.2.3
	// exit code 0
}
