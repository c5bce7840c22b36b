// Command gpx_ballast is the backend of ballast's Grafana data source
// plugin. Grafana starts it and talks to it over its gRPC plugin protocol
// (hashicorp/go-plugin); it answers queries by reading a ballast mds over
// HTTP. See docs/grafana.md.
package main

import (
	"os"

	"github.com/grafana/grafana-plugin-sdk-go/backend/datasource"
	"github.com/grafana/grafana-plugin-sdk-go/backend/log"

	"github.com/ballast-io/ballast/grafana/pkg/plugin"
)

func main() {
	// Manage serves one Datasource per data source configured in Grafana,
	// recreating it when its settings change.
	if err := datasource.Manage(plugin.ID, plugin.NewDatasource, datasource.ManageOpts{}); err != nil {
		log.DefaultLogger.Error("the ballast data source stopped", "err", err.Error())
		os.Exit(1)
	}
}
