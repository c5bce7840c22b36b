// Command ballast-agent runs the ds and client roles of ballast, as
// `ballast ds` and `ballast client` do, in a binary that does not link the
// mds: no VictoriaMetrics storage or query engine, no analyzers, so the
// agent on every data server and GPU node stays small (docs/decisions.md).
// TestAgentBuildLinksNoStore keeps it so.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ballast-io/ballast/cluster/agent"
	"github.com/ballast-io/ballast/cluster/node"
	"github.com/ballast-io/ballast/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "ballast-agent — the ds and client agents of ballast, without the mds.\n\nUsage: ballast-agent COMMAND [flags]\n\nCommands:\n")
	for _, r := range []string{node.RoleClient, node.RoleDS} {
		fmt.Fprintf(w, "  %-10s %s\n", r, agent.Summary[r])
	}
	fmt.Fprintf(w, "  %-10s %s\n\nRun 'ballast-agent COMMAND --help' for the flags of a command.\n", "version", "print the version and exit")
}

// run maps errors to exit codes as ballast does: 0 success or --help,
// 2 usage error, 1 anything else.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case node.RoleDS, node.RoleClient:
		ctx, stop := cli.SignalContext("ballast-agent")
		defer stop()
		err = agent.Run(ctx, stdout, stderr, "ballast-agent", version, cmd, rest)
	case "version":
		fs := cli.NewFlagSet(stdout, stderr, "version", "Usage: ballast-agent version\n\nPrints the version, its git revision when known, and the Go version.")
		if err = cli.ParseFlags(fs, rest); err == nil {
			fmt.Fprintln(stdout, cli.VersionString("ballast-agent", version))
		}
	default:
		fmt.Fprintf(stderr, "ballast-agent: unknown command %q\n\n", cmd)
		usage(stderr)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, cli.ErrUsage):
		fmt.Fprintf(stderr, "ballast-agent %s: %v\nRun 'ballast-agent %s --help' for usage.\n", cmd, err, cmd)
		return 2
	default:
		fmt.Fprintf(stderr, "ballast-agent %s: %v\n", cmd, err)
		return 1
	}
}
