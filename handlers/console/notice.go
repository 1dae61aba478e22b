package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// A notice (the green line after an action succeeded) travels from the
// action to the page it redirects to in a flash cookie, never in the URL:
// a link anyone can write must not make the console say anything. The
// cookie is HttpOnly, SameSite=Strict, Path=/admin, lives a minute, is
// cleared by the first page that reads it, and is signed with an HMAC
// keyed by the session's secret token, so it holds only what this server
// set for this session (a cookie planted by a sibling host, or one from
// another session, is ignored).
const (
	noticeCookie = "tb_notice"
	noticeTTL    = time.Minute
	// noticeMax caps a notice's bytes, keeping the cookie well under the
	// 4 KB browsers store.
	noticeMax = 1024
)

// setNotice makes the next console page of this session show notice.
func setNotice(c *gin.Context, notice string) {
	s := CurrentConsole(c)
	if s == nil || notice == "" {
		return
	}
	if len(notice) > noticeMax {
		notice = strings.ToValidUTF8(notice[:noticeMax], "")
	}
	payload := strconv.FormatInt(time.Now().Add(noticeTTL).Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(notice))
	setConsoleCookie(c, noticeCookie, payload+"."+noticeMAC(s.Token, payload), int(noticeTTL.Seconds()))
}

// takeNotice returns the notice set for this session, if any, and clears
// the cookie (shown once, also when it was not valid).
func takeNotice(c *gin.Context) string {
	raw, err := c.Cookie(noticeCookie)
	if err != nil || raw == "" {
		return ""
	}
	setConsoleCookie(c, noticeCookie, "", -1)
	s := CurrentConsole(c)
	if s == nil {
		return ""
	}
	i := strings.LastIndexByte(raw, '.')
	if i < 0 || !hmac.Equal([]byte(raw[i+1:]), []byte(noticeMAC(s.Token, raw[:i]))) {
		return ""
	}
	expires, text, ok := strings.Cut(raw[:i], ".")
	exp, err := strconv.ParseInt(expires, 10, 64)
	if !ok || err != nil || time.Now().Unix() > exp {
		return ""
	}
	notice, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return ""
	}
	return string(notice)
}

// noticeMAC signs a notice payload for the session of token.
func noticeMAC(token, payload string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("toolbelt console notice\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
