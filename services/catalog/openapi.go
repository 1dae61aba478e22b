package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"toolbelt/models"
	"toolbelt/services/netpolicy"
	"toolbelt/services/tooldef"
)

// Bounds of an OpenAPI import.
const (
	// MaxOpenAPIDocumentBytes caps a document fetched from a URL (one sent
	// in the body is capped by the request size already).
	MaxOpenAPIDocumentBytes = 4 << 20
	// openAPIFetchTimeout bounds fetching a document from a URL.
	openAPIFetchTimeout = 30 * time.Second
	// ImportedToolVersion is the version every imported tool starts at.
	ImportedToolVersion = "1.0.0"
	// maxRefDepth bounds how deep $refs are expanded into a parameters
	// schema; deeper (or recursive) references become an open schema.
	maxRefDepth = 12
	// maxSchemaNodes bounds the schema objects one operation's parameters
	// may expand to, so a small document whose schemas refer to each other
	// many times over cannot make an exponentially large schema; past it,
	// references are left unexpanded (and the registry's size limit will
	// usually refuse the tool).
	maxSchemaNodes = 20_000
	// MaxImportOperations caps the tools one import makes: past it, the
	// admin filters by tags or operations and imports in parts.
	MaxImportOperations = 500
)

// OpenAPIImporter turns the operations of an OpenAPI 3 or Swagger 2
// document into http tools and registers them through the registry.
type OpenAPIImporter struct {
	registry *Registry
	net      netpolicy.Policy
	client   *http.Client
	log      *slog.Logger
}

// NewOpenAPIImporter returns an importer that registers through registry
// and fetches documents by URL under netPolicy, the same SSRF policy tool
// calls follow.
func NewOpenAPIImporter(registry *Registry, netPolicy netpolicy.Policy, log *slog.Logger) *OpenAPIImporter {
	return &OpenAPIImporter{registry: registry, net: netPolicy, client: netPolicy.Client(), log: log}
}

// OpenAPIImportRequest is what to import: exactly one of Document (JSON or
// YAML) and URL.
type OpenAPIImportRequest struct {
	Document []byte
	URL      string
	// BaseURL replaces the document's first server URL.
	BaseURL string
	// Prefix is put before every tool name, with an underscore.
	Prefix string
	// Tags keeps only operations carrying one of these OpenAPI tags.
	Tags []string
	// Operations keeps only the operations with these operationIds.
	Operations []string
	DryRun     bool
	// Update publishes a new version of each tool the document changes
	// (the next patch version) instead of refusing names already
	// registered; tools it leaves as they are stay at their version.
	Update bool
}

// ImportedOperation is one operation of the document and the tool made of
// it, with the registry's problems (pointers into the tool definition) and
// notes on what the tool leaves out.
type ImportedOperation struct {
	Method      string `json:"method" example:"GET"`
	Path        string `json:"path" example:"/pets/{petId}"`
	OperationID string `json:"operation_id,omitempty" example:"showPetById"`
	// Pointer locates the operation in the document (RFC 6901).
	Pointer  string              `json:"pointer" example:"/paths/~1pets~1{petId}/get"`
	Tool     *tooldef.Definition `json:"tool,omitempty"`
	Problems []models.Problem    `json:"problems,omitempty"`
	Notes    []string            `json:"notes,omitempty"`
}

// ImportedTool names a tool an import registered.
type ImportedTool struct {
	Name    string `json:"name" example:"show_pet_by_id"`
	Version string `json:"version" example:"1.0.0"`
}

// OpenAPIImportResult is the outcome of an import or of its dry run.
type OpenAPIImportResult struct {
	Title      string              `json:"title" example:"Swagger Petstore"`
	APIVersion string              `json:"api_version" example:"1.0.0"`
	DryRun     bool                `json:"dry_run"`
	Operations []ImportedOperation `json:"operations"`
	Registered []ImportedTool      `json:"registered,omitempty"`
	// Updated are the new versions an update published; Unchanged, the
	// tools it left as they were.
	Updated   []ImportedTool `json:"updated,omitempty"`
	Unchanged []ImportedTool `json:"unchanged,omitempty"`
}

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Import reads the document, builds one http tool per operation and, unless
// it is a dry run, registers them all or none. A dry run reports every
// operation with its tool or its problems; a real import with any problem
// is a *models.ValidationError listing them by operation, and a name that
// is already registered is models.ErrConflict: only new names are
// imported (use a prefix, or publish new versions one by one).
func (im *OpenAPIImporter) Import(ctx context.Context, req OpenAPIImportRequest, by *models.Principal) (*OpenAPIImportResult, error) {
	var ps models.Problems
	hasDoc, hasURL := len(bytes.TrimSpace(req.Document)) > 0, strings.TrimSpace(req.URL) != ""
	switch {
	case hasDoc && hasURL:
		ps.Add("", "send exactly one of document and url, not both")
	case !hasDoc && !hasURL:
		ps.Add("", "send the OpenAPI document as document, or its address as url")
	}
	if req.Prefix != "" && !prefixPattern.MatchString(req.Prefix) {
		ps.Add("/prefix", "%q must be a lowercase letter, then up to 31 lowercase letters, digits or underscores", req.Prefix)
	}
	if req.BaseURL != "" {
		if msg := checkBaseURL(req.BaseURL); msg != "" {
			ps.Add("/base_url", "%s", msg)
		}
	}
	if len(ps) > 0 {
		return nil, &models.ValidationError{What: "OpenAPI import", Problems: ps}
	}
	data, where := req.Document, "/document"
	var source *url.URL
	if hasURL {
		var err error
		where = "/url"
		if data, source, err = im.fetch(ctx, strings.TrimSpace(req.URL)); err != nil {
			return nil, err
		}
	}
	doc, err := parseOpenAPI(ctx, data, where, req.Tags, req.Operations)
	if err != nil {
		return nil, err
	}
	base := req.BaseURL
	if base == "" {
		if base, err = serverURL(doc, source); err != nil {
			return nil, err
		}
	}
	root, err := documentTree(doc)
	if err != nil {
		return nil, fmt.Errorf("import openapi: %w", err)
	}
	res := &OpenAPIImportResult{DryRun: req.DryRun, Operations: []ImportedOperation{}}
	if doc.Info != nil {
		res.Title, res.APIVersion = doc.Info.Title, doc.Info.Version
	}
	b := &toolBuilder{base: strings.TrimRight(base, "/"), prefix: req.Prefix, title: res.Title,
		refs: &refResolver{root: root}, names: map[string]bool{}}
	var ops []operation
	for _, op := range operationsOf(doc) {
		if wanted(op.op, req.Tags, req.Operations) {
			ops = append(ops, op)
		}
	}
	switch n := len(ops); {
	case n == 0:
		return nil, &models.ValidationError{What: "OpenAPI import", Problems: []models.Problem{{
			Pointer: where, Message: "holds no operation to import (check the tags and operations filters)"}}}
	case n > MaxImportOperations:
		return nil, tooMany(where, n)
	}
	for _, op := range ops {
		res.Operations = append(res.Operations, b.build(op))
	}
	// Check every tool as the registry would store it. Problems the
	// registry finds refuse the import (422); names already taken only
	// conflict (409), as POST /tools does.
	var refused []models.Problem
	var taken []string
	var defs, updates []tooldef.Definition
	for i := range res.Operations {
		op := &res.Operations[i]
		if op.Tool == nil {
			continue
		}
		checked, err := im.registry.Check(ctx, *op.Tool)
		var ve *models.ValidationError
		switch {
		case errors.As(err, &ve):
			op.Problems = append(op.Problems, ve.Problems...)
		case err != nil:
			return nil, err
		default:
			*op.Tool = checked
		}
		for _, p := range op.Problems {
			refused = append(refused, models.Problem{Pointer: pointerIn(where, op.Pointer),
				Message: fmt.Sprintf("%s %s (tool %s): %s %s", op.Method, op.Path, op.Tool.Name, p.Pointer, p.Message)})
		}
		isTaken, err := im.registry.Taken(ctx, op.Tool.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case isTaken && req.Update && len(op.Problems) == 0:
			version, changed, err := im.nextVersion(ctx, *op.Tool)
			if err != nil {
				return nil, err
			}
			if !changed {
				op.Notes = append(op.Notes, fmt.Sprintf("unchanged: %s stays at version %s", op.Tool.Name, version))
				res.Unchanged = append(res.Unchanged, ImportedTool{Name: op.Tool.Name, Version: version})
				continue
			}
			op.Tool.Version = version
			op.Notes = append(op.Notes, fmt.Sprintf("changed: %s gets version %s", op.Tool.Name, version))
			updates = append(updates, *op.Tool)
			continue
		case isTaken && !req.Update:
			op.Problems = append(op.Problems, models.Problem{Pointer: "/name",
				Message: fmt.Sprintf("tool %q is already registered; only new names are imported (choose a prefix, or send update)", op.Tool.Name)})
			taken = append(taken, op.Tool.Name)
		}
		defs = append(defs, *op.Tool)
	}
	if req.DryRun {
		return res, nil
	}
	switch {
	case len(refused) > 0:
		return nil, &models.ValidationError{What: "OpenAPI import: no tool was registered", Problems: refused}
	case len(taken) > 0:
		return nil, models.ErrConflict.Errorf("tools %s are already registered; no tool was imported (choose a prefix, send \"update\": true to publish new versions of the changed ones, or publish with PUT /api/v1/tools/{name})", strings.Join(taken, ", "))
	case len(defs)+len(updates)+len(res.Unchanged) == 0:
		return nil, &models.ValidationError{What: "OpenAPI import", Problems: []models.Problem{{
			Pointer: where, Message: "none of its operations can become a tool (see the notes of a dry run)"}}}
	}
	tools, updated, err := im.registry.ImportAll(ctx, defs, updates, by)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		res.Registered = append(res.Registered, ImportedTool{Name: t.Name, Version: t.Version})
	}
	for _, t := range updated {
		res.Updated = append(res.Updated, ImportedTool{Name: t.Name, Version: t.Version})
	}
	im.log.InfoContext(ctx, "openapi imported", "title", res.Title, "tools", len(tools), "updated", len(updated),
		"unchanged", len(res.Unchanged), "by", models.ActorName(by))
	return res, nil
}

// nextVersion is, for a tool an update imports again, its current
// version when def is what it holds, or else the patch version after the
// highest it has had.
func (im *OpenAPIImporter) nextVersion(ctx context.Context, def tooldef.Definition) (string, bool, error) {
	t, v, err := im.registry.store.ToolByName(ctx, def.Name, true)
	if err != nil {
		return "", false, err
	}
	cur, err := im.registry.view(t, v)
	if err != nil {
		return "", false, err
	}
	if !cur.Retired && sameDefinition(cur.Definition, def) {
		return cur.Version, false, nil
	}
	next, err := im.registry.NextPatch(ctx, def.Name)
	return next, true, err
}

// pointerIn places a pointer into the document under where it came from:
// /document/... for a document in the body; a fetched document's own
// pointer for url.
func pointerIn(where, ptr string) string {
	if where == "/document" {
		return where + ptr
	}
	return ptr
}

func checkBaseURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q must be an absolute http or https URL", raw)
	case u.Host == "" || u.User != nil:
		return fmt.Sprintf("%q must name a host and carry no credentials", raw)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("%q must not have a query or fragment", raw)
	case strings.Contains(raw, "{") || strings.Contains(raw, "}"):
		return fmt.Sprintf("%q must not hold placeholders", raw)
	}
	return ""
}

// fetch reads a document from a URL with the SSRF-guarded client the http
// tools use, up to MaxOpenAPIDocumentBytes.
func (im *OpenAPIImporter) fetch(ctx context.Context, raw string) ([]byte, *url.URL, error) {
	bad := func(format string, args ...any) error {
		return &models.ValidationError{What: "OpenAPI import", Problems: []models.Problem{{Pointer: "/url", Message: fmt.Sprintf(format, args...)}}}
	}
	if msg := im.net.CheckURL(raw); msg != "" {
		return nil, nil, bad("%s", msg)
	}
	ctx, cancel := context.WithTimeout(ctx, openAPIFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, nil, bad("%q is not a URL: %v", raw, err)
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	req.Header.Set("User-Agent", "Toolbelt/1 (+openapi-import)")
	resp, err := im.client.Do(req)
	if err != nil {
		if errors.Is(err, netpolicy.ErrAddressRefused) {
			return nil, nil, bad("leads to an internal address, which is not allowed")
		}
		return nil, nil, bad("could not be fetched: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, bad("answered %s; want 200 with the document", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxOpenAPIDocumentBytes+1))
	if err != nil {
		return nil, nil, bad("could not be read: %v", err)
	}
	if len(data) > MaxOpenAPIDocumentBytes {
		return nil, nil, bad("holds a document larger than %d bytes", MaxOpenAPIDocumentBytes)
	}
	// Relative servers resolve against where the document really came
	// from, after any redirect.
	return data, resp.Request.URL, nil
}

// parseOpenAPI reads JSON or YAML and loads it as OpenAPI 3, or as Swagger
// 2 converted to OpenAPI 3, then validates it. External $refs are refused
// by the loader: nothing else is ever fetched.
//
// The operations the tags and ids filters keep are counted before the
// document is loaded, and more than MaxImportOperations refused: a
// document of tens of thousands of operations took the OpenAPI library
// half a minute and most of a gigabyte to refuse on the loaded count.
func parseOpenAPI(ctx context.Context, data []byte, where string, tags, ids []string) (*openapi3.T, error) {
	bad := func(format string, args ...any) error {
		return &models.ValidationError{What: "OpenAPI document", Problems: []models.Problem{{Pointer: where, Message: fmt.Sprintf(format, args...)}}}
	}
	if !utf8.Valid(data) {
		return nil, bad("is not UTF-8 text")
	}
	top, asIs, err := decodeOpenAPI(data, where, tags, ids)
	if err != nil {
		return nil, err
	}
	js := data
	if !asIs {
		var err error
		// jsonValue: YAML reads unquoted response codes (200:) as
		// numbers and dates as times, which JSON cannot hold as keys.
		if js, err = json.Marshal(jsonValue(top)); err != nil {
			return nil, bad("cannot be read as JSON: %v", err)
		}
	}
	var doc *openapi3.T
	openapiVersion, _ := top["openapi"].(string)
	swaggerVersion := fmt.Sprint(top["swagger"])
	switch {
	case strings.HasPrefix(openapiVersion, "3."):
		loader := openapi3.NewLoader()
		loader.Context = ctx
		loader.IsExternalRefsAllowed = false
		d, err := loader.LoadFromData(js)
		if err != nil {
			return nil, bad("is not a valid OpenAPI %s document: %v", openapiVersion, err)
		}
		doc = d
	case top["swagger"] != nil && (swaggerVersion == "2.0" || swaggerVersion == "2"):
		var d2 openapi2.T
		if err := json.Unmarshal(js, &d2); err != nil {
			return nil, bad("is not a valid Swagger 2.0 document: %v", err)
		}
		d, err := openapi2conv.ToV3(&d2)
		if err != nil {
			return nil, bad("is a Swagger 2.0 document that cannot be converted to OpenAPI 3: %v", err)
		}
		doc = d
	default:
		return nil, bad("is not an OpenAPI 3 or Swagger 2 document: it has neither \"openapi\": \"3.x\" nor \"swagger\": \"2.0\"")
	}
	if err := doc.Validate(ctx, openapi3.DisableExamplesValidation()); err != nil {
		return nil, bad("is not a valid OpenAPI document: %v", err)
	}
	if doc.Paths == nil || doc.Paths.Len() == 0 {
		return nil, bad("has no paths, so no operation to import")
	}
	return doc, nil
}

// serverURL is the document's first server with its variables at their
// defaults, resolved against the address it was fetched from when it is
// relative.
func serverURL(doc *openapi3.T, source *url.URL) (string, error) {
	need := func(format string, args ...any) error {
		return &models.ValidationError{What: "OpenAPI import", Problems: []models.Problem{{Pointer: "/base_url", Message: fmt.Sprintf(format, args...)}}}
	}
	if len(doc.Servers) == 0 || doc.Servers[0] == nil {
		return "", need("is required: the document names no server")
	}
	srv := doc.Servers[0]
	raw := srv.URL
	for name, v := range srv.Variables {
		if v != nil {
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", need("is required: the document's server %q is not a URL", srv.URL)
	}
	if !u.IsAbs() {
		if source == nil {
			return "", need("is required: the document's server %q is relative", srv.URL)
		}
		u = source.ResolveReference(u)
	}
	u.RawQuery, u.Fragment = "", ""
	if msg := checkBaseURL(u.String()); msg != "" {
		return "", need("is required: the document's server %s", msg)
	}
	return u.String(), nil
}

// documentTree is the loaded document as plain JSON values, in which the
// $refs of schemas are resolved.
func documentTree(doc *openapi3.T) (map[string]any, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return root, dec.Decode(&root)
}

// operation is one method of one path.
type operation struct {
	method, path string
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

// operationsOf lists the operations in a stable order: by path, then by
// method.
func operationsOf(doc *openapi3.T) []operation {
	paths := doc.Paths.Map()
	keys := make([]string, 0, len(paths))
	for k := range paths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []operation
	for _, p := range keys {
		item := paths[p]
		if item == nil {
			continue
		}
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"} {
			if op := item.GetOperation(m); op != nil {
				out = append(out, operation{method: m, path: p, item: item, op: op})
			}
		}
	}
	return out
}

// decodeOpenAPI decodes a JSON or YAML document into plain values,
// refusing one with more than MaxImportOperations operations to import
// before the costly part of its decoding. JSON is decoded as JSON: the
// YAML decoder took seconds and most of a gigabyte for a 3 MB JSON
// document. YAML is parsed to nodes (linear in its size), counted, and
// decoded without the path items the filters leave out: decoding a
// mapping checks each key against the ones before it, so a mapping of
// 20,000 paths took seconds where its nodes took a tenth of one. A '{'
// document that is not JSON (YAML's flow style) goes the YAML way. The
// path items the filters leave out are dropped (they are not imported,
// and the OpenAPI library need not load them); asIs says data is JSON
// still holding all of top.
func decodeOpenAPI(data []byte, where string, tags, ids []string) (top map[string]any, asIs bool, err error) {
	bad := func(format string, args ...any) error {
		return &models.ValidationError{What: "OpenAPI document", Problems: []models.Problem{{Pointer: where, Message: fmt.Sprintf(format, args...)}}}
	}
	notOpenAPI := bad("is not an OpenAPI document: expected an object with \"openapi\" or \"swagger\"")
	filtered := len(tags) > 0 || len(ids) > 0
	var tree any
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' && json.Unmarshal(t, &tree) == nil {
		top, ok := tree.(map[string]any)
		if !ok {
			return nil, false, notOpenAPI
		}
		if n := countOperations(top, tags, ids); n > MaxImportOperations {
			return nil, false, tooMany(where, n)
		}
		return top, !filtered, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, false, bad("is neither JSON nor YAML: %v", err)
	}
	if n := countNodeOperations(&root, tags, ids); n > MaxImportOperations {
		return nil, false, tooMany(where, n)
	}
	if err := root.Decode(&tree); err != nil {
		return nil, false, bad("is neither JSON nor YAML: %v", err)
	}
	top, ok := tree.(map[string]any)
	if !ok {
		return nil, false, notOpenAPI
	}
	return top, false, nil
}

// countNodeOperations counts, and keeps in the document, the operations
// of a parsed YAML document that the filters keep, as countOperations
// does on decoded values; path items holding none are dropped from it.
func countNodeOperations(root *yaml.Node, tags, ids []string) int {
	top := deref(root)
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = deref(top.Content[0])
	}
	paths := field(top, "paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return 0
	}
	n := 0
	kept := paths.Content[:0:0]
	for i := 0; i+1 < len(paths.Content); i += 2 {
		item, found := deref(paths.Content[i+1]), 0
		for _, m := range httpMethods {
			op := field(item, m)
			if op == nil {
				continue
			}
			var opTags []string
			if ts := field(op, "tags"); ts != nil && ts.Kind == yaml.SequenceNode {
				for _, t := range ts.Content {
					opTags = append(opTags, deref(t).Value)
				}
			}
			var id string
			if f := field(op, "operationId"); f != nil {
				id = f.Value
			}
			if wanted(&openapi3.Operation{OperationID: id, Tags: opTags}, tags, ids) {
				found++
			}
		}
		if found > 0 || item.Kind != yaml.MappingNode {
			kept = append(kept, paths.Content[i], paths.Content[i+1])
		}
		n += found
	}
	if len(tags) > 0 || len(ids) > 0 {
		paths.Content = kept
	}
	return n
}

// field is the value of key in a YAML mapping node, or nil.
func field(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return deref(m.Content[i+1])
		}
	}
	return nil
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		return n.Alias
	}
	return n
}

// tooMany refuses an import of n operations, over the cap.
func tooMany(where string, n int) error {
	return &models.ValidationError{What: "OpenAPI import", Problems: []models.Problem{{
		Pointer: where, Message: fmt.Sprintf("holds %d operations; import at most %d at once (filter by tags or operations)", n, MaxImportOperations)}}}
}

// httpMethods are the keys of a path item that are operations, in
// OpenAPI 3 and Swagger 2 alike.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// countOperations counts the operations of a decoded document (its
// paths, as plain maps) that the tags and operation ids filters keep, as
// wanted does on the loaded one; with a filter, path items holding none
// are dropped from it.
func countOperations(top map[string]any, tags, ids []string) int {
	paths, _ := top["paths"].(map[string]any)
	n := 0
	for path, item := range paths {
		item, isMap := item.(map[string]any)
		found := 0
		for _, m := range httpMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			id, _ := op["operationId"].(string)
			var opTags []string
			if ts, ok := op["tags"].([]any); ok {
				for _, t := range ts {
					if s, ok := t.(string); ok {
						opTags = append(opTags, s)
					}
				}
			}
			if wanted(&openapi3.Operation{OperationID: id, Tags: opTags}, tags, ids) {
				found++
			}
		}
		if found == 0 && isMap && (len(tags) > 0 || len(ids) > 0) {
			delete(paths, path)
		}
		n += found
	}
	return n
}

func wanted(op *openapi3.Operation, tags, ids []string) bool {
	if len(ids) > 0 && !slices.Contains(ids, op.OperationID) {
		return false
	}
	if len(tags) > 0 && !slices.ContainsFunc(op.Tags, func(t string) bool { return slices.Contains(tags, t) }) {
		return false
	}
	return true
}

// toolBuilder makes tool definitions of operations, keeping names unique
// within one document.
type toolBuilder struct {
	base, prefix, title string
	refs                *refResolver
	names               map[string]bool
}

// Security levels of imported tools, by HTTP method. GET and HEAD only
// read, but they read someone else's API with the server's network
// position (and, once an admin adds one, its credentials), so they are
// moderate rather than safe: an agent then needs the api category, not
// just a grant by name. DELETE destroys, so it is dangerous and each call
// waits for a human's approval. Every other method changes data the way
// its API intends: moderate. An admin can publish a new version with
// another level.
func importedLevel(method string) string {
	switch method {
	case http.MethodDelete:
		return tooldef.LevelDangerous
	default:
		return tooldef.LevelModerate
	}
}

// credentialHeaders are header parameters OpenAPI tells clients to ignore
// (Accept, Content-Type, Authorization) or that carry a secret an agent
// must never supply: an admin adds them as {{env.NAME}} instead.
func credentialHeader(name string) bool {
	switch strings.ToLower(name) {
	case "accept", "content-type", "authorization":
		return true
	}
	return tooldef.SecretHeader.MatchString(name)
}

var pathParam = regexp.MustCompile(`\{([^{}]+)\}`)

func (b *toolBuilder) build(o operation) ImportedOperation {
	b.refs.nodes = 0
	out := ImportedOperation{Method: o.method, Path: o.path, OperationID: o.op.OperationID,
		Pointer: "/paths/" + tooldef.EscapePointer(o.path) + "/" + strings.ToLower(o.method)}
	if !slices.Contains(tooldef.HTTPMethods, o.method) {
		out.Notes = append(out.Notes, fmt.Sprintf("%s is not a method http tools send; the operation is left out", o.method))
		return out
	}
	props := map[string]any{}
	var required []string
	used := map[string]bool{}
	propName := func(name string) string {
		p := uniqueName(sanitizeProperty(name), used, 64)
		used[p] = true
		return p
	}
	headers := map[string]string{}
	pathProps := map[string]string{}
	var query []string
	for _, p := range mergedParameters(o.item.Parameters, o.op.Parameters) {
		schema := b.paramSchema(p)
		where := p.In + " parameter " + p.Name
		var prop string
		switch p.In {
		case openapi3.ParameterInPath:
			prop = propName(p.Name)
			pathProps[p.Name] = prop
			props[prop] = describe(schema, p.Description, where)
			required = append(required, prop)
			continue
		case openapi3.ParameterInQuery:
			if isType(schema, "object") {
				out.Notes = append(out.Notes, where+" is an object, which the http runner cannot send in a query; it is left out")
				continue
			}
			prop = propName(p.Name)
			query = append(query, url.QueryEscape(p.Name)+"={{"+prop+"}}")
			props[prop] = describe(schema, p.Description, where)
		case openapi3.ParameterInHeader:
			if credentialHeader(p.Name) {
				out.Notes = append(out.Notes, where+" is left out: it carries a credential or is set by the runner; publish a new version with it as {{env.NAME}}")
				continue
			}
			if isType(schema, "object") || isType(schema, "array") {
				out.Notes = append(out.Notes, where+" is not a single value, which a header template cannot send; it is left out")
				continue
			}
			prop = propName(p.Name)
			headers[p.Name] = "{{" + prop + "}}"
			props[prop] = describe(schema, p.Description, where)
		default:
			out.Notes = append(out.Notes, where+" is left out: http tools send no cookies")
			continue
		}
		if p.Required {
			required = append(required, prop)
		}
	}
	// A path template variable nobody declared still has to be filled.
	tmplPath := pathParam.ReplaceAllStringFunc(o.path, func(m string) string {
		name := m[1 : len(m)-1]
		prop, ok := pathProps[name]
		if !ok {
			prop = propName(name)
			pathProps[name] = prop
			props[prop] = map[string]any{"type": "string", "description": "path parameter " + name}
			required = append(required, prop)
		}
		return "{{" + prop + "}}"
	})
	body := ""
	if rb := o.op.RequestBody; rb != nil && rb.Value != nil {
		mt, schema := jsonContent(rb.Value.Content)
		switch {
		case schema != nil:
			prop := propName("body")
			props[prop] = describe(b.refs.schema(schema), rb.Value.Description, "request body ("+mt+")")
			body = "{{" + prop + "}}"
			// The runner sends application/json; a JSON variant such as
			// application/merge-patch+json is named as the API expects.
			if base := strings.TrimSpace(strings.Split(mt, ";")[0]); !strings.EqualFold(base, "application/json") && base != "*/*" {
				headers["Content-Type"] = base
			}
			if rb.Value.Required {
				required = append(required, prop)
			}
		case len(rb.Value.Content) > 0:
			types := make([]string, 0, len(rb.Value.Content))
			for k := range rb.Value.Content {
				types = append(types, k)
			}
			sort.Strings(types)
			out.Notes = append(out.Notes, "the request body ("+strings.Join(types, ", ")+") is not JSON, which the http runner cannot send; the tool sends none")
		}
	}
	target := b.base + tmplPath
	if len(query) > 0 {
		target += "?" + strings.Join(query, "&")
	}
	params := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		params["required"] = tooldef.Dedupe(required)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		out.Problems = append(out.Problems, models.Problem{Pointer: "/parameters", Message: "cannot be encoded: " + err.Error()})
		raw = nil
	}
	def := tooldef.Definition{
		Name:        b.toolName(o),
		Version:     ImportedToolVersion,
		Description: operationDescription(o, b.title),
		Category:    "api",
		Tags:        importedTags(o.op.Tags),
		Parameters:  raw,
		Security:    tooldef.Security{Level: importedLevel(o.method), Network: true},
		Execution:   tooldef.Execution{Timeout: tooldef.DefaultTimeoutMs},
		Runner:      tooldef.Runner{Kind: tooldef.RunnerHTTP, Method: o.method, URL: target, Body: body},
	}
	if len(headers) > 0 {
		def.Runner.Headers = headers
	}
	// Reads are idempotent, so a 5xx, 429 or timeout may be retried.
	if o.method == http.MethodGet || o.method == http.MethodHead {
		def.Execution.Retryable, def.Execution.MaxRetries = true, 2
	}
	out.Tool = &def
	return out
}

// mergedParameters applies an operation's parameters over its path's, by
// name and location, as OpenAPI says.
func mergedParameters(pathLevel, opLevel openapi3.Parameters) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	index := map[string]int{}
	for _, list := range []openapi3.Parameters{pathLevel, opLevel} {
		for _, ref := range list {
			if ref == nil || ref.Value == nil {
				continue
			}
			key := ref.Value.In + "\x00" + ref.Value.Name
			if i, ok := index[key]; ok {
				out[i] = ref.Value
				continue
			}
			index[key] = len(out)
			out = append(out, ref.Value)
		}
	}
	return out
}

func (b *toolBuilder) paramSchema(p *openapi3.Parameter) map[string]any {
	if p.Schema != nil {
		return b.refs.schema(p.Schema)
	}
	if _, s := jsonContent(p.Content); s != nil {
		return b.refs.schema(s)
	}
	return map[string]any{"type": "string"}
}

// jsonContent picks the JSON media type of a content map and its schema.
func jsonContent(c openapi3.Content) (string, *openapi3.SchemaRef) {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pick := func(ok func(string) bool) (string, *openapi3.SchemaRef) {
		for _, k := range keys {
			mt := strings.ToLower(strings.TrimSpace(strings.Split(k, ";")[0]))
			if ok(mt) && c[k] != nil {
				if c[k].Schema != nil {
					return k, c[k].Schema
				}
				return k, &openapi3.SchemaRef{Value: &openapi3.Schema{}}
			}
		}
		return "", nil
	}
	if k, s := pick(func(mt string) bool { return mt == "application/json" }); s != nil {
		return k, s
	}
	return pick(func(mt string) bool { return strings.HasSuffix(mt, "+json") || mt == "*/*" })
}

func isType(schema map[string]any, t string) bool {
	switch v := schema["type"].(type) {
	case string:
		return v == t
	case []any:
		return slices.Contains(v, any(t))
	}
	return false
}

// describe gives a property schema the parameter's description, and says
// where the value goes when nothing else does.
func describe(schema map[string]any, desc, where string) map[string]any {
	if _, ok := schema["description"]; !ok {
		if desc = strings.TrimSpace(desc); desc != "" {
			schema["description"] = desc
		} else {
			schema["description"] = where
		}
	}
	return schema
}

// toolName is the operationId in snake_case (or the method and path when
// there is none), after the prefix, unique within the document.
func (b *toolBuilder) toolName(o operation) string {
	base := SnakeCase(o.op.OperationID)
	if base == "" {
		base = SnakeCase(strings.ToLower(o.method) + " " + pathParam.ReplaceAllString(o.path, "by $1"))
	}
	if base == "" {
		base = "operation"
	}
	if b.prefix != "" {
		base = b.prefix + "_" + base
	}
	if base[0] < 'a' || base[0] > 'z' {
		base = "op_" + base
	}
	name := uniqueName(base, b.names, 64)
	b.names[name] = true
	return name
}

// uniqueName cuts base to max characters and adds _2, _3, … until it is
// not in used.
func uniqueName(base string, used map[string]bool, max int) string {
	cut := func(s string, n int) string {
		if len(s) > n {
			s = strings.TrimRight(s[:n], "_")
		}
		return s
	}
	name := cut(base, max)
	for i := 2; used[name]; i++ {
		suffix := "_" + strconv.Itoa(i)
		name = cut(base, max-len(suffix)) + suffix
	}
	return name
}

// SnakeCase turns findPetsByStatus, find-pets or "GET /pets" into
// find_pets_by_status, find_pets, get_pets: ASCII letters and digits only.
func SnakeCase(s string) string {
	var sb strings.Builder
	rs := []rune(s)
	sep := false
	for i, r := range rs {
		switch {
		case r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if unicode.IsUpper(r) && i > 0 && sb.Len() > 0 && !sep {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
					sb.WriteByte('_')
				}
			}
			if sep && sb.Len() > 0 {
				sb.WriteByte('_')
			}
			sep = false
			sb.WriteRune(unicode.ToLower(r))
		default:
			sep = true
		}
	}
	return sb.String()
}

// sanitizeProperty makes a parameter name a valid placeholder name:
// letters, digits and underscores, not starting with a digit.
func sanitizeProperty(name string) string {
	var sb strings.Builder
	for _, r := range name {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	s := strings.Trim(sb.String(), "_")
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "p_" + s
	}
	return s
}

// operationDescription is the summary and description, then where the
// call goes, within the registry's length limit.
func operationDescription(o operation, title string) string {
	var parts []string
	for _, s := range []string{o.op.Summary, o.op.Description} {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(parts, s) {
			parts = append(parts, strings.TrimRight(s, "."))
		}
	}
	call := o.method + " " + o.path
	if title != "" {
		call += " of " + title
	}
	parts = append(parts, "Calls "+call)
	d := strings.Join(parts, ". ") + "."
	if utf8.RuneCountInString(d) > tooldef.MaxDescriptionLen {
		d = string([]rune(d)[:tooldef.MaxDescriptionLen-1]) + "…"
	}
	return d
}

// importedTags are the operation's OpenAPI tags that fit the tag rules,
// plus "openapi".
func importedTags(tags []string) []string {
	out := []string{"openapi"}
	for _, t := range tags {
		t = strings.Trim(strings.Map(func(r rune) rune {
			r = unicode.ToLower(r)
			if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.' || r == '-') {
				return r
			}
			return '-'
		}, t), "-_.")
		if len(t) > 32 {
			t = t[:32]
		}
		if tooldef.TagPattern.MatchString(t) && !slices.Contains(out, t) && len(out) < tooldef.MaxTags {
			out = append(out, t)
		}
	}
	return out
}

// refResolver turns OpenAPI schemas into self-contained JSON Schema 2020-12:
// $refs into the document are expanded in place, and OpenAPI 3.0's own
// keywords become their JSON Schema equivalents.
type refResolver struct {
	root  map[string]any
	stack []string
	nodes int // schema objects made since the last reset
}

func (r *refResolver) schema(s *openapi3.SchemaRef) map[string]any {
	raw, err := json.Marshal(s)
	if err != nil {
		return map[string]any{}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return map[string]any{}
	}
	out, ok := r.convert(v).(map[string]any)
	if !ok {
		return map[string]any{}
	}
	return out
}

// Keywords whose values are maps of names to schemas.
var schemaMaps = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}

// Keywords whose values are data, not schemas.
var schemaData = map[string]bool{"enum": true, "const": true, "default": true, "examples": true, "required": true, "type": true}

func (r *refResolver) convert(v any) any {
	switch n := v.(type) {
	case []any:
		out := make([]any, len(n))
		for i, e := range n {
			out[i] = r.convert(e)
		}
		return out
	case map[string]any:
		r.nodes++
		if ref, ok := n["$ref"].(string); ok {
			return r.expand(ref, n)
		}
		out := map[string]any{}
		for k, val := range n {
			switch {
			case strings.HasPrefix(k, "x-"), k == "discriminator", k == "xml", k == "externalDocs", k == "nullable":
			case k == "example":
				if _, has := n["examples"]; !has {
					out["examples"] = []any{val}
				}
			case schemaData[k]:
				out[k] = val
			case schemaMaps[k]:
				if m, ok := val.(map[string]any); ok {
					mm := map[string]any{}
					for name, s := range m {
						mm[name] = r.convert(s)
					}
					out[k] = mm
				}
			default:
				out[k] = r.convert(val)
			}
		}
		// OpenAPI 3.0: nullable adds null to the type.
		if n["nullable"] == true {
			switch t := out["type"].(type) {
			case string:
				out["type"] = []any{t, "null"}
			case []any:
				if !slices.Contains(t, any("null")) {
					out["type"] = append(t, "null")
				}
			}
		}
		// OpenAPI 3.0: exclusiveMinimum/Maximum are booleans on minimum and
		// maximum; in JSON Schema 2020-12 they are the bounds themselves.
		for _, pair := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
			if b, ok := out[pair[0]].(bool); ok {
				delete(out, pair[0])
				if bound, has := out[pair[1]]; b && has {
					out[pair[0]] = bound
					delete(out, pair[1])
				}
			}
		}
		return out
	}
	return v
}

// expand replaces a $ref by a copy of what it points to (with any sibling
// keywords over it). A reference back into itself, or too deep, becomes an
// open schema that says so.
func (r *refResolver) expand(ref string, node map[string]any) any {
	if slices.Contains(r.stack, ref) || len(r.stack) >= maxRefDepth {
		return map[string]any{"description": "refers back to " + ref + " (not expanded)"}
	}
	if r.nodes > maxSchemaNodes {
		return map[string]any{"description": "refers to " + ref + " (not expanded: the schema is too large)"}
	}
	target, ok := r.lookup(ref)
	if !ok {
		return map[string]any{"description": "unresolved reference " + ref}
	}
	r.stack = append(r.stack, ref)
	out := r.convert(target)
	r.stack = r.stack[:len(r.stack)-1]
	m, ok := out.(map[string]any)
	if !ok {
		return out
	}
	if len(node) > 1 {
		siblings := map[string]any{}
		for k, v := range node {
			if k != "$ref" {
				siblings[k] = v
			}
		}
		for k, v := range r.convert(siblings).(map[string]any) {
			m[k] = v
		}
	}
	return m
}

// lookup follows a local JSON pointer ("#/components/schemas/Pet") into the
// document.
func (r *refResolver) lookup(ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	ptr, err := url.PathUnescape(frag) // a fragment is URI-decoded, then a JSON pointer (RFC 6901 §6)
	if err != nil {
		return nil, false
	}
	v, err := tooldef.Pointer(r.root, ptr)
	return v, err == nil
}
