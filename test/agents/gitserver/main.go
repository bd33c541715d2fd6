// Command gitserver serves git over HTTPS (git http-backend, the smart
// protocol) for the end-to-end test of a push with a token through sbx's
// proxy. It runs in a container of the test's own, made from the agents'
// template (which has git), with a certificate from the test's CA. Every
// request must carry Basic credentials whose password is $GIT_TOKEN, as
// a forge checks a token; it logs one JSON line per request (method,
// path, user, whether the token matched).
package main

import (
	"crypto/subtle"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	root := flag.String("root", "/srv/git", "directory of the bare repositories")
	repo := flag.String("repo", "repo.git", "the bare repository made at start")
	cert := flag.String("cert", "", "certificate (PEM)")
	key := flag.String("key", "", "its key (PEM)")
	listen := flag.String("listen", ":8443", "address")
	flag.Parse()
	token := os.Getenv("GIT_TOKEN")
	if token == "" {
		log.Fatal("GIT_TOKEN is not set")
	}
	if out, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", filepath.Join(*root, *repo)).CombinedOutput(); err != nil {
		log.Fatalf("git init: %v: %s", err, out)
	}
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + *root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=sbx-test"},
	}
	enc := json.NewEncoder(os.Stdout)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		good := ok && subtle.ConstantTimeCompare([]byte(pass), []byte(token)) == 1
		enc.Encode(map[string]any{"method": r.Method, "path": r.URL.Path, "user": user, "auth": ok, "token_ok": good})
		if !good {
			w.Header().Set("WWW-Authenticate", `Basic realm="sbx test"`)
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
	fmt.Println("gitserver: listening")
	log.Fatal(http.ListenAndServeTLS(*listen, *cert, *key, h))
}
