package loop

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sbxhq/sbx/internal/untrusted"
	"github.com/sbxhq/sbx/spec"
)

// Prompt assembles one iteration's input: a short header, any hints added
// since the last iteration, then the prompt file.
func Prompt(iteration, max int, hints []string, prompt string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[sbx loop: iteration %d of %d]\n\n", iteration, max)
	if len(hints) > 0 {
		b.WriteString("Hints from the operator since the last iteration:\n")
		for _, h := range hints {
			fmt.Fprintf(&b, "- %s\n", strings.TrimSpace(h))
		}
		b.WriteString("\n")
	}
	b.WriteString(prompt)
	if !strings.HasSuffix(prompt, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

var promiseTag = regexp.MustCompile(`(?s)<promise>(.*?)</promise>`)

// normalize collapses runs of white space to one space and trims.
func normalize(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// PromiseSeen reports whether output holds <promise>TEXT</promise> whose
// text, white space normalised, is exactly promise. Every tag counts, not
// only the first, so a quoted example earlier in the output cannot hide the
// real one; a tag with other text never matches.
func PromiseSeen(output, promise string) bool {
	want := normalize(promise)
	if want == "" {
		return false
	}
	for _, m := range promiseTag.FindAllStringSubmatch(output, -1) {
		if normalize(m[1]) == want {
			return true
		}
	}
	return false
}

// Unechoed is an agent's answer with every copy of what it was given cut
// out: the iteration's whole input, and the prompt file's text. The
// prompt names the promise (sbx init's does), so an agent that echoes it
// must not complete the run with the echo; an answer that merely repeats
// the promise's line is the agent's own and stays.
func Unechoed(answer string, given ...string) string {
	for _, g := range given {
		if strings.TrimSpace(g) != "" && promiseTag.MatchString(g) {
			answer = strings.ReplaceAll(answer, g, "")
		}
	}
	return answer
}

// MaxPrompt is the largest prompt file the loop reads.
const MaxPrompt = 1 << 20

// ReadPrompt reads the loop's prompt file within l.PromptRoot (the
// workspace when unset): a symlink the agent puts in its place may not
// lead outside that directory; a FIFO, socket or device is an error,
// never waited on; so is a file over MaxPrompt bytes.
func ReadPrompt(workspace string, l spec.Loop) ([]byte, error) {
	dir := l.PromptRoot
	if dir == "" {
		dir = workspace
	}
	rel, err := filepath.Rel(dir, l.Prompt)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("loop.prompt %s: outside %s, the directory it must be read within", l.Prompt, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("loop.prompt: %v", err)
	}
	defer root.Close()
	data, err := untrusted.ReadFile(root, rel, MaxPrompt)
	if err != nil {
		return nil, fmt.Errorf("loop.prompt %s: %v (it is read within %s)", l.Prompt, err, dir)
	}
	return data, nil
}
