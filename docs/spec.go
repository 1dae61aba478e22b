// Package docs holds the API document swag generates from the handlers'
// annotations (swagger.json, Swagger 2.0) and its OpenAPI 3.0 form
// (openapi3.json), both embedded for the server to serve.
package docs

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
)

// JSON is the generated OpenAPI (Swagger 2.0) document, served at
// /swagger/doc.json, as swag wrote it. "make generate" has swag write no Go
// (docs.go) besides: that file registers the document with swag's root
// package, which is its parser and would link go/types and
// golang.org/x/tools into the server.
//
//go:embed swagger.json
var JSON []byte

// OpenAPI3JSON is openapi3.json, what OpenAPI3 makes of JSON, written by
// "make generate" (docs/openapi3) so the generated Go client (client/) and
// /openapi.json are one document, and its changes show in review.
//
//go:embed openapi3.json
var OpenAPI3JSON []byte

// OpenAPI3 converts the generated document to OpenAPI 3.0 (kin-openapi),
// for the client generators that want it, with its free-form fields made
// explicit (freeForm). It is indented, with a final newline, as
// openapi3.json is committed.
func OpenAPI3() ([]byte, error) {
	var v2 openapi2.T
	if err := json.Unmarshal(JSON, &v2); err != nil {
		return nil, fmt.Errorf("read the generated OpenAPI document: %w", err)
	}
	v3, err := openapi2conv.ToV3(&v2)
	if err != nil {
		return nil, fmt.Errorf("convert the OpenAPI document to version 3: %w", err)
	}
	if err := freeForm(v3); err != nil {
		return nil, fmt.Errorf("convert the OpenAPI document to version 3: %w", err)
	}
	if err := renderings(v3); err != nil {
		return nil, fmt.Errorf("convert the OpenAPI document to version 3: %w", err)
	}
	out, err := json.MarshalIndent(v3, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("write the OpenAPI 3 document: %w", err)
	}
	return append(out, '\n'), nil
}
