package upstream

import "github.com/prometheus/client_golang/prometheus"

var (
	connectionsDesc = prometheus.NewDesc("toolbelt_upstream_connections",
		"Open connections to an upstream MCP server (stdio processes) on this instance.", []string{"server"}, nil)
	failingDesc = prometheus.NewDesc("toolbelt_upstream_failing",
		"1 while connecting to an upstream MCP server fails and waits to be tried again.", []string{"server"}, nil)
	memoryDesc = prometheus.NewDesc("toolbelt_upstream_memory_bytes",
		"Memory of an upstream MCP server's running stdio processes on this instance.", []string{"server"}, nil)
	egressRefusedDesc = prometheus.NewDesc("toolbelt_upstream_egress_refused_total",
		"Connections an upstream MCP server's stdio processes asked for on this instance and its egress proxy refused.", []string{"server"}, nil)
)

// Collector reports the upstreams' state on /metrics, read when scraped.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionsDesc
	ch <- failingDesc
	ch <- memoryDesc
	ch <- egressRefusedDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for server, n := range c.m.Warm() {
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(n), server)
	}
	c.m.mu.Lock()
	failing := map[string]bool{}
	for key := range c.m.failures {
		failing[key.server] = true
	}
	c.m.mu.Unlock()
	for server := range failing {
		ch <- prometheus.MustNewConstMetric(failingDesc, prometheus.GaugeValue, 1, server)
	}
	if mem, ok := c.m.d.Stdio.(interface{ Memory() map[string]int64 }); ok {
		for server, b := range mem.Memory() {
			ch <- prometheus.MustNewConstMetric(memoryDesc, prometheus.GaugeValue, float64(b), server)
		}
	}
	if e, ok := c.m.d.Stdio.(interface{ EgressRefused() map[string]uint64 }); ok {
		for server, n := range e.EgressRefused() {
			ch <- prometheus.MustNewConstMetric(egressRefusedDesc, prometheus.CounterValue, float64(n), server)
		}
	}
}
