package main

import (
	"context"

	"github.com/ballast-io/ballast/cluster/agent"
	"github.com/ballast-io/ballast/cluster/node"
)

// The ds and client roles; cmd/ballast-agent runs the same code without
// the store linked in.
func init() {
	for _, role := range []string{node.RoleDS, node.RoleClient} {
		register(&command{name: role, summary: agent.Summary[role], run: func(ctx context.Context, env *cmdEnv, args []string) error {
			return agent.Run(ctx, env.stdout, env.stderr, "ballast", version, role, args)
		}})
	}
}
