package schema

import "strings"

// composeKeys maps the words of Docker Compose (and docker run) to where
// sandbox.yaml says the same thing, so a file written from habit gets a
// pointer instead of a bare "unknown key". A target applies where its first
// element is a key allowed at that level of the file.
var composeKeys = map[string][]string{
	"environment":    {"env"},
	"env_file":       {"env"},
	"volumes":        {"mounts"},
	"image":          {"template"},
	"build":          {"template"},
	"container_name": {"name"},
	"working_dir":    {"workspace"},
	"expose":         {"ports"},
	"networks":       {"network"},
	"network_mode":   {"network"},
	"runtime":        {"docker.runtime"},
	"security_opt":   {"docker.noNewPrivileges"},
	"command":        {"loop.command"},
	"entrypoint":     {"loop.command"},
	"cpus":           {"resources.cpus"},
	"cpu":            {"cpus", "resources.cpus"},
	"mem_limit":      {"memory", "resources.memory"},
	"memory":         {"resources.memory"},
	"pids_limit":     {"pids", "resources.pids"},
}

// SuggestKey returns what to suggest for an unknown key where allowed are
// the keys of its object: Compose's word for it, else a likely typo.
func SuggestKey(key string, allowed []string) string {
	for _, t := range composeKeys[strings.ToLower(key)] {
		first, _, _ := strings.Cut(t, ".")
		for _, a := range allowed {
			if a == first {
				return t
			}
		}
	}
	return Suggest(key, allowed)
}

// Suggest returns the candidate closest to s when it is close enough to be a
// likely typo, or "".
func Suggest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := distance(s, c)
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := 2
	if len(s) <= 4 {
		limit = 1
	}
	if bestDist < 0 || bestDist > limit || bestDist == len(s) {
		return ""
	}
	return best
}

// distance is the optimal-string-alignment edit distance (Levenshtein plus
// adjacent transpositions), case-insensitive.
func distance(a, b string) int {
	ra, rb := []rune(lower(a)), []rune(lower(b))
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
