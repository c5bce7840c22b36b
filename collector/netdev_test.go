package collector

import (
	"reflect"
	"testing"

	"github.com/ballast-io/ballast/models"
)

// TestNetdevSpeed checks the link speed series: Mb/s in sysfs become
// bytes per second; -1 (virtual link), 0, garbage, an absent file and an
// unreadable one (a directory where the file should be; the kernel's
// EINVAL on a down link cannot be faked in a plain tree) give no series
// and no error.
func TestNetdevSpeed(t *testing.T) {
	const netDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  eth0:   1000      10    0    0    0     0          0         0     2000      20    0    0    0     0       0          0
  eth1:      0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
 veth0:      0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  ib0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
 bond0:      0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth2:      0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
`
	proc := fakeRoot(t, map[string]string{"net/dev": netDev})
	sys := fakeRoot(t, map[string]string{
		"class/net/eth0/speed":          "25000\n",
		"class/net/eth1/speed":          "0\n",
		"class/net/veth0/speed":         "-1\n",
		"class/net/ib0/speed":           "not a number\n",
		"class/net/bond0/speed/x":       "a directory, not a file",
		"class/net/eth2/speed":          "100000\n",
		"class/net/lo/addr_assign_type": "0\n",
	})
	ss, err := collectWith(t, "netdev", Options{ProcRoot: proc, SysRoot: sys})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	n := 0
	for _, s := range ss {
		if s.Name == models.MetricNetSpeed {
			got[s.Values[0]] = s.Value
		}
		if s.Name == models.MetricNetReceiveBytes {
			n++
		}
	}
	want := map[string]float64{"eth0": 25000e6 / 8, "eth2": 100e9 / 8}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("speeds = %v, want %v", got, want)
	}
	if n != 7 {
		t.Errorf("%d interfaces with receive bytes, want 7 (speed must not drop counters)", n)
	}

	// No class/net at all (a container without /sys): counters, no speeds, no error.
	ss, err = collectWith(t, "netdev", Options{ProcRoot: proc, SysRoot: proc})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == models.MetricNetSpeed {
			t.Errorf("speed series %v without sysfs", s)
		}
	}
}
