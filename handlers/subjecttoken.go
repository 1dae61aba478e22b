package handlers

import "github.com/gin-gonic/gin"

// subjectTokenKey holds the caller's token of the organisation's OpenID
// provider on the Gin context (access.Grant.SubjectToken).
const subjectTokenKey = "subject_token"

// SetSubjectToken records the bearer token a request authenticated with,
// when the organisation's OpenID provider issued it: a call made by this
// request may have the provider exchange it for an upstream's token.
func SetSubjectToken(c *gin.Context, token string) { c.Set(subjectTokenKey, token) }

// SubjectToken returns the token SetSubjectToken recorded, or "".
func SubjectToken(c *gin.Context) string { return c.GetString(subjectTokenKey) }
