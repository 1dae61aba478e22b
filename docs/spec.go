package docs

import _ "embed"

// JSON is the generated OpenAPI (Swagger 2.0) document, served at
// /swagger/doc.json. docs.go renders the same document through a template
// that writes an empty "host", which validators reject; this file is the
// document as swag wrote it.
//
//go:embed swagger.json
var JSON []byte
