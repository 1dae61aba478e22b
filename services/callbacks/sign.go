package callbacks

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"toolbelt/internal/keyfile"
	"toolbelt/models"
)

// Standard Webhooks (standardwebhooks.com): the headers of a delivery and
// the prefixes of a secret and of a signature.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	SecretPrefix    = "whsec_"
	signatureV1     = "v1,"
)

// KeyFile is the file under the data directory holding the server's
// callback key when TOOLBELT_CALLBACK_KEY does not give one.
const KeyFile = "callback.key"

// minKeyBytes is the shortest key accepted: the secrets derived from it
// are as strong as it is.
const minKeyBytes = 32

// LoadKey returns the server's callback key: configured (the value of
// TOOLBELT_CALLBACK_KEY, at least 32 bytes), or else the one in
// dataDir/callback.key, made once (32 random bytes, readable by the server
// only) and read at every start after, so the secrets stay the same.
func LoadKey(configured, dataDir string) ([]byte, error) {
	if configured != "" {
		if len(configured) < minKeyBytes {
			return nil, fmt.Errorf("TOOLBELT_CALLBACK_KEY must be at least %d bytes", minKeyBytes)
		}
		return []byte(configured), nil
	}
	return keyfile.Load(filepath.Join(dataDir, KeyFile), "callback key", minKeyBytes, func() []byte {
		key := make([]byte, minKeyBytes)
		_, _ = rand.Read(key)
		return key
	})
}

// Secret is a principal's callback signing secret, in the Standard
// Webhooks form: "whsec_" and the base64 of the 32 bytes the HMAC keys on.
type Secret struct {
	PrincipalID uint   `json:"principal_id" example:"3"`
	Generation  uint   `json:"generation" example:"0"`
	Secret      string `json:"secret" example:"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`
}

// Secrets derives each principal's callback signing secret from the
// server's key, its id and its generation: HMAC-SHA256(key, "toolbelt
// callback secret" 0 id 0 generation). No secret is stored (only the
// generation, on the principal), so none can leak from the database, and
// rotating one is moving its generation on.
type Secrets struct {
	key   []byte
	store *models.Store
}

// NewSecrets returns the secrets derived from key.
func NewSecrets(store *models.Store, key []byte) *Secrets {
	return &Secrets{key: key, store: store}
}

// derive is the secret of a principal at a generation.
func (s *Secrets) derive(principalID, generation uint) []byte {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "toolbelt callback secret\x00%d\x00%d", principalID, generation)
	return m.Sum(nil)
}

// Of returns a principal's current secret.
func (s *Secrets) Of(ctx context.Context, principalID uint) (Secret, error) {
	gen, err := s.store.CallbackGeneration(ctx, principalID)
	if err != nil {
		return Secret{}, err
	}
	return s.secret(principalID, gen), nil
}

func (s *Secrets) secret(principalID, gen uint) Secret {
	return Secret{PrincipalID: principalID, Generation: gen,
		Secret: SecretPrefix + base64.StdEncoding.EncodeToString(s.derive(principalID, gen))}
}

// Rotate replaces a principal's secret with the next generation's and
// returns it: deliveries from then on are signed with it only. The audit
// log records who rotated it (the principal itself, or an admin).
func (s *Secrets) Rotate(ctx context.Context, principalID uint) (Secret, error) {
	var gen uint
	err := s.store.Audited(ctx, models.AuditCallbackRotate, func(tx *models.Store) (string, string, error) {
		var err error
		gen, err = tx.RotateCallbackSecret(ctx, principalID)
		return fmt.Sprintf("principal:%d", principalID), fmt.Sprintf("generation %d", gen), err
	})
	if err != nil {
		return Secret{}, err
	}
	return s.secret(principalID, gen), nil
}

// Sign returns the webhook-signature value of a delivery: "v1," and the
// base64 of HMAC-SHA256(secret, id "." timestamp "." body), where secret is
// the decoded bytes after "whsec_".
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return "", fmt.Errorf("callback secret is not base64: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return signatureV1 + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}
