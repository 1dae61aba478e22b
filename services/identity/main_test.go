package identity

import (
	"testing"

	"toolbelt/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
