package tooldef

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"toolbelt/models"
)

// A value filling a placeholder is exactly one argument, but a program
// reads an argument that starts with "-" as an option, and options run
// programs: make --eval, tar --use-compress-program, vim -c, find -exec,
// git -c alias.x=!cmd. No list of programs can know them all, so the rule
// holds for every program: a value that would be read as an option is
// refused when the call is made, unless the template welcomes options
// there. It does when
//   - the placeholder follows a "--" of the program that reads it,
//   - the value is one the parameter's schema lists (enum or const), or
//   - runner.optionArguments names the parameter.
//
// Registration keeps the two explicit forms coherent with the check of
// code positions (checkCodeArgument): a listed option is put in the
// template and the template checked again (vim -c makes the next
// placeholder a script), and a parameter that may be any option of a
// program known to run code from one needs runner.runsArgumentAsCode.
// An optional placeholder right after an option is refused too: left
// out, it would make the option take the next argument as its value
// (head -n {{lines}} {{path}} without lines reads the path as -n's).

// argvSlot says how the program reading an argv element reads it.
type argvSlot struct {
	prog   string // the program that reads the element
	ended  bool   // a "--" of that program came before: it reads no more options
	script bool   // an argument of a fixed script, which the interpreter hands on without reading (sh -c '…' sh {{x}})
	plus   bool   // the program reads a leading "+" as an option or a command too
	// assigns: the program evaluates an operand with "=" as a variable
	// assignment (make)
	assigns bool
}

// argvSlots reads argv as commandAt does and returns each element's slot.
func argvSlots(argv []string) []argvSlot {
	out := make([]argvSlot, len(argv))
	if len(argv) > 0 {
		readArgv(argv, 0, len(argv), out, 0)
	}
	return out
}

// readArgv fills out for argv[start:end], one command line; the command
// of a wrapper and of find -exec are read as their own.
func readArgv(argv []string, start, end int, out []argvSlot, depth int) {
	prog := programName(argv[start])
	rule := argvRules[prog]
	slot := argvSlot{prog: prog, plus: rule.plus || rule.combined, assigns: rule.assigns}
	out[start] = slot
	positional := 0
	for j := start + 1; j < end; j++ {
		a := argv[j]
		out[j] = slot
		// find's "--" ends only -H, -L and -P: its expression (-exec)
		// comes after.
		if a == "--" && !slot.ended && len(rule.sub) == 0 {
			slot.ended = true
			continue
		}
		if slot.script || slot.ended || isPlaceholder(a) || !readAsOption(a, slot) {
			if prog == "env" && positional == 0 && strings.Contains(a, "=") {
				continue // NAME=value
			}
			if !isPlaceholder(a) && !slot.script && positional >= rule.operands {
				if rule.wrapper && depth < 8 {
					readArgv(argv, j, end, out, depth+1)
					return
				}
				if rule.script && rule.stops {
					slot.script = true // a fixed script file: what follows are its arguments
				}
			}
			positional++
			continue
		}
		switch {
		case isFlag(prog, a, rule.sub):
			k := j + 1
			for k < end && argv[k] != ";" && argv[k] != "+" {
				k++
			}
			if k > j+1 && depth < 8 {
				readArgv(argv, j+1, k, out, depth+1)
			}
			if k < end {
				out[k] = slot
			}
			j = k
		case isFlag(prog, a, rule.code), rule.combined && combinedScript(a):
			k := j + 1
			for k < end && (argv[k] == "--" || argv[k] == "-") {
				out[k] = slot
				k++
			}
			if k < end {
				out[k] = slot
			}
			j = k
			if rule.stops {
				slot.script = true
			}
		case isFlag(prog, a, rule.values):
			if j+1 < end {
				out[j+1] = slot
			}
			j++
		case isFlag(prog, a, rule.pairs):
			for k := j + 1; k < end && k <= j+2; k++ {
				out[k] = slot
			}
			j += 2
		}
	}
}

// reader names who reads the element, for a message.
func (s argvSlot) reader() string {
	if s.script {
		return "the script that " + s.prog + " runs (it may pass it on)"
	}
	return s.prog
}

// readAsOption reports whether the program of slot would read a as an
// option: it starts with "-" (or "+" for vim, less and the shells) and
// the program's options have not ended.
func readAsOption(a string, slot argvSlot) bool {
	return !slot.ended && a != "" && (a[0] == '-' || slot.plus && a[0] == '+')
}

// takesNext reports whether a literal option may take the next argument
// as its value: not "--", not "-", not "--name=value".
func takesNext(a string, slot argvSlot) bool {
	if a == "--" || a == "-" || !readAsOption(a, slot) {
		return false
	}
	return !(strings.HasPrefix(a, "--") && strings.Contains(a, "="))
}

// ArgvError is an argument refused for its place in a command template.
type ArgvError struct {
	Param      string
	Message    string
	Suggestion string
}

func (e *ArgvError) Error() string { return e.Message }

// FillArgv is def's argv with each placeholder replaced by its argument,
// one argument each (an absent optional one left out), or an *ArgvError
// naming the argument that would be read as an option, or whose absence
// would make an option take the next argument as its value.
func FillArgv(def Definition, args map[string]any) ([]string, error) {
	argv := def.Runner.Argv
	slots := argvSlots(argv)
	var params *paramSchema
	out := make([]string, 0, len(argv))
	prevOption := "" // the element just before, when it may take the next argument as its value
	for i, el := range argv {
		m := Placeholder.FindStringSubmatch(el)
		if m == nil {
			out = append(out, el)
			prevOption = ""
			if takesNext(el, slots[i]) {
				prevOption = el
			}
			continue
		}
		name := m[1]
		v, ok := args[name]
		if !ok || v == nil {
			if prevOption != "" {
				return nil, &ArgvError{Param: name,
					Message: fmt.Sprintf("argument %q is needed by this tool's template: without it, %q before it would take the next argument as its value",
						name, prevOption),
					Suggestion: fmt.Sprintf("Pass %s.", name)}
			}
			continue
		}
		s, err := ScalarString(v)
		if err != nil {
			return nil, &ArgvError{Param: name, Message: fmt.Sprintf("argument %q: %v", name, err), Suggestion: "Pass a string, number or boolean."}
		}
		prevOption = ""
		if slots[i].assigns && !slots[i].script && strings.Contains(s, "=") && !allowed(def, &params, name, s) {
			return nil, &ArgvError{Param: name,
				Message: fmt.Sprintf("argument %q is %q: %s would read it as a variable assignment, which it evaluates, so it may not contain \"=\"",
					name, clip(s, 40), slots[i].prog),
				Suggestion: fmt.Sprintf("Pass %s without \"=\".", name)}
		}
		if readAsOption(s, slots[i]) {
			if !allowed(def, &params, name, s) {
				return nil, &ArgvError{Param: name,
					Message: fmt.Sprintf("argument %q is %q: %s would read it as an option, not as a value, so it may not start with %q",
						name, clip(s, 40), slots[i].reader(), s[:1]),
					Suggestion: fmt.Sprintf("Pass %s as a plain value, without the leading %q (a file named so as ./%s).", name, s[:1], clip(s, 40))}
			}
			if takesNext(s, slots[i]) {
				prevOption = s
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// allowed reports whether def welcomes s as an option for the parameter
// name: optionArguments names it, or its schema lists s; *params is
// parsed on first use.
func allowed(def Definition, params **paramSchema, name, s string) bool {
	if slices.Contains(def.Runner.OptionArguments, name) {
		return true
	}
	if *params == nil {
		*params = parseParams(def.Parameters)
	}
	return slices.Contains((*params).listed[name], s)
}

// clip shortens s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ScalarString is a JSON scalar as the text of one argument.
func ScalarString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		return x.String(), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", errors.New("must be a string, number or boolean to fill a template")
}

// paramSchema is what the argv checks read of a parameters schema: the
// root's required names and each root property's listed values (enum
// and const) as argument text.
type paramSchema struct {
	required []string
	listed   map[string][]string
}

func parseParams(raw json.RawMessage) *paramSchema {
	var doc struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Enum  []json.RawMessage `json:"enum"`
			Const json.RawMessage   `json:"const"`
		} `json:"properties"`
	}
	p := &paramSchema{listed: map[string][]string{}}
	if json.Unmarshal(raw, &doc) != nil {
		return p
	}
	p.required = doc.Required
	for name, prop := range doc.Properties {
		values := prop.Enum
		if prop.Const != nil {
			values = append(values, prop.Const)
		}
		for _, raw := range values {
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.UseNumber()
			var v any
			if dec.Decode(&v) != nil {
				continue
			}
			if s, err := ScalarString(v); err == nil {
				p.listed[name] = append(p.listed[name], s)
			}
		}
	}
	return p
}

// checkOptionArguments adds the problems of a command template whose
// placeholders may take options: a parameter named in optionArguments
// that may be any option of a program known to run code from one, a
// listed option that puts another placeholder in a code position, and
// an optional placeholder right after an option.
func checkOptionArguments(r Runner, parameters json.RawMessage, ps *models.Problems) {
	params := parseParams(parameters)
	slots := argvSlots(r.Argv)
	names := map[string][]int{} // placeholder name → its argv indexes
	for i, a := range r.Argv {
		if m := Placeholder.FindStringSubmatch(a); m != nil && i > 0 {
			names[m[1]] = append(names[m[1]], i)
		}
	}
	for k, name := range r.OptionArguments {
		ptr := "/runner/optionArguments/" + strconv.Itoa(k)
		idx, ok := names[name]
		if !ok {
			ps.Add(ptr, "%q names no placeholder of argv", name)
			continue
		}
		if r.RunsArgumentAsCode {
			continue
		}
		for _, i := range idx {
			s := slots[i]
			if _, known := argvRules[s.prog]; known && !s.ended && !s.script {
				ps.Add(ptr, "{{%s}} may then be any option of %s, and %s has options that run a program or read a script; list the options it may take in the parameter's enum, or set runner.runsArgumentAsCode to true if running the caller's code is this tool's purpose",
					name, s.prog, s.prog)
				break
			}
		}
	}
	if !r.RunsArgumentAsCode {
		for name, idx := range names {
			for _, v := range params.listed[name] {
				if !readAsOption(v, slots[idx[0]]) {
					continue
				}
				with := slices.Clone(r.Argv)
				for _, i := range idx {
					with[i] = v
				}
				if u := codeArgument(with); u.at >= 0 && u.how != useWorkDir {
					ps.Add("/runner/argv/"+strconv.Itoa(u.at), "with {{%s}} = %q, %s; or take %q out of the parameter's enum",
						name, v, u.problem(r.Argv), v)
				}
			}
		}
	}
	for i := 1; i < len(r.Argv); i++ {
		m := Placeholder.FindStringSubmatch(r.Argv[i])
		if m == nil || slices.Contains(params.required, m[1]) {
			continue
		}
		prev, prevSlot := r.Argv[i-1], slots[i-1]
		option := takesNext(prev, prevSlot)
		if pm := Placeholder.FindStringSubmatch(prev); pm != nil {
			option = !prevSlot.ended && (slices.Contains(r.OptionArguments, pm[1]) ||
				slices.ContainsFunc(params.listed[pm[1]], func(v string) bool { return takesNext(v, prevSlot) }))
		}
		if option {
			ps.Add("/runner/argv/"+strconv.Itoa(i), "{{%s}} is optional and follows %q: left out, %q would take the next argument as its value; make %s required, or put \"--\" between them if %q takes no value",
				m[1], prev, prev, m[1], prev)
		}
	}
}
