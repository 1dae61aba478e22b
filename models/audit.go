package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The actions the audit log records: what admins and reviewers change.
const (
	AuditToolRegister     = "tool.register"
	AuditToolPublish      = "tool.publish"
	AuditToolRollback     = "tool.rollback"
	AuditToolRetire       = "tool.retire"
	AuditToolImport       = "tool.import"
	AuditPrincipalCreate  = "principal.create"
	AuditPrincipalDisable = "principal.disable"
	AuditPrincipalEnable  = "principal.enable"
	AuditPrincipalDelete  = "principal.delete"
	AuditPrincipalRole    = "principal.role"
	AuditKeyIssue         = "key.issue"
	AuditKeyRevoke        = "key.revoke"
	AuditGrantsSet        = "grants.set"
	AuditApprovalApprove  = "approval.approve"
	AuditApprovalDeny     = "approval.deny"
	AuditUpstreamAdd      = "upstream.add"
	AuditUpstreamUpdate   = "upstream.update"
	AuditUpstreamDisable  = "upstream.disable"
	AuditUpstreamEnable   = "upstream.enable"
	AuditUpstreamDelete   = "upstream.delete"
	// AuditUpstreamChange records an upstream serving a changed (or new)
	// tool definition, held pending; AuditUpstreamAccept an admin
	// accepting it.
	AuditUpstreamChange = "upstream.change"
	AuditUpstreamAccept = "upstream.accept"
	// AuditUpstreamRefuse records an upstream serving what cannot be a
	// Toolbelt tool (no name, a name served twice, a definition too
	// large or invalid), with why.
	AuditUpstreamRefuse = "upstream.refuse"
	// AuditUpstreamAlias records an admin renaming an upstream's tool;
	// AuditUpstreamToolDisable and …Enable an admin switching one tool
	// off and on.
	AuditUpstreamAlias       = "upstream.alias"
	AuditUpstreamToolDisable = "upstream.tool.disable"
	AuditUpstreamToolEnable  = "upstream.tool.enable"
	AuditUpstreamSync        = "upstream.sync"
	// What callers do besides their calls and selections (which their
	// own histories record): cancel a call, rotate a callback secret,
	// teach or unteach the index, sign in to and out of the console.
	AuditCallCancel     = "call.cancel"
	AuditCallbackRotate = "callback_secret.rotate"
	AuditSelectionLearn = "selection.feedback"
	AuditQueryForget    = "query.forget"
	AuditSignIn         = "console.sign_in"
	AuditSignInFailed   = "console.sign_in_failed"
	AuditSignOut        = "console.sign_out"
	// An OAuth client allowed by a person, and a grant revoked by an admin.
	AuditOAuthConsent = "oauth.consent"
	AuditOAuthRevoke  = "oauth.revoke"
	// A person storing (or replacing) and deleting a secret of their own:
	// its name, never its value.
	AuditSecretSet    = "secret.set"
	AuditSecretDelete = "secret.delete"
)

// AuditActions lists every action, in the order the console offers them.
var AuditActions = []string{
	AuditToolRegister, AuditToolPublish, AuditToolRollback, AuditToolRetire, AuditToolImport,
	AuditPrincipalCreate, AuditPrincipalDisable, AuditPrincipalEnable, AuditPrincipalDelete, AuditPrincipalRole,
	AuditKeyIssue, AuditKeyRevoke, AuditGrantsSet, AuditApprovalApprove, AuditApprovalDeny,
	AuditUpstreamAdd, AuditUpstreamUpdate, AuditUpstreamDisable, AuditUpstreamEnable, AuditUpstreamDelete, AuditUpstreamChange, AuditUpstreamAccept, AuditUpstreamSync,
	AuditUpstreamRefuse, AuditUpstreamAlias, AuditUpstreamToolDisable, AuditUpstreamToolEnable,
	AuditCallCancel, AuditCallbackRotate, AuditSelectionLearn, AuditQueryForget, AuditSignIn, AuditSignInFailed, AuditSignOut,
	AuditOAuthConsent, AuditOAuthRevoke, AuditSecretSet, AuditSecretDelete,
	AuditConnectionConnect, AuditConnectionDisconnect, AuditConnectionRefreshFailed,
}

// AuditDetailMax bounds an entry's detail, in characters.
const AuditDetailMax = 1000

// AuditEntry is one action of the audit log: who did what to which
// target, when and from where. Entries are written only by Audited, in
// the transaction of the change they record, and never updated.
type AuditEntry struct {
	ID        uint      `gorm:"primaryKey" json:"id" example:"42"`
	At        time.Time `gorm:"not null;index" json:"at"`
	ActorID   uint      `gorm:"not null;index" json:"actor_id,omitempty" example:"1"`
	Actor     string    `gorm:"size:64;not null;index" json:"actor" example:"admin"`
	ActorRole string    `gorm:"size:16;not null" json:"actor_role,omitempty" example:"admin"`
	Via       string    `gorm:"size:8;not null" json:"via" example:"api" enums:"api,console,mcp,system"`
	KeyID     uint      `gorm:"not null;default:0" json:"key_id,omitempty" example:"3"`
	KeyLabel  string    `gorm:"size:64;not null;default:''" json:"key_label,omitempty" example:"ci deploy"`
	ClientIP  string    `gorm:"size:64;not null;default:''" json:"client_ip,omitempty" example:"203.0.113.7"`
	RequestID string    `gorm:"size:64;not null;default:''" json:"request_id,omitempty" example:"3f2a9c0d1b7e4a56"`
	Action    string    `gorm:"size:32;not null;index" json:"action" example:"key.revoke"`
	Target    string    `gorm:"size:200;not null;index" json:"target" example:"key:3"`
	Detail    string    `gorm:"size:1000;not null;default:''" json:"detail,omitempty" example:"of principal research-agent (2)"`
	// Person is who acted when an identity provider signed them in
	// (models.PersonName); empty when a key did.
	Person string `gorm:"size:300;not null;default:''" json:"person,omitempty" example:"Alice Example <alice@example.com>, sso subject 248289761001 at https://idp.example.com"`
}

// TableName keeps the table's name short and plain.
func (AuditEntry) TableName() string { return "audit_log" }

// Audited runs fn in one transaction with the audit entry of action: fn
// makes the change through tx and says what it changed (target, detail);
// the entry, with the actor ctx carries, is written in the same
// transaction. When fn fails nothing is written, the entry neither: the
// log holds what happened, not what was tried.
func (s *Store) Audited(ctx context.Context, action string, fn func(tx *Store) (target, detail string, err error)) error {
	return s.db.WithContext(ctx).Transaction(func(db *gorm.DB) error {
		tx := &Store{db: db, dialect: s.dialect}
		target, detail, err := fn(tx)
		if err != nil {
			return err
		}
		e := auditEntry(ctx, action, target, detail)
		if err := db.Create(&e).Error; err != nil {
			return fmt.Errorf("record %s in the audit log: %w", action, err)
		}
		return nil
	})
}

func auditEntry(ctx context.Context, action, target, detail string) AuditEntry {
	a := ActorOf(ctx)
	e := AuditEntry{At: time.Now().UTC(), Actor: a.Name(), Via: a.Via, KeyID: a.KeyID,
		KeyLabel: clip(a.KeyLabel, 64), Person: clip(a.Person, PersonMax), ClientIP: clip(a.ClientIP, 64), RequestID: clip(a.RequestID, 64),
		Action: action, Target: clip(target, 200), Detail: clip(detail, AuditDetailMax)}
	if a.Principal != nil {
		e.ActorID, e.ActorRole = a.Principal.ID, a.Principal.Role
	}
	return e
}

// clip cuts s to at most n characters (Postgres counts characters).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// AuditFilter selects entries: each set field must match (Actor, Action
// and Target exactly), Since inclusive, Until exclusive; Before is the
// cursor, the id the previous page ended above.
type AuditFilter struct {
	Actor  string
	Action string
	Target string
	Since  time.Time
	Until  time.Time
	// Sort orders the entries: one of AuditSorts ("" is newest first).
	Sort string
	// After is the last entry of the previous page, in that order (0: the
	// first page).
	After uint
	Limit int
}

// AuditSorts are the orders of the audit log, by name: newest or oldest
// first, or by a column (the newest entry first within each value), A to
// Z or, with "-", Z to A. Each names its column (none for time).
var AuditSorts = map[string]string{"-time": "", "time": "", "actor": "actor", "-actor": "actor",
	"action": "action", "-action": "action", "target": "target", "-target": "target"}

func (s *Store) auditQuery(ctx context.Context, f AuditFilter) *gorm.DB {
	q := s.db.WithContext(ctx).Model(&AuditEntry{})
	if f.Actor != "" {
		q = q.Where("actor = ?", f.Actor)
	}
	if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if f.Target != "" {
		q = q.Where("target = ?", f.Target)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("at < ?", f.Until.UTC())
	}
	return q
}

// AuditEntries returns up to f.Limit entries matching f in f.Sort's order
// (newest first by default), from the one after f.After, and whether more
// follow. Pages are read by keyset, so an entry added meanwhile never
// shifts one into the next page twice. An f.After the log no longer holds
// (pruned since) is ErrInvalid.
func (s *Store) AuditEntries(ctx context.Context, f AuditFilter) ([]AuditEntry, bool, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	if f.Sort == "" {
		f.Sort = "-time"
	}
	col, ok := AuditSorts[f.Sort]
	if !ok {
		return nil, false, ErrInvalid.Errorf("the audit log cannot be ordered by %q", f.Sort)
	}
	q := s.auditQuery(ctx, f)
	asc := !strings.HasPrefix(f.Sort, "-")
	switch {
	case col == "" && asc:
		q = q.Order("id")
		if f.After > 0 {
			q = q.Where("id > ?", f.After)
		}
	case col == "":
		q = q.Order("id DESC")
		if f.After > 0 {
			q = q.Where("id < ?", f.After)
		}
	default:
		dir, cmp := " DESC", "<"
		if asc {
			dir, cmp = "", ">"
		}
		q = q.Order(col + dir + ", id DESC")
		if f.After > 0 {
			var last AuditEntry
			if err := s.db.WithContext(ctx).Select("id, "+col).Where("id = ?", f.After).First(&last).Error; err != nil {
				if errors.Is(err, gorm.ErrRecordNotFound) {
					return nil, false, ErrInvalid.Errorf("the page's last entry (%d) is no longer in the log; start from the first page", f.After)
				}
				return nil, false, fmt.Errorf("audit cursor: %w", err)
			}
			v := map[string]string{"actor": last.Actor, "action": last.Action, "target": last.Target}[col]
			q = q.Where("("+col+" "+cmp+" ? OR ("+col+" = ? AND id < ?))", v, v, f.After)
		}
	}
	var out []AuditEntry
	if err := q.Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, false, fmt.Errorf("list audit log: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// EachAuditEntry calls fn with every entry matching f in f.Sort's order, a
// page at a time, so an export of any size holds one page in memory and
// no transaction open; fn's error stops it.
func (s *Store) EachAuditEntry(ctx context.Context, f AuditFilter, fn func(AuditEntry) error) error {
	f.Limit = 500
	for {
		page, more, err := s.AuditEntries(ctx, f)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		f.After = page[len(page)-1].ID
	}
}

// DeleteAuditEntriesBefore removes the entries older than t (retention).
func (s *Store) DeleteAuditEntriesBefore(ctx context.Context, t time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("at < ?", t.UTC()).Delete(&AuditEntry{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune audit log: %w", res.Error)
	}
	return res.RowsAffected, nil
}
