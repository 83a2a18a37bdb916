package planweb

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// guard admits a request only for the server's own address and with its token. The token,
// in the URL the terminal shows, keeps other local users and web pages out: a page elsewhere
// cannot read it, so it can neither read the review (the API answers with the user's
// credentials) nor post a decision. A state-changing request must also come from this
// server's own origin (CSRF), and a Host other than ours is refused (DNS rebinding).
type guard struct {
	token string
	// origin is "http://127.0.0.1:PORT", the only Origin a decision may come from and,
	// without the scheme, the only Host.
	origin string
}

// newToken is 32 random bytes, hex.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make the page's token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// admit checks r and returns the path after the token ("review/ns/name"), or the reason to
// refuse it.
func (g guard) admit(r *http.Request) (string, error) {
	if r.Host != strings.TrimPrefix(g.origin, "http://") {
		return "", fmt.Errorf("wrong Host %q: this server answers only at %s", r.Host, g.origin)
	}
	first, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if subtle.ConstantTimeCompare([]byte(first), []byte(g.token)) != 1 {
		return "", fmt.Errorf("missing or wrong token: open the URL kubectl plan printed")
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if r.Method != http.MethodPost {
			return "", fmt.Errorf("method %s is not allowed", r.Method)
		}
		// Browsers send Origin with every POST; one without it did not come from a page.
		if o := r.Header.Get("Origin"); o != g.origin {
			return "", fmt.Errorf("a decision must come from this server's own page (Origin %q, want %s)", o, g.origin)
		}
	}
	return rest, nil
}
