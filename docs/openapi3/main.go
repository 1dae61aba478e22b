// Command openapi3 writes the OpenAPI 3.0 form of the generated Swagger 2.0
// document (docs.OpenAPI3, the conversion the server serves) to the file
// it is given. "make generate" runs it after swag, into docs/openapi3.json,
// which oapi-codegen reads to write the Go client.
package main

import (
	"fmt"
	"os"

	"toolbelt/docs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapi3 FILE")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "openapi3:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	v3, err := docs.OpenAPI3()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, v3, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
