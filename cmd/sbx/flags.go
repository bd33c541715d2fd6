package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sbxhq/sbx/schema"
)

// globalFlags are the flags that may come before the verb, as git's and
// docker compose's global flags do (sbx -f x apply): the ones that say
// which declaration a verb works on. Before the verb they mean exactly
// what they mean after it; a verb that does not take one refuses it as
// it would after its name.
var globalFlags = []globalFlagDef{
	{"file", "f", true},
	{"driver", "", true},
	{"no-local", "", false},
}

type globalFlagDef struct {
	name, short string
	value       bool // takes a value
}

// splitGlobal moves the global flags before the verb to just after it:
// `sbx -f x --driver docker apply -y` is `sbx apply --file x --driver
// docker -y`. moved names the flags it moved. Only the first
// word that is not one of them is the verb; -h, --help and --version end
// the scan, as they are handled before any verb.
func splitGlobal(args []string) (out []string, moved []string, err error) {
	var global []string
	i := 0
scan:
	for ; i < len(args); i++ {
		tok := args[i]
		if !strings.HasPrefix(tok, "-") || tok == "-" {
			break
		}
		switch tok {
		case "--":
			return nil, nil, errors.New("no command after --")
		case "-h", "--help", "--version":
			break scan
		}
		name, val, hasVal := globalToken(tok)
		g, known := globalFlag(name)
		if !known {
			return nil, nil, unknownGlobal(tok)
		}
		moved = append(moved, g.name)
		switch {
		case !g.value:
			flag := "--" + name
			if hasVal {
				flag += "=" + val
			}
			global = append(global, flag)
		case hasVal:
			global = append(global, "--"+name, val)
		case i+1 < len(args):
			global = append(global, "--"+name, args[i+1])
			i++
		default:
			return nil, nil, fmt.Errorf("flag %s needs a value", tok)
		}
	}
	if len(global) == 0 {
		return args, nil, nil
	}
	if i == len(args) {
		return nil, nil, fmt.Errorf("no command after %s", strings.Join(args, " "))
	}
	out = append([]string{args[i]}, global...)
	return append(out, args[i+1:]...), moved, nil
}

// globalTokens is how many arguments splitGlobal put after the verb for
// the flags it moved.
func globalTokens(moved []string) int {
	n := 0
	for _, name := range moved {
		n++
		if g, _ := globalFlag(name); g.value {
			n++
		}
	}
	return n
}

// globalToken reads one flag before the verb: --name, --name=v, -name
// (Terraform's single dash), -f, -fv, -f=v. name is a global flag's long
// name when tok names one.
func globalToken(tok string) (name, val string, hasVal bool) {
	if rest, ok := strings.CutPrefix(tok, "--"); ok {
		return strings.Cut(rest, "=")
	}
	rest := tok[1:]
	n, v, has := strings.Cut(rest, "=")
	if _, ok := globalFlag(n); ok {
		return n, v, has
	}
	for _, g := range globalFlags {
		if g.short != "" && strings.HasPrefix(rest, g.short) {
			v := strings.TrimPrefix(rest[len(g.short):], "=")
			return g.name, v, v != "" || strings.Contains(rest, "=")
		}
	}
	return n, v, has
}

// globalFlag is the global flag with this long name.
func globalFlag(name string) (g globalFlagDef, ok bool) {
	for _, g := range globalFlags {
		if g.name == name {
			return g, true
		}
	}
	return g, false
}

// unknownGlobal is the error for a flag before the verb that is not a
// global one: it belongs after the verb.
func unknownGlobal(tok string) error {
	var names []string
	var spelled []string
	for _, g := range globalFlags {
		names = append(names, g.name)
		s := "--" + g.name
		if g.short != "" {
			s = "-" + g.short + "/" + s
		}
		spelled = append(spelled, s)
	}
	name, _, _ := strings.Cut(strings.TrimLeft(tok, "-"), "=")
	msg := fmt.Sprintf("unknown flag %s before the command", tok)
	if s := schema.Suggest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean --%s?", s)
	} else {
		msg += fmt.Sprintf(" (only %s go before it; write the others after the command)", strings.Join(spelled, ", "))
	}
	return errors.New(msg)
}

// movedShort are the shorthands that changed meaning, keyed "VERB -X":
// the old spelling gets an error that names the new one.
var movedShort = map[string]string{
	"loop logs -f": "-f is --file on every sbx verb; follow the log with --follow",
}

// flagError says what is wrong with a verb's flags, prefixed as every sbx
// message is, with the closest flag when one was mistyped (as cobra
// suggests commands): sbx: unknown flag --detailed-exit-code for "plan";
// did you mean --detailed-exitcode?
func flagError(verb string, fs *pflag.FlagSet, err error) string {
	var notExist *pflag.NotExistError
	var needs *pflag.ValueRequiredError
	switch {
	case errors.As(err, &notExist):
		name, group := notExist.GetSpecifiedName(), notExist.GetSpecifiedShortnames()
		var longs []string
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				longs = append(longs, f.Name)
			}
		})
		spelled := "--" + name
		typo := name
		if group != "" {
			spelled = "-" + name
			// -detailed-exit-code: a long name after one dash, as
			// Terraform spells them, that pflag read as shorthands.
			if len(group) > 1 && strings.HasPrefix(group, name) {
				spelled, typo = "-"+group, group
			}
		}
		msg := fmt.Sprintf("unknown flag %s for %q", spelled, verb)
		if s := schema.Suggest(strings.SplitN(typo, "=", 2)[0], longs); s != "" && len(typo) > 1 {
			msg += fmt.Sprintf("; did you mean --%s?", s)
		}
		return msg
	case errors.As(err, &needs):
		f := needs.GetFlag()
		spelled := "--" + f.Name
		if needs.GetSpecifiedShortnames() != "" {
			spelled = "-" + f.Shorthand
		}
		msg := fmt.Sprintf("flag %s of %q needs a value", spelled, verb)
		if hint := movedShort[verb+" "+spelled]; hint != "" {
			msg += "; " + hint
		}
		return msg
	}
	return fmt.Sprintf("%s: %v", verb, err)
}
