package upstream

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestTransportTable: every transport has a unique name, a description,
// a check and a way to connect, and takes only fields a registration has.
func TestTransportTable(t *testing.T) {
	t.Parallel()
	var fields []string
	for f := range reflect.TypeFor[Spec]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	seen := map[string]bool{}
	for _, tr := range Transports() {
		if tr.Name == "" || seen[tr.Name] || tr.Description == "" || tr.check == nil || tr.open == nil {
			t.Errorf("transport %+v: a unique name, a description, a check and open are required", tr.Name)
		}
		seen[tr.Name] = true
		for _, f := range tr.Fields {
			if !slices.Contains(fields, f) {
				t.Errorf("%s takes %q, which a registration (Spec) does not have", tr.Name, f)
			}
		}
	}
}
