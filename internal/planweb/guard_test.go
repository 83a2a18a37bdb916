package planweb

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	g := guard{token: "tok123", origin: "http://127.0.0.1:4000"}
	for _, tc := range []struct {
		name, method, target, host, origin string
		rest                               string // "" with refused set: refused
		refused                            string
	}{
		{name: "page with the token", method: "GET", target: "/tok123/review/ns/s", rest: "review/ns/s"},
		{name: "no token", method: "GET", target: "/review/ns/s", refused: "token"},
		{name: "wrong token", method: "GET", target: "/tok124/review/ns/s", refused: "token"},
		{name: "token prefix only", method: "GET", target: "/tok12/review/ns/s", refused: "token"},
		{name: "token in the query is not enough", method: "GET", target: "/review?token=tok123", refused: "token"},
		{name: "another Host (DNS rebinding)", method: "GET", target: "/tok123/inbox", host: "evil.example:4000", refused: "Host"},
		{name: "localhost is another Host", method: "GET", target: "/tok123/inbox", host: "localhost:4000", refused: "Host"},
		{name: "post from the page", method: "POST", target: "/tok123/review/ns/s/decide", origin: "http://127.0.0.1:4000", rest: "review/ns/s/decide"},
		{name: "post without Origin", method: "POST", target: "/tok123/review/ns/s/decide", refused: "Origin"},
		{name: "post from another origin", method: "POST", target: "/tok123/review/ns/s/decide", origin: "http://evil.example", refused: "Origin"},
		{name: "post from another port", method: "POST", target: "/tok123/review/ns/s/decide", origin: "http://127.0.0.1:4001", refused: "Origin"},
		{name: "post with a null Origin", method: "POST", target: "/tok123/review/ns/s/decide", origin: "null", refused: "Origin"},
		{name: "post without the token", method: "POST", target: "/review/ns/s/decide", origin: "http://127.0.0.1:4000", refused: "token"},
		{name: "put", method: "PUT", target: "/tok123/review/ns/s/decide", origin: "http://127.0.0.1:4000", refused: "method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, nil)
			r.Host = "127.0.0.1:4000"
			if tc.host != "" {
				r.Host = tc.host
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			rest, err := g.admit(r)
			switch {
			case tc.refused != "" && err == nil:
				t.Fatalf("admitted (rest %q), want refused for %s", rest, tc.refused)
			case tc.refused != "" && !strings.Contains(err.Error(), tc.refused):
				t.Fatalf("refused with %q, want it to name %s", err, tc.refused)
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused == "" && rest != tc.rest:
				t.Fatalf("rest %q, want %q", rest, tc.rest)
			}
		})
	}
}

func TestNewTokenIsRandom(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newToken()
	if len(a) != 64 || a == b {
		t.Fatalf("tokens %q and %q: want 64 hex characters, different each time", a, b)
	}
}
