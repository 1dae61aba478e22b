package mcpserver

import (
	"encoding/json"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolbelt/services/selection"
)

// listPages is how many decoded tools/list pages the server keeps: the
// whole list of 10,000 tools of a few principals who see different tools
// (PageSize each). Principals who see the same tools share pages.
const listPages = 64

// listPage is one catalog page of tools/list, decoded from the stored
// renderings: the tools after the server's own, and the cursor's name.
// Its tools are shared by every answer that lists them: never changed.
type listPage struct {
	tools []*mcp.Tool
	next  string
	// stateless is the page's whole answer to a stateless tools/list,
	// encoded once (ServeStateless writes it as it is).
	stateless *encodedOnce
}

// encodedOnce is a result encoded by the first answer that needs it.
type encodedOnce struct {
	once sync.Once
	raw  json.RawMessage
	err  error
}

func (e *encodedOnce) get(encode func() (json.RawMessage, error)) (json.RawMessage, error) {
	e.once.Do(func() { e.raw, e.err = encode() })
	return e.raw, e.err
}

// pageKey names a page: what the caller sees (selection.CallableKey) and
// the name the page starts after.
type pageKey struct {
	callable selection.CallableKey
	after    string
}

// listCache keeps the pages of tools/list decoded (BenchmarkMCPToolsList10k:
// reading a page's 500 stored renderings and decoding them was three
// quarters of a page's time). A page is kept under the key it was read
// with, and only when the key did not change while it was read, so a
// revoked grant, a new or retired tool or a cluster peer's change (each a
// new key) is listed at the very next request. When the catalog's index
// changes the pages of the old one go, with it.
type listCache struct {
	mu      sync.Mutex
	catalog selection.CallableKey
	pages   *lru.Cache[pageKey, listPage]
}

func newListCache() *listCache {
	pages, err := lru.New[pageKey, listPage](listPages)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &listCache{pages: pages}
}

func (c *listCache) get(k pageKey) (listPage, bool) { return c.pages.Get(k) }

// put keeps page under k, dropping the pages of an older index first.
func (c *listCache) put(k pageKey, page listPage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.catalog.SameCatalog(k.callable) {
		c.pages.Purge()
		c.catalog = k.callable
	}
	c.pages.Add(k, page)
}
