package cluster

import "github.com/ballast-io/ballast/cluster/node"

// What every role needs and that links no store lives in cluster/node, so
// that the agent binary (cmd/ballast-agent) can be built without
// VictoriaMetrics' storage and query engine (docs/decisions.md). These
// aliases keep the names the mds code and its callers use.
type (
	Duration        = node.Duration
	TelemetryConfig = node.TelemetryConfig
	AgentConfig     = node.AgentConfig
	RootsConfig     = node.RootsConfig
	Server          = node.Server
	ServerOptions   = node.ServerOptions
	Route           = node.Route
	Scope           = node.Scope
	AuthConfig      = node.AuthConfig
	AuthClient      = node.AuthClient
	TLSConfig       = node.TLSConfig
	HTTPConfig      = node.HTTPConfig
	ClientConfig    = node.ClientConfig
	ClientTLSConfig = node.ClientTLSConfig
	Authenticator   = node.Authenticator
	Principal       = node.Principal
)

// Role names.
const (
	RoleMDS    = node.RoleMDS
	RoleDS     = node.RoleDS
	RoleClient = node.RoleClient
)
