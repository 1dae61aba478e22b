package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
)

// schemaKey is the Setting holding the fingerprint of the schema the
// database was last migrated to.
const schemaKey = "schema"

// schemaModels are the tables migrate makes, one model each.
func schemaModels() []any {
	return []any{&Tool{}, &ToolVersion{}, &ToolExport{}, &Principal{}, &APIKey{},
		&ToolEmbedding{}, &LearnedQuery{}, &Selection{}, &Call{}, &Approval{}, &Callback{}, &ConsoleSession{}, &OIDCLogin{}, &ToolFileRecord{}, &CasbinRule{}, &Setting{}, &RetrievalOutcome{}, &RateCount{}, &AuditEntry{}, &QueueTicket{}, &Lease{}, &AlertState{}, &Upstream{}, &UpstreamTool{}, &Identity{},
		&OAuthClient{}, &OAuthAuthRequest{}, &OAuthGrant{}, &OAuthToken{}, &OAuthKey{}, &Credential{}, &ConnectState{}}
}

// schemaFingerprint sums everything migrate's outcome depends on: each
// model's table name, fields, their types and tags (embedded structs
// included), the hand-written index statements, and the versions of gorm
// and its drivers. Any change to them changes it, so a database whose
// stored fingerprint matches has nothing to migrate.
func schemaFingerprint() string {
	h := sha256.New()
	for _, m := range schemaModels() {
		if named, ok := m.(interface{ TableName() string }); ok {
			fmt.Fprintln(h, "table", named.TableName())
		}
		writeStruct(h, reflect.TypeOf(m).Elem())
	}
	for _, ddl := range slices.Concat(callIndexes, casbinIndexes) {
		fmt.Fprintln(h, ddl)
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.HasPrefix(dep.Path, "gorm.io/") {
				fmt.Fprintln(h, dep.Path, dep.Version)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeStruct writes t's name and fields to h, descending into the
// structs gorm flattens into the table (embedded ones).
func writeStruct(h hash.Hash, t reflect.Type) {
	fmt.Fprintln(h, "struct", t.PkgPath(), t.Name())
	for i := range t.NumField() {
		f := t.Field(i)
		fmt.Fprintf(h, "%s %s %q\n", f.Name, f.Type, f.Tag)
		if f.Type.Kind() == reflect.Struct && (f.Anonymous || strings.Contains(f.Tag.Get("gorm"), "embedded")) {
			writeStruct(h, f.Type)
		}
	}
}

// schemaIs reports whether the database says it was migrated to the
// schema of fingerprint. Any error (no settings table yet: a new
// database) is a no: migrate then runs and says what is wrong.
func (s *Store) schemaIs(ctx context.Context, fingerprint string) bool {
	stored, err := s.Setting(ctx, schemaKey)
	return err == nil && stored == fingerprint
}
