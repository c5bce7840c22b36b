package cluster

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/ballast-io/ballast/cluster/ha"
)

// PathLeaderStatus serves whether this mds leads its HA pair.
const PathLeaderStatus = "/api/v1/status/leader"

// LeaderStatus is the body of PathLeaderStatus.
type LeaderStatus struct {
	// HA says the mds is one of a pair (ha.etcd_endpoints set).
	HA bool `json:"ha"`
	// Leading says this mds may act now; Epoch is its fencing token.
	Leading bool   `json:"leading"`
	Epoch   uint64 `json:"epoch"`
	Name    string `json:"name,omitempty"`
}

// startHA starts the election when ha.etcd_endpoints is set; otherwise the
// mds runs alone and its gate always leads (ha.Solo).
func (m *MDS) startHA() error {
	if len(m.cfg.HA.EtcdEndpoints) == 0 {
		m.gate = ha.Solo{}
		return nil
	}
	o := m.cfg.HAOptions()
	o.Logger, o.Metrics = m.logger, m.set
	el, err := ha.New(o)
	if err != nil {
		return err
	}
	if err := el.Start(); err != nil {
		return err
	}
	m.elector, m.gate = el, el
	return nil
}

func (m *MDS) stopHA(ctx context.Context) error {
	if m.elector == nil {
		return nil
	}
	err := m.elector.Stop(ctx)
	m.elector = nil
	return err
}

// Leader is the gate every actuator consults before it plans, executes or
// commits an action and before read-ahead desired state is published:
// only the leader acts (docs/ha.md). nil before Start.
func (m *MDS) Leader() ha.Gate { return m.gate }

func (m *MDS) serveLeaderStatus(w http.ResponseWriter, _ *http.Request) {
	st := LeaderStatus{HA: m.elector != nil}
	if g := m.gate; g != nil {
		st.Epoch, st.Leading = g.Leading()
	}
	if st.HA {
		st.Name = m.cfg.HAOptions().Name
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Status string       `json:"status"`
		Data   LeaderStatus `json:"data"`
	}{"success", st})
}

// mdsGate hands the actions engine the mds's gate, which exists once the
// election started (after the engine was built, before the pipeline runs).
type mdsGate struct{ m *MDS }

func (g mdsGate) Leading() (uint64, bool) {
	if g.m.gate == nil {
		return 0, false
	}
	return g.m.gate.Leading()
}

// Confirm asks the coordinator when the gate can (an elected leader).
func (g mdsGate) Confirm(ctx context.Context, epoch uint64) error {
	if c, ok := g.m.gate.(ha.Confirmer); ok {
		return c.Confirm(ctx, epoch)
	}
	return nil
}
