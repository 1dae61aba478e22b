package console

import (
	"testing"

	"toolbelt/models"
)

// TestPersonMessage: an error's message goes into a sentence of the
// page's own ("Not added: …."), so it ends without a period of its own:
// "…work directory.. Do not retry" was one.
func TestPersonMessage(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{models.ErrInvalid.Errorf("the server does not start in its work directory."), "The server does not start in its work directory"},
		{models.ErrConflict.Errorf("key 3 is the last active admin key; issue another admin key first"), "Key 3 is the last active admin key; issue another admin key first"},
		{models.ErrInvalid.Errorf("done..."), "Done"},
	} {
		if got := personMessage(c.err); got != c.want {
			t.Errorf("personMessage(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
