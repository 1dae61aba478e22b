package redact

import "testing"

// TestRedactLeavesCode: code that handles credentials without holding one
// is left alone.
func TestRedactLeavesCode(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`const user = { name, password: hashedPassword };`,
		`password := u.Password`,
		`def login(self, username: str, secret: Optional[str] = None):`,
		`password = request.form["password"]`,
		`password: ${{ secrets.DB_PASSWORD }}`,
		`headers["Authorization"] = "Bearer " + token`,
		`Authorization: Bearer <token>`,
		`-H "Authorization: Bearer $(gcloud auth print-access-token)"`,
		`DATABASE_URL=postgres://user:password@localhost:5432/app`,
		`git clone https://github.com/acme/infra.git`,
	} {
		if got := r.Redact(s); got != s {
			t.Errorf("altered %q -> %q", s, got)
		}
	}
}
