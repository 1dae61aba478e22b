package clientdoc

import "fmt"

// ParseRegistration reads an RFC 7591 client registration request into a
// validated Client with no ID (the authorization server assigns it). The
// rules are a metadata document's: a public client with the
// authorization code flow and redirect URIs Toolbelt can trust.
func ParseRegistration(body []byte) (*Client, error) {
	const what = "client registration"
	if len(body) > DefaultMaxBytes {
		return nil, invalid(what, fmt.Errorf("the request is larger than %d bytes: send only the metadata Toolbelt reads (redirect_uris, client_name, grant_types, scope)", DefaultMaxBytes))
	}
	var m metadata
	if err := decode(body, &m); err != nil {
		return nil, invalid(what, fmt.Errorf("the request %w", err))
	}
	c, err := m.client("")
	if err != nil {
		return nil, invalid(what, err)
	}
	return c, nil
}
