// Package models is the bottom layer: the gorm structs and the Store that
// holds every query (on SQLite in WAL mode or on Postgres, what differs
// between them kept in dialect.go; migrated at open), the batcher behind
// group commits, and the vocabulary every layer shares: error codes and
// kinds (errors.go), validation problems, call statuses, ids.
// It imports no other package of the project.
package models
