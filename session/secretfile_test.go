package session

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFileCredentials: in a file secret, every string long enough to be a
// credential becomes a placeholder (a key's prefix kept), of a JWT only
// its signature, and nothing else changes: timestamps, short ids, numbers,
// nulls. What is not one JSON document is refused.
func TestFileCredentials(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	jwt := b64([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + b64([]byte(`{"email":"a@example.com","exp":1900000000}`)) + ".c2lnbmF0dXJlLW9mLXRoZS1pc3N1ZXItNDI"
	doc := `{"OPENAI_API_KEY": "sk-proj-Abcdefghijklmnop1234", "tokens": {"access_token": "` + jwt + `", "refresh_token": "rt_0123456789abcdefghij", "account_id": "acct-42"},
"last_refresh": "2026-11-20T10:00:00.123Z", "n": 3, "x": null}`
	ph := func(key, prefix string) string {
		return prefix + "sbx-" + strings.ReplaceAll(key, ".", "_") + "-placeholder"
	}
	out, creds, err := fileCredentials([]byte(doc), ph)
	if err != nil {
		t.Fatal(err)
	}
	wantCreds := []credential{
		{Key: "OPENAI_API_KEY", Value: "sk-proj-Abcdefghijklmnop1234", Placeholder: "sk-proj-sbx-OPENAI_API_KEY-placeholder"},
		{Key: "tokens.access_token#signature", Value: "c2lnbmF0dXJlLW9mLXRoZS1pc3N1ZXItNDI", Placeholder: "sbx-tokens_access_token#signature-placeholder"},
		{Key: "tokens.refresh_token", Value: "rt_0123456789abcdefghij", Placeholder: "rt_sbx-tokens_refresh_token-placeholder"},
	}
	if diff := cmp.Diff(wantCreds, creds); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the sandbox's copy is not JSON: %v\n%s", err, out)
	}
	want := map[string]any{
		"OPENAI_API_KEY": "sk-proj-sbx-OPENAI_API_KEY-placeholder",
		"tokens": map[string]any{"access_token": strings.TrimSuffix(jwt, "c2lnbmF0dXJlLW9mLXRoZS1pc3N1ZXItNDI") + "sbx-tokens_access_token#signature-placeholder",
			"refresh_token": "rt_sbx-tokens_refresh_token-placeholder", "account_id": "acct-42"},
		"last_refresh": "2026-11-20T10:00:00.123Z", "n": 3.0, "x": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the sandbox's copy (-want +got):\n%s", diff)
	}
	for _, c := range wantCreds {
		if strings.Contains(string(out), c.Value) {
			t.Errorf("the sandbox's copy holds %s", c.Key)
		}
	}
	// A value's start is kept only when it is a well-known public prefix:
	// any other start is part of the secret.
	_, creds, err = fileCredentials([]byte(`{"password": "correct-horse-battery-staple"}`), ph)
	if err != nil || len(creds) != 1 || creds[0].Placeholder != "sbx-password-placeholder" {
		t.Errorf("a password's placeholder: %+v, %v; want no part of it kept", creds, err)
	}
	for _, bad := range []string{"not json", `{"a": 1} {"b": 2}`, ""} {
		if _, _, err := fileCredentials([]byte(bad), ph); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
