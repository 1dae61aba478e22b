package upstream

import (
	"maps"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	connectionsDesc = prometheus.NewDesc("toolbelt_upstream_connections",
		"Open connections to an upstream MCP server (stdio processes) on this instance.", []string{"server"}, nil)
	failingDesc = prometheus.NewDesc("toolbelt_upstream_failing",
		"1 while connecting to an upstream MCP server fails and waits to be tried again.", []string{"server"}, nil)
	memoryDesc = prometheus.NewDesc("toolbelt_upstream_memory_bytes",
		"Memory of an upstream MCP server's running stdio processes on this instance.", []string{"server"}, nil)
	egressRefusedDesc = prometheus.NewDesc("toolbelt_upstream_egress_refused_total",
		"Connections an upstream MCP server's stdio processes asked for on this instance and its egress proxy refused.", []string{"server"}, nil)
	evictedDesc = prometheus.NewDesc("toolbelt_upstream_processes_evicted_total",
		"Idle session processes of an upstream MCP server stopped on this instance to make room for a new session under the process caps.", []string{"server"}, nil)
	capRefusedDesc = prometheus.NewDesc("toolbelt_upstream_processes_refused_total",
		"Calls refused (RATE_LIMIT_EXCEEDED) on this instance because an upstream MCP server's process caps were reached and every process had a call in flight.", []string{"server"}, nil)
)

// Collector reports the upstreams' state on /metrics, read when scraped.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionsDesc
	ch <- failingDesc
	ch <- memoryDesc
	ch <- egressRefusedDesc
	ch <- evictedDesc
	ch <- capRefusedDesc
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
	counters := map[*prometheus.Desc]map[string]uint64{evictedDesc: maps.Clone(c.m.evicted), capRefusedDesc: maps.Clone(c.m.capRefused)}
	c.m.mu.Unlock()
	for desc, per := range counters {
		for server, n := range per {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(n), server)
		}
	}
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
