package models

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/persist"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CasbinRule is one Casbin policy line: its type (p, g…) and up to six
// values, unused ones empty. The table, its columns and its unique index
// are those casbin's gorm-adapter made when it kept the policies, so
// databases it wrote load unchanged.
type CasbinRule struct {
	ID    uint   `gorm:"primaryKey;autoIncrement"`
	Ptype string `gorm:"size:100"`
	V0    string `gorm:"size:100"`
	V1    string `gorm:"size:100"`
	V2    string `gorm:"size:100"`
	V3    string `gorm:"size:100"`
	V4    string `gorm:"size:100"`
	V5    string `gorm:"size:100"`
}

// TableName is gorm-adapter's table name.
func (CasbinRule) TableName() string { return "casbin_rule" }

// casbinIndexes keep each line once, under gorm-adapter's index name.
var casbinIndexes = []string{"CREATE UNIQUE INDEX IF NOT EXISTS idx_casbin_rule ON casbin_rule (ptype,v0,v1,v2,v3,v4,v5)"}

// casbinLock serializes the policy changes that read or replace lines
// (see dialect.serialize).
const casbinLock = "casbin"

// casbinColumns are the value columns, in rule order.
var casbinColumns = []string{"v0", "v1", "v2", "v3", "v4", "v5"}

func casbinRule(ptype string, rule []string) (CasbinRule, error) {
	if len(rule) > len(casbinColumns) {
		return CasbinRule{}, ErrInvalid.Errorf("a policy rule of %d values (at most %d)", len(rule), len(casbinColumns))
	}
	v := make([]string, len(casbinColumns))
	copy(v, rule)
	return CasbinRule{Ptype: ptype, V0: v[0], V1: v[1], V2: v[2], V3: v[3], V4: v[4], V5: v[5]}, nil
}

// values are the line's values without the empty ones at the end, as
// Casbin holds the rule.
func (r CasbinRule) values() []string {
	v := []string{r.V0, r.V1, r.V2, r.V3, r.V4, r.V5}
	for len(v) > 0 && v[len(v)-1] == "" {
		v = v[:len(v)-1]
	}
	return v
}

// match is the condition selecting exactly this line.
func (r CasbinRule) match() map[string]any {
	return map[string]any{"ptype": r.Ptype, "v0": r.V0, "v1": r.V1, "v2": r.V2, "v3": r.V3, "v4": r.V4, "v5": r.V5}
}

// CasbinAdapter keeps Casbin's policies in the casbin_rule table: Casbin's
// persist.Adapter with the batch and update methods its enforcer calls.
type CasbinAdapter struct {
	db      *gorm.DB
	dialect dialect
}

var (
	_ persist.BatchAdapter     = (*CasbinAdapter)(nil)
	_ persist.UpdatableAdapter = (*CasbinAdapter)(nil)
)

// NewCasbinAdapter returns the adapter over s. Casbin's methods take no
// context, so ctx bounds every query the adapter makes.
func NewCasbinAdapter(ctx context.Context, s *Store) *CasbinAdapter {
	return &CasbinAdapter{db: s.db.WithContext(ctx), dialect: s.dialect}
}

// LoadPolicy loads every line into m, in the order they were stored.
func (a *CasbinAdapter) LoadPolicy(m model.Model) error {
	var rows []CasbinRule
	if err := a.db.Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("load policies: %w", err)
	}
	for _, r := range rows {
		if err := persist.LoadPolicyArray(append([]string{r.Ptype}, r.values()...), m); err != nil {
			return fmt.Errorf("load policy %d: %w", r.ID, err)
		}
	}
	return nil
}

// SavePolicy replaces every stored line with the policies of m.
func (a *CasbinAdapter) SavePolicy(m model.Model) error {
	var rows []CasbinRule
	for _, sec := range []string{"p", "g"} {
		for _, ptype := range slices.Sorted(maps.Keys(m[sec])) {
			for _, rule := range m[sec][ptype].Policy {
				r, err := casbinRule(ptype, rule)
				if err != nil {
					return fmt.Errorf("save policies: %w", err)
				}
				rows = append(rows, r)
			}
		}
	}
	err := a.db.Transaction(func(tx *gorm.DB) error {
		if err := a.dialect.serialize(tx, casbinLock); err != nil {
			return err
		}
		if err := tx.Where("1 = 1").Delete(&CasbinRule{}).Error; err != nil {
			return err
		}
		return insertCasbinRules(tx, rows)
	})
	if err != nil {
		return fmt.Errorf("save policies: %w", err)
	}
	return nil
}

// insertCasbinRules inserts the lines not stored yet.
func insertCasbinRules(tx *gorm.DB, rows []CasbinRule) error {
	if len(rows) == 0 {
		return nil
	}
	return tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
}

// AddPolicy stores a rule.
func (a *CasbinAdapter) AddPolicy(sec, ptype string, rule []string) error {
	return a.AddPolicies(sec, ptype, [][]string{rule})
}

// AddPolicies stores rules in one transaction.
func (a *CasbinAdapter) AddPolicies(_, ptype string, rules [][]string) error {
	rows := make([]CasbinRule, 0, len(rules))
	for _, rule := range rules {
		r, err := casbinRule(ptype, rule)
		if err != nil {
			return fmt.Errorf("add policies: %w", err)
		}
		rows = append(rows, r)
	}
	if err := a.db.Transaction(func(tx *gorm.DB) error { return insertCasbinRules(tx, rows) }); err != nil {
		return fmt.Errorf("add policies: %w", err)
	}
	return nil
}

// RemovePolicy deletes a rule.
func (a *CasbinAdapter) RemovePolicy(sec, ptype string, rule []string) error {
	return a.RemovePolicies(sec, ptype, [][]string{rule})
}

// RemovePolicies deletes rules in one transaction.
func (a *CasbinAdapter) RemovePolicies(_, ptype string, rules [][]string) error {
	err := a.db.Transaction(func(tx *gorm.DB) error {
		for _, rule := range rules {
			r, err := casbinRule(ptype, rule)
			if err != nil {
				return err
			}
			if err := tx.Where(r.match()).Delete(&CasbinRule{}).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove policies: %w", err)
	}
	return nil
}

// casbinFilter is the condition selecting the lines of ptype whose values
// from fieldIndex on are fieldValues, an empty one matching any value.
func casbinFilter(ptype string, fieldIndex int, fieldValues []string) (map[string]any, error) {
	if fieldIndex < 0 || fieldIndex+len(fieldValues) > len(casbinColumns) {
		return nil, ErrInvalid.Errorf("policy filter of %d values from field %d", len(fieldValues), fieldIndex)
	}
	cond := map[string]any{"ptype": ptype}
	for i, v := range fieldValues {
		if v != "" {
			cond[casbinColumns[fieldIndex+i]] = v
		}
	}
	if len(cond) == 1 {
		return nil, ErrInvalid.Errorf("a policy filter with no value would match every rule")
	}
	return cond, nil
}

// RemoveFilteredPolicy deletes the rules a filter selects (see
// casbinFilter).
func (a *CasbinAdapter) RemoveFilteredPolicy(_, ptype string, fieldIndex int, fieldValues ...string) error {
	cond, err := casbinFilter(ptype, fieldIndex, fieldValues)
	if err == nil {
		err = a.db.Where(cond).Delete(&CasbinRule{}).Error
	}
	if err != nil {
		return fmt.Errorf("remove policies: %w", err)
	}
	return nil
}

// UpdatePolicy replaces a rule.
func (a *CasbinAdapter) UpdatePolicy(sec, ptype string, oldRule, newRule []string) error {
	return a.UpdatePolicies(sec, ptype, [][]string{oldRule}, [][]string{newRule})
}

// UpdatePolicies replaces each of oldRules with the rule at its index in
// newRules, in one transaction; a line keeps its place in the load order.
func (a *CasbinAdapter) UpdatePolicies(_, ptype string, oldRules, newRules [][]string) error {
	if len(oldRules) != len(newRules) {
		return fmt.Errorf("update policies: %w: %d old rules for %d new", ErrInvalid, len(oldRules), len(newRules))
	}
	err := a.db.Transaction(func(tx *gorm.DB) error {
		for i := range oldRules {
			old, err := casbinRule(ptype, oldRules[i])
			if err != nil {
				return err
			}
			updated, err := casbinRule(ptype, newRules[i])
			if err != nil {
				return err
			}
			set := updated.match()
			delete(set, "ptype")
			if err := tx.Model(&CasbinRule{}).Where(old.match()).Updates(set).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("update policies: %w", err)
	}
	return nil
}

// UpdateFilteredPolicies replaces the rules a filter selects (see
// casbinFilter) with newRules in one transaction, and returns those it
// deleted.
func (a *CasbinAdapter) UpdateFilteredPolicies(_, ptype string, newRules [][]string, fieldIndex int, fieldValues ...string) ([][]string, error) {
	cond, err := casbinFilter(ptype, fieldIndex, fieldValues)
	if err != nil {
		return nil, fmt.Errorf("update policies: %w", err)
	}
	rows := make([]CasbinRule, 0, len(newRules))
	for _, rule := range newRules {
		r, err := casbinRule(ptype, rule)
		if err != nil {
			return nil, fmt.Errorf("update policies: %w", err)
		}
		rows = append(rows, r)
	}
	var old []CasbinRule
	err = a.db.Transaction(func(tx *gorm.DB) error {
		if err := a.dialect.serialize(tx, casbinLock); err != nil {
			return err
		}
		if err := tx.Where(cond).Order("id").Find(&old).Error; err != nil {
			return err
		}
		if err := tx.Where(cond).Delete(&CasbinRule{}).Error; err != nil {
			return err
		}
		return insertCasbinRules(tx, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("update policies: %w", err)
	}
	out := make([][]string, len(old))
	for i, r := range old {
		out[i] = r.values()
	}
	return out, nil
}
