package flow_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain doubles as the program that exec tests run: with
// FLOW_EXEC_HELPER set, the test binary acts as a command.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FLOW_EXEC_HELPER"); mode != "" {
		os.Exit(execHelper(mode))
	}
	os.Exit(m.Run())
}

func execHelper(mode string) int {
	switch mode {
	case "echo":
		in, _ := io.ReadAll(os.Stdin)
		out, _ := json.Marshal(map[string]any{"stdin": json.RawMessage(in), "args": os.Args[1:], "env": os.Environ()})
		fmt.Println(string(out))
	case "fail":
		fmt.Fprintln(os.Stderr, "something went wrong: disk full")
		return 3
	case "hang":
		time.Sleep(time.Minute)
	case "garbage":
		fmt.Println("this is not JSON")
	case "big":
		fmt.Print(`"` + strings.Repeat("x", 3000) + `"`)
	case "empty":
	}
	return 0
}
