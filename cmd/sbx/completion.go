package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/checkpoint"
	"github.com/sbxhq/sbx/reconcile"
	"github.com/sbxhq/sbx/session"
	"github.com/sbxhq/sbx/spec"
)

// completeFiles is the line __complete prints alone when the shell should
// complete file names itself.
const completeFiles = "::files"

func completionVerb() *verb {
	return &verb{
		name:    "completion",
		summary: "print a shell's completion script: bash, zsh, fish or powershell",
		usage:   "bash|zsh|fish|powershell",
		help: `Completes verbs, flags, flag values (drivers, agents, files), sandbox
names and checkpoint names. Load it for the current shell, or save it where
the shell looks:

  bash:        source <(sbx completion bash)
  zsh:         source <(sbx completion zsh)       (after compinit)
  fish:        sbx completion fish | source
  PowerShell:  sbx completion powershell | Out-String | Invoke-Expression

Names come from sbx's state directory only: completing never runs a
backend command or a command a sandbox file names.`,
		setup: func(fs *pflag.FlagSet) runFunc {
			return func(ctx context.Context, a *app, args []string) int {
				if len(args) != 1 {
					return a.errorf("completion needs one shell: bash, zsh, fish or powershell")
				}
				script, ok := completionScripts[args[0]]
				if !ok {
					return a.errorf("no completion for shell %q: bash, zsh, fish or powershell", args[0])
				}
				fmt.Fprint(a.stdout, script)
				return exitOK
			}
		},
	}
}

// completeMain is the hidden verb the scripts call:
//
//	sbx __complete =CUR WORD...
//
// WORDs are the words before the cursor after "sbx"; CUR, the word being
// completed, comes first behind "=" so an empty one survives shells that
// drop empty arguments (Windows PowerShell). It prints one candidate per
// line, or completeFiles.
func completeMain(ctx context.Context, a *app, args []string) int {
	if len(args) == 0 || !strings.HasPrefix(args[0], "=") {
		return a.errorf("usage: sbx __complete =CUR [WORD...]")
	}
	cur, words := args[0][1:], args[1:]
	for _, c := range a.complete(words, cur) {
		if c == completeFiles || strings.HasPrefix(c, cur) {
			fmt.Fprintln(a.stdout, c)
		}
	}
	return exitOK
}

// complete returns the candidates for cur after words.
func (a *app) complete(words []string, cur string) []string {
	if len(words) == 0 {
		return append(verbNames(), "help")
	}
	name := words[0]
	if name == "help" {
		if len(words) == 1 {
			return verbNames()
		}
		return nil
	}
	v := findVerb(name)
	if v == nil {
		// Docker's own verbs that take a sandbox name (passed through).
		if slices.Contains([]string{"exec", "rm", "inspect", "ports", "save"}, name) && !strings.HasPrefix(cur, "-") {
			return a.sandboxNames()
		}
		return nil
	}
	fs := v.flags()
	prev := words[len(words)-1]
	if f := valueFlag(fs, prev); f != nil {
		return a.flagValues(f)
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				out = append(out, "--"+f.Name)
			}
		})
		return out
	}
	pos := positionals(fs, words[1:])
	switch name {
	case "validate":
		return []string{completeFiles}
	case "apply":
		if len(pos) == 0 {
			return []string{completeFiles} // a saved plan
		}
	case "completion":
		if len(pos) == 0 {
			return []string{"bash", "zsh", "fish", "powershell"}
		}
	case "loop":
		if len(pos) == 0 {
			return []string{"status", "logs", "hint", "stop"}
		}
	case "stop", "start":
		return a.sandboxNames() // Docker's form, sbx stop NAME
	case "checkpoint":
		if len(pos) == 0 {
			return []string{"create", "ls", "rm", "export", "import"}
		}
		switch pos[0] {
		case "rm":
			return a.checkpointNames()
		case "export":
			if len(pos) == 1 {
				return a.checkpointNames()
			}
		case "import":
			if len(pos) == 1 {
				return []string{completeFiles}
			}
		}
	}
	return nil
}

// valueFlag returns the flag word names when it takes a value (so the
// word being completed is that value).
func valueFlag(fs *pflag.FlagSet, word string) *pflag.Flag {
	var f *pflag.Flag
	switch {
	case strings.HasPrefix(word, "--") && !strings.Contains(word, "="):
		f = fs.Lookup(word[2:])
	case len(word) == 2 && word[0] == '-' && word[1] != '-':
		f = fs.ShorthandLookup(word[1:])
	}
	if f == nil || f.Value.Type() == "bool" {
		return nil
	}
	return f
}

// positionals returns the words that are neither flags nor flag values.
func positionals(fs *pflag.FlagSet, words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--":
			return append(out, words[i+1:]...)
		case valueFlag(fs, w) != nil:
			i++
		case !strings.HasPrefix(w, "-"):
			out = append(out, w)
		}
	}
	return out
}

func (a *app) flagValues(f *pflag.Flag) []string {
	switch f.Name {
	case "driver":
		var out []string
		for _, d := range session.Drivers {
			out = append(out, d.Name)
		}
		return out
	case "agent":
		return spec.Agents
	case "file", "out", "output":
		return []string{completeFiles}
	}
	return nil
}

// sandboxNames are the sandboxes sbx has records of, on any driver, read
// from the state directory without creating it or asking a backend.
func (a *app) sandboxNames() []string {
	dir, err := a.stateDir()
	if err != nil {
		return nil
	}
	if !dir.Exists() {
		return nil
	}
	store := &reconcile.Store{Dir: dir}
	var out []string
	for _, d := range session.Drivers {
		names, _ := store.Names(d.Name)
		out = append(out, names...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkpointNames are the checkpoints sbx has records of, on any driver.
func (a *app) checkpointNames() []string {
	dir, err := a.stateDir()
	if err != nil {
		return nil
	}
	cat := checkpoint.Catalog{Dir: dir}
	var out []string
	for _, d := range session.Drivers {
		cps, _ := cat.List(d.Name)
		for _, c := range cps {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// completionScripts are what `sbx completion SHELL` prints. Each asks
// `sbx __complete` for candidates and falls back to the shell's own file
// completion on completeFiles.
var completionScripts = map[string]string{
	"bash": `# bash completion for sbx (sbx completion bash)
_sbx_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}" out
  out="$(sbx __complete "=$cur" "${COMP_WORDS[@]:1:COMP_CWORD-1}" 2>/dev/null)" || return 0
  if [ "$out" = "::files" ]; then
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    return 0
  fi
  mapfile -t COMPREPLY <<<"$out"
  [ -n "$out" ] || COMPREPLY=()
}
complete -F _sbx_complete sbx
`,
	"zsh": `#compdef sbx
# zsh completion for sbx (sbx completion zsh)
_sbx() {
  local out
  out="$(sbx __complete "=${words[CURRENT]}" "${(@)words[2,CURRENT-1]}" 2>/dev/null)" || return 1
  if [[ "$out" == "::files" ]]; then
    _files
    return
  fi
  local -a cands
  cands=("${(@f)out}")
  (( ${#cands} )) && compadd -- "${cands[@]}"
}
compdef _sbx sbx
`,
	"fish": `# fish completion for sbx (sbx completion fish | source)
function __sbx_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l cur (commandline -ct)
    set -l out (sbx __complete "=$cur" $words 2>/dev/null)
    if test "$out[1]" = "::files"
        __fish_complete_path "$cur"
        return
    end
    printf '%s\n' $out
end
complete -c sbx -f -a '(__sbx_complete)'
`,
	"powershell": `# PowerShell completion for sbx (sbx completion powershell | Out-String | Invoke-Expression)
Register-ArgumentCompleter -Native -CommandName sbx -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $words = @($commandAst.CommandElements | Select-Object -Skip 1 | ForEach-Object { $_.ToString() })
    if ($wordToComplete -ne '' -and $words.Count -gt 0) { $words = @($words | Select-Object -SkipLast 1) }
    $out = @(& sbx __complete "=$wordToComplete" @words 2>$null)
    if ($out.Count -eq 1 -and $out[0] -eq '::files') {
        Get-ChildItem -Path "$wordToComplete*" -ErrorAction SilentlyContinue | ForEach-Object {
            [System.Management.Automation.CompletionResult]::new($_.Name, $_.Name, 'ProviderItem', $_.Name)
        }
        return
    }
    $out | ForEach-Object { [System.Management.Automation.CompletionResult]::new($_, $_, 'ParameterValue', $_) }
}
`,
}
