package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestE2ESSOSignIn: a person clicks "Sign in with …", fills the
// provider's own login form in Chromium and lands in the console signed
// in as themselves. Toolbelt is reached as localhost and the provider as
// 127.0.0.1, two sites, so the browser treats the way back as a
// cross-site navigation, as with a real provider (the SameSite=Strict
// session cookie must still be sent once the sign-in has finished).
func TestE2ESSOSignIn(t *testing.T) {
	f := newSSONamed(t, "localhost")
	e := newE2EAt(t, f.app, f.public)
	e.run("open the console",
		chromedp.Navigate(e.URL+"/admin/tools"),
		chromedp.WaitVisible(tid("sign-in-sso")),
	)
	if got := e.text(tid("sign-in-sso")); got != "Sign in with Test IdP" {
		t.Fatalf("sign-in button %q", got)
	}
	e.run("sign in at the provider",
		chromedp.Click(tid("sign-in-sso")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "alice"),
		chromedp.SendKeys(chromedp.CSS("#password"), "alice-pw"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(tid("user")),
		loaded(),
	)
	if user, role := e.text(tid("user")), e.text(tid("role")); user != "alice" || role != "admin" {
		t.Fatalf("signed in as %q (%s), want alice (admin)", user, role)
	}
	url, err := chromedp.Run(e.ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil || url != f.public+"/admin/tools" {
		t.Fatalf("landed at %q (%v), want %s/admin/tools", url, err, f.public)
	}
}
