package invoke

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellOperatorChars are the characters that chain, pipe, redirect,
// substitute or expand in a POSIX shell.
const shellOperatorChars = ";|&`$<>()\n\r"

// checkCommand parses a command line as POSIX shell (mvdan.cc/sh) and
// returns why it may not run, or "" when it may. Unless the tool allows
// shell operators, a command must be one simple command whose words are
// plain or quoted text: no chaining, pipes, background jobs, redirections,
// substitutions, expansions of variables (they could leak the server's
// environment), subshells or compound commands.
func checkCommand(cmd string, allowOperators bool) string {
	if strings.ContainsRune(cmd, 0) {
		return "the command contains a NUL byte"
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return fmt.Sprintf("the command does not parse as shell: %v", err)
	}
	if allowOperators {
		return ""
	}
	// Operator characters are refused even inside quotes: an LLM's command
	// is judged by a simple rule it can follow, and a quoted payload cannot
	// break out of a later interpolation.
	if i := strings.IndexAny(cmd, shellOperatorChars); i >= 0 {
		return fmt.Sprintf("the command contains the shell operator %q; send one plain command without %s", cmd[i], "; | & ` $ < > ( ) or newlines")
	}
	if len(file.Stmts) != 1 {
		return fmt.Sprintf("the command holds %d statements; send one command (no ';', '&' or newlines)", len(file.Stmts))
	}
	st := file.Stmts[0]
	switch {
	case st.Background:
		return "the command runs in the background ('&')"
	case st.Negated:
		return "the command is negated ('!')"
	case len(st.Redirs) > 0:
		return "the command redirects input or output ('<', '>')"
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		switch st.Cmd.(type) {
		case *syntax.BinaryCmd:
			return "the command chains or pipes commands ('&&', '||', '|')"
		default:
			return "the command is a compound command (subshell, block, loop or condition)"
		}
	}
	if len(call.Assigns) > 0 {
		return "the command sets variables"
	}
	var reason string
	syntax.Walk(call, func(n syntax.Node) bool {
		if reason != "" {
			return false
		}
		switch n.(type) {
		case *syntax.CmdSubst:
			reason = "the command substitutes another command ('$(...)' or backquotes)"
		case *syntax.ProcSubst:
			reason = "the command substitutes a process ('<(...)')"
		case *syntax.ParamExp:
			reason = "the command expands a variable ('$NAME')"
		case *syntax.ArithmExp:
			reason = "the command uses arithmetic expansion"
		case *syntax.ExtGlob:
			reason = "the command uses extended globs"
		}
		return true
	})
	return reason
}
