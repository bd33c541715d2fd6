package loop

import (
	"fmt"
	"regexp"
	"strings"
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
