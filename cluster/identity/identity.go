// Package identity names the things of a pNFS cluster as its operators
// do. LAYOUTSTATS names a drive by the pNFS device id the MDS handed out
// (32 hex digits) and a data server by the network address in that
// device's GETDEVICEINFO answer (10.1.0.5:2049); the agents name drives by
// their kernel name on a node (ds04/nvme4n1). Findings, the report and the
// API should say "ds04/nvme4n1" and "ds04", with the ids and addresses as
// evidence.
//
// What a real cluster knows, and where:
//
//   - The MDS (the pNFS server) assigns device ids and knows, for each, the
//     data server and the export on it (FreeBSD's pnfsd, for one, is
//     configured with `ds04:/export/nvme4n1` entries) and the netaddrs it
//     hands out for the DS. An operator copies that into the `devices:`
//     (and optionally `data_servers:`) table of the ballast mds config.
//   - The DS knows which block device backs each export: its agent's
//     filesystem collector exposes ballast_filesystem_size_bytes{node,
//     device, mountpoint}. A table row that gives the export instead of the
//     drive is resolved through those series.
//   - The DS address of a device id is in every LAYOUTSTATS report, so the
//     address → DS name map is learned from the reports of devices the table
//     places on a DS (or given in `data_servers:`).
//   - Whether a DS's agent answers (the `up` series of its scrape) joins to
//     the DS name, so a lost DS can be told from its peers that merely wait
//     on it.
//
// The Table holds what is configured and what was learned; it is safe for
// concurrent use. Learning is driven by the pipeline stage in
// cluster/analysis (it reads the store and the tick's stripe deltas).
package identity

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ballast-io/ballast/models"
)

// Device is one row of the device table: a pNFS device id and where it
// lives. Drive or Export may be empty; with neither, findings name the
// device "<ds>:<id>".
type Device struct {
	// ID is the pNFS deviceid4 as hex (32 digits, case-insensitive),
	// as LAYOUTSTATS reports carry it.
	ID string `yaml:"id" json:"id"`
	// DS is the data server's name: the node label of its agent's series
	// (its host name unless the scrape configuration says otherwise).
	DS string `yaml:"ds" json:"ds"`
	// Drive is the block device on the DS (nvme4n1, sdb), as lsblk and
	// diskstats name it.
	Drive string `yaml:"drive,omitempty" json:"drive,omitempty"`
	// Export is the directory on the DS the device id stands for
	// (/export/nvme4n1); when Drive is empty it is resolved to the drive
	// through the DS agent's filesystem series (mountpoint → device).
	Export string `yaml:"export,omitempty" json:"export,omitempty"`
}

// DataServer names a data server's addresses: the netaddrs (host:port)
// the MDS hands out for it in GETDEVICEINFO. Optional: addresses are also
// learned from LAYOUTSTATS reports of devices the device table places on
// the DS.
type DataServer struct {
	Name      string   `yaml:"name" json:"name"`
	Addresses []string `yaml:"addresses" json:"addresses"`
}

// Validate checks a device table and data-server list as config, naming
// each bad field (devices[3].id) and its value.
func Validate(devs []Device, dss []DataServer) error {
	var errs []error
	seen := map[string]int{}
	for i, d := range devs {
		f := fmt.Sprintf("devices[%d]", i)
		id := strings.ToLower(d.ID)
		switch {
		case id == "":
			errs = append(errs, fmt.Errorf("%s.id: must not be empty", f))
		case len(id) != 2*models.DeviceIDSize:
			errs = append(errs, fmt.Errorf("%s.id: %q is not a pNFS device id (%d hex digits)", f, d.ID, 2*models.DeviceIDSize))
		default:
			if _, err := hex.DecodeString(id); err != nil {
				errs = append(errs, fmt.Errorf("%s.id: %q is not hex", f, d.ID))
			} else if j, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s.id: %q is already devices[%d]", f, d.ID, j))
			} else {
				seen[id] = i
			}
		}
		if err := validName(d.DS); err != nil {
			errs = append(errs, fmt.Errorf("%s.ds: %q %w", f, d.DS, err))
		}
		if d.Drive != "" {
			if err := validName(d.Drive); err != nil {
				errs = append(errs, fmt.Errorf("%s.drive: %q %w", f, d.Drive, err))
			}
		}
		if d.Export != "" && (!path.IsAbs(d.Export) || path.Clean(d.Export) != d.Export) {
			errs = append(errs, fmt.Errorf("%s.export: %q is not a clean absolute path", f, d.Export))
		}
	}
	addrs := map[string]string{}
	names := map[string]bool{}
	for i, s := range dss {
		f := fmt.Sprintf("data_servers[%d]", i)
		if err := validName(s.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s.name: %q %w", f, s.Name, err))
		} else if names[s.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q is listed twice", f, s.Name))
		}
		names[s.Name] = true
		for j, a := range s.Addresses {
			host, port, err := net.SplitHostPort(a)
			if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p <= 0 || p > 65535 {
				errs = append(errs, fmt.Errorf("%s.addresses[%d]: %q is not HOST:PORT", f, j, a))
				continue
			}
			if other, dup := addrs[a]; dup && other != s.Name {
				errs = append(errs, fmt.Errorf("%s.addresses[%d]: %q is already an address of %q", f, j, a, other))
			}
			addrs[a] = s.Name
		}
	}
	return errors.Join(errs...)
}

func validName(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case strings.ContainsAny(s, "/: \t\n"):
		return errors.New("must not contain '/', ':' or white space")
	}
	return nil
}

// Resolved is one device id as the table names it now, for the status API
// and the info series.
type Resolved struct {
	Device
	// Name is what findings call it: "<ds>/<drive>", or "<ds>:<export>"
	// while the export's drive is unknown, or "<ds>:<id>".
	Name string `json:"name"`
	// Addresses are the DS addresses LAYOUTSTATS reported it under.
	Addresses []string `json:"addresses,omitempty"`
	// Learned says the row came from LAYOUTSTATS and a configured DS
	// address, not from the device table.
	Learned bool `json:"learned,omitempty"`
}

// Table is the device table of one mds: the configured rows plus what was
// learned. The zero value is not usable; build it with New.
type Table struct {
	mu      sync.RWMutex
	devs    map[string]*Device           // by lower-case id
	learned map[string]bool              // ids whose row was learned
	addrs   map[string]map[string]bool   // id → DS addresses seen
	dsAddr  map[string]string            // address → DS name
	mounts  map[string]map[string]string // node → mountpoint → device
	blocks  map[string]map[string]bool   // node → block devices known
	agents  map[string]bool              // DS node → agent up at the last look
	names   map[string]string            // id → name, cached
	byName  map[string][]string          // name → ids, for evidence
	dsAddrs map[string]map[string]bool   // DS name → addresses, for evidence
}

// New returns a table with the configured rows (validated by the caller).
func New(devs []Device, dss []DataServer) *Table {
	t := &Table{devs: map[string]*Device{}, learned: map[string]bool{}, addrs: map[string]map[string]bool{},
		dsAddr: map[string]string{}, mounts: map[string]map[string]string{}, blocks: map[string]map[string]bool{},
		agents: map[string]bool{}, names: map[string]string{}, byName: map[string][]string{}, dsAddrs: map[string]map[string]bool{}}
	for _, d := range devs {
		d.ID = strings.ToLower(d.ID)
		t.devs[d.ID] = &d
		if d.Drive != "" {
			t.addBlock(d.DS, d.Drive)
		}
	}
	for _, s := range dss {
		for _, a := range s.Addresses {
			t.dsAddr[a] = s.Name
			t.addDSAddr(s.Name, a)
		}
	}
	return t
}

func (t *Table) addBlock(node, dev string) {
	m := t.blocks[node]
	if m == nil {
		m = map[string]bool{}
		t.blocks[node] = m
	}
	m[dev] = true
}

func (t *Table) addDSAddr(ds, addr string) {
	m := t.dsAddrs[ds]
	if m == nil {
		m = map[string]bool{}
		t.dsAddrs[ds] = m
	}
	m[addr] = true
}

// Configured reports whether any row or address was configured or learned:
// without a table, names stay ids and addresses.
func (t *Table) Configured() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.devs) > 0 || len(t.dsAddr) > 0
}

// ObserveMount records that node mounts its block device dev on
// mountpoint, as the DS agent's filesystem series say. A mountpoint keeps
// the last device seen on it (a drive that drops off the bus loses its
// series; the export is still the drive's).
func (t *Table) ObserveMount(node, mountpoint, dev string) {
	if node == "" || mountpoint == "" || dev == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.mounts[node]
	if m == nil {
		m = map[string]string{}
		t.mounts[node] = m
	}
	if m[mountpoint] != dev {
		m[mountpoint] = dev
		clear(t.names)
	}
	if !t.blocks[node][dev] {
		t.addBlock(node, dev)
	}
}

// ObserveAgent records whether the agent of node answered its last scrape.
func (t *Table) ObserveAgent(node string, up bool) {
	if node == "" {
		return
	}
	t.mu.Lock()
	t.agents[node] = up
	t.mu.Unlock()
}

// AgentDown reports whether the agent of DS name failed its last scrape;
// known is false when no scrape of it was seen.
func (t *Table) AgentDown(name string) (down, known bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	up, known := t.agents[name]
	return known && !up, known
}

// ObserveStripes learns DS addresses from stripe deltas: an address a
// device of the table is reported under is its DS's (unless configured
// otherwise); a device id not in the table reported under a known DS
// address becomes a learned row of that DS (which teaches no addresses).
func (t *Table) ObserveStripes(ds []models.StripeDelta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		if d.DeviceID == "" || d.DS == "" {
			continue
		}
		id := strings.ToLower(d.DeviceID)
		a := t.addrs[id]
		if a == nil {
			a = map[string]bool{}
			t.addrs[id] = a
		}
		if a[d.DS] {
			continue
		}
		a[d.DS] = true
		dev := t.devs[id]
		switch name, ok := t.dsAddr[d.DS]; {
		case dev != nil && !ok && !t.learned[id]:
			t.dsAddr[d.DS] = dev.DS
			t.addDSAddr(dev.DS, d.DS)
			clear(t.names)
		case dev == nil && ok:
			t.devs[id] = &Device{ID: id, DS: name}
			t.learned[id] = true
			clear(t.names)
		}
	}
}

// DeviceName returns what findings call pNFS device id: "<ds>/<drive>"
// when the drive is known, "<ds>:<export>" while only its export is,
// "<ds>:<id>" when only its DS is, else the id itself.
func (t *Table) DeviceName(id string) string {
	t.mu.RLock()
	n, ok := t.names[id]
	t.mu.RUnlock()
	if ok {
		return n
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deviceNameLocked(id)
}

func (t *Table) deviceNameLocked(id string) string {
	if n, ok := t.names[id]; ok {
		return n
	}
	if len(t.names) == 0 {
		t.byName = map[string][]string{}
	}
	n := id
	if d := t.devs[strings.ToLower(id)]; d != nil {
		n = d.DS + ":" + strings.ToLower(id)
		switch drive := t.driveOf(d); {
		case drive != "":
			n = d.DS + "/" + drive
		case d.Export != "":
			n = d.DS + ":" + d.Export
		}
	}
	t.names[id] = n
	t.byName[n] = append(t.byName[n], strings.ToLower(id))
	return n
}

func (t *Table) driveOf(d *Device) string {
	if d.Drive != "" {
		return d.Drive
	}
	if d.Export != "" {
		return t.mounts[d.DS][d.Export]
	}
	return ""
}

// DSName returns what findings call the DS at addr (ip:port): its name
// when the table knows it, else the address.
func (t *Table) DSName(addr string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if n, ok := t.dsAddr[addr]; ok {
		return n
	}
	return addr
}

// nvmeController matches an NVMe controller's kernel name (nvme3), which
// SMART series carry; its namespaces are block devices nvme3n1, nvme3n2.
var nvmeController = regexp.MustCompile(`^nvme[0-9]+$`)

// DriveName returns what findings call drive dev of node: "<node>/<dev>",
// with an NVMe controller (the name SMART series carry) replaced by its
// one namespace when the node's known block devices (the device table and
// the filesystem series) hold exactly one, so that SMART and LAYOUTSTATS
// findings about a drive name it alike.
func (t *Table) DriveName(node, dev string) string {
	if node == "" {
		return dev
	}
	if nvmeController.MatchString(dev) {
		t.mu.RLock()
		var match string
		n := 0
		for b := range t.blocks[node] {
			if rest, ok := strings.CutPrefix(b, dev+"n"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
				match = b
				n++
			}
		}
		t.mu.RUnlock()
		if n == 1 {
			dev = match
		}
	}
	return node + "/" + dev
}

// Rename replaces, in place, each delta's device id and DS address by
// their names (DeviceName, DSName), after learning from them. Stripe ids
// built from renamed deltas read "<drive name>/<file handle>".
func (t *Table) Rename(ds []models.StripeDelta) {
	t.ObserveStripes(ds)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		if d.DeviceID != "" {
			d.DeviceID = t.deviceNameLocked(d.DeviceID)
		}
		if n, ok := t.dsAddr[d.DS]; ok {
			d.DS = n
		}
	}
}

// Evidence returns the ids behind a subject the table named: the pNFS
// device ids of a device (or of a stripe's device) and the addresses of a
// DS, as evidence entries whose Series selects their LAYOUTSTATS series.
func (t *Table) Evidence(s models.Subject) []models.Evidence {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []models.Evidence
	switch s.Kind {
	case models.SubjectStripe:
		if i := strings.LastIndexByte(s.ID, '/'); i > 0 {
			out = t.deviceEvidence(s.ID[:i])
		}
	case models.SubjectDevice:
		out = t.deviceEvidence(s.ID)
	case models.SubjectDS:
		addrs := make([]string, 0, len(t.dsAddrs[s.ID]))
		for a := range t.dsAddrs[s.ID] {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		for _, a := range addrs {
			out = append(out, models.Evidence{Name: "ds_address", Value: 1, Series: `{ds="` + a + `"}`,
				Note: "the DS's address in LAYOUTSTATS (" + a + ")"})
		}
	}
	return out
}

func (t *Table) deviceEvidence(name string) []models.Evidence {
	ids := slices.Clone(t.byName[name])
	sort.Strings(ids)
	var out []models.Evidence
	for _, id := range slices.Compact(ids) {
		out = append(out, models.Evidence{Name: "pnfs_device_id", Value: 1, Series: `{deviceid="` + id + `"}`,
			Note: "the pNFS device id in LAYOUTSTATS (" + id + ")"})
	}
	return out
}

// Rows returns every device id the table names, configured or learned,
// sorted by name then id.
func (t *Table) Rows() []Resolved {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Resolved, 0, len(t.devs))
	for id, d := range t.devs {
		r := Resolved{Device: *d, Name: t.deviceNameLocked(id), Learned: t.learned[id]}
		if r.Drive == "" {
			r.Drive = t.driveOf(d)
		}
		for a := range t.addrs[id] {
			r.Addresses = append(r.Addresses, a)
		}
		sort.Strings(r.Addresses)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Addresses returns every known DS address with its DS name, sorted by
// address.
func (t *Table) Addresses() [][2]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([][2]string, 0, len(t.dsAddr))
	for a, n := range t.dsAddr {
		out = append(out, [2]string{a, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
