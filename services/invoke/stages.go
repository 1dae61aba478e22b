package invoke

import (
	"strconv"
	"time"

	"toolbelt/models"
)

// try is one attempt of the execution: how long it took and the code it
// failed with ("" when it succeeded).
type try struct {
	took time.Duration
	code string
}

// stages is the JSON array of a call's steps as the chain ran them, for
// its record (models.Call.Stages): each timed guard that ran, with the
// time spent in the guard itself, then the execution and each of its
// attempts. Times are in microseconds; a guard's own time excludes the
// guards and the execution after it, the queue's includes its wait for
// a slot, and the execution's includes the backoff between attempts.
//
//	[{"stage":"resolve","us":14},…,{"stage":"execute","us":5120},
//	 {"stage":"attempt","n":1,"us":5100,"error":"TIMEOUT"}]
//
// It is empty when the chain was not timed (no metrics). Written by hand
// on the call path; TestStagesJSON checks it against encoding/json.
func (inv *Invoker) stages(c *call) string {
	if c.timing.ran == 0 {
		return ""
	}
	b := make([]byte, 0, 64+32*len(inv.pipeline.stageNames)+48*len(c.timing.tries))
	b = append(b, '[')
	first := true
	item := func(name string, d time.Duration) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"stage":"`...)
		b = append(b, name...)
		b = append(b, `","us":`...)
		b = strconv.AppendInt(b, d.Microseconds(), 10)
	}
	for i, name := range inv.pipeline.stageNames {
		if c.timing.ran&(1<<i) != 0 {
			item(name, c.timing.self[i])
			b = append(b, '}')
		}
	}
	if c.timing.ran&(1<<len(inv.pipeline.stageNames)) != 0 {
		item("execute", c.timing.self[len(inv.pipeline.stageNames)])
		b = append(b, '}')
		for n, t := range c.timing.tries {
			item("attempt", t.took)
			b = append(b, `,"n":`...)
			b = strconv.AppendInt(b, int64(n+1), 10)
			if t.code != "" {
				b = append(b, `,"error":`...)
				b = models.AppendJSONString(b, t.code)
			}
			b = append(b, '}')
		}
	}
	return string(append(b, ']'))
}
