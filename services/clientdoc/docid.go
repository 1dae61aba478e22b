package clientdoc

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// IsDocumentID reports whether clientID is a client ID metadata document
// URL: https, with a path other than "/", no fragment, no credentials and
// no dot segments. Any other client_id is a registered client's.
func IsDocumentID(clientID string) bool {
	return checkDocumentID(clientID) == nil
}

// checkDocumentID says why clientID is not a metadata document URL.
func checkDocumentID(clientID string) error {
	if len(clientID) > maxURI {
		return errors.New("is too long for a client_id")
	}
	u, err := url.Parse(clientID)
	switch {
	case err != nil:
		return errors.New("is not a URL")
	case u.Scheme != "https" || !strings.HasPrefix(clientID, "https://"):
		return errors.New("is not an https URL: a client ID metadata document is fetched over https only")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("names no host")
	case u.User != nil:
		return errors.New("carries credentials (user@): remove them")
	case strings.Contains(clientID, "#"):
		return errors.New("has a fragment: remove the #… part")
	case u.Path == "" || u.Path == "/":
		return errors.New("has no path: a client ID metadata document URL names the document, e.g. https://app.example/oauth/client.json")
	case slices.ContainsFunc(strings.Split(u.Path, "/"), func(s string) bool { return s == "." || s == ".." }):
		return errors.New("has a . or .. path segment: write the document's path as it is")
	}
	return nil
}
