package testidp

import (
	"strings"

	"github.com/zitadel/oidc/v3/example/server/storage"
)

// User is a person at the provider. Its ID is the subject (sub) of every
// token issued to it.
type User struct {
	ID       string // sub; defaults to "sub-" + Username
	Username string // what the login form asks for; preferred_username
	Password string
	Email    string
	Name     string   // full name (name claim)
	Groups   []string // the groups claim (Options.GroupsClaim)
}

// AddUser registers a user (replacing one with the same ID) and returns
// it with its ID filled in.
func (idp *IDP) AddUser(u User) User {
	if u.ID == "" {
		u.ID = "sub-" + u.Username
	}
	idp.mu.Lock()
	defer idp.mu.Unlock()
	idp.users[u.ID] = &u
	return u
}

// SetGroups changes a user's groups, as an IdP administrator would; the
// next token issued carries them.
func (idp *IDP) SetGroups(userID string, groups ...string) {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	if u, ok := idp.users[userID]; ok {
		u.Groups = groups
	}
}

// groups returns a copy of a user's groups (nil for an unknown user).
func (idp *IDP) groups(userID string) []string {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	if u, ok := idp.users[userID]; ok {
		return append([]string{}, u.Groups...)
	}
	return nil
}

// userStore shows the users to the example storage, which checks
// passwords and fills the standard claims from them.
type userStore struct{ idp *IDP }

func (s userStore) GetUserByID(id string) *storage.User { return s.convert(s.idp.user(id)) }

func (s userStore) GetUserByUsername(name string) *storage.User { return s.convert(s.idp.user(name)) }

// ExampleClientID names the example's JWT-profile service user, which
// this provider does not use.
func (s userStore) ExampleClientID() string { return "" }

func (userStore) convert(u *User) *storage.User {
	if u == nil {
		return nil
	}
	first, last, _ := strings.Cut(u.Name, " ")
	return &storage.User{
		ID:            u.ID,
		Username:      u.Username,
		Password:      u.Password,
		FirstName:     first,
		LastName:      last,
		Email:         u.Email,
		EmailVerified: u.Email != "",
	}
}
