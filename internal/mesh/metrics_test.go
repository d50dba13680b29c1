package mesh_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gocotal/cotal"
	"github.com/gocotal/cotal/internal/ledger"
	"github.com/gocotal/cotal/internal/mesh"
	"github.com/gocotal/cotal/internal/meshtest"
	"github.com/gocotal/cotal/wire"
)

// TestMetrics scrapes a mesh's /metrics as Prometheus would, and parses it with Prometheus's own
// text parser: two agents online in the space, the posts one made counted in the channel
// stream, their credentials active in the ledger, and the durable copies the delivery daemon
// handed over timed; the server reads the roster as an observer of its own.
func TestMetrics(t *testing.T) {
	t.Parallel()
	m := meshtest.Start(t, meshtest.WithDaemons(), func(o *mesh.Options) { o.MetricsAddr = "127.0.0.1:0" })
	ctx := t.Context()
	url := "http://" + m.MetricsAddr().String() + "/metrics"
	var clients []*cotal.Client
	for _, name := range []string{"alice", "bob"} {
		cred := m.AgentCred(t, ledger.Request{Name: name, Subscribe: []string{"general"}, AllowPublish: []string{"general"}})
		c, err := cotal.Connect(ctx, m.URL(), cotal.WithCredsData(cred.Creds), cotal.WithJoin("general"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(t.Context()) })
		clients = append(clients, c)
	}
	const posts = 3
	for i := range posts {
		if _, err := clients[0].Post(ctx, "general", []wire.Part{wire.TextPart(fmt.Sprint("post ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	var families map[string]*dto.MetricFamily
	meshtest.Eventually(t, 20*time.Second, "a scrape with both agents online and the posts handed over", func() bool {
		families = scrape(t, url)
		return value(families, "cotal_agents_online", map[string]string{"space": "main"}) == 2 &&
			value(families, "cotal_delivery_handoff_seconds", nil) >= posts
	})
	if n := value(families, "cotal_stream_messages", map[string]string{"space": "main", "stream": m.Space.ChatStream()}); n < posts {
		t.Errorf("cotal_stream_messages of the channel stream: %v, want at least %d", n, posts)
	}
	if n := value(families, "cotal_credentials", map[string]string{"space": "main", "profile": "agent", "state": "active"}); n < 2 {
		t.Errorf("active agent credentials: %v, want at least 2", n)
	}
	if n := value(families, "cotal_credentials", map[string]string{"space": "main", "profile": "observer", "state": "active"}); n != 1 {
		t.Errorf("active observer credentials (the metrics server's own): %v, want 1", n)
	}
}

// scrape reads url and parses it as Prometheus text.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse as Prometheus text: %v", err)
	}
	return families
}

// value is the gauge or counter of family name whose labels include want, or a histogram's
// sample count; -1 when there is none.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return -1
	}
	for _, mt := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range mt.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case mt.Gauge != nil:
			return mt.GetGauge().GetValue()
		case mt.Counter != nil:
			return mt.GetCounter().GetValue()
		case mt.Histogram != nil:
			return float64(mt.GetHistogram().GetSampleCount())
		}
	}
	return -1
}
